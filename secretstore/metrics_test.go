package secretstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// TestStoreMetrics proves the operations counter and the duration
// histogram carry backend, operation and outcome.
func TestStoreMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	drv := notFoundDriver{}
	s, err := secretstore.New(drv, secretstore.Options{Backend: "memory", MeterProvider: mp})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = s.Get(ctx, "absent")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	want := attribute.NewSet(attribute.String("backend", "memory"), attribute.String("operation", "get"), attribute.String("outcome", "not_found"))
	var sawCount, sawHist bool
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				require.Equal(t, "edgesecrets.store.operations", m.Name)
				require.Len(t, d.DataPoints, 1)
				require.True(t, d.DataPoints[0].Attributes.Equals(&want))
				require.EqualValues(t, 1, d.DataPoints[0].Value)
				sawCount = true
			case metricdata.Histogram[float64]:
				require.Equal(t, "edgesecrets.store.operation.duration", m.Name)
				require.Equal(t, "s", m.Unit)
				require.Len(t, d.DataPoints, 1)
				require.True(t, d.DataPoints[0].Attributes.Equals(&want))
				require.EqualValues(t, 1, d.DataPoints[0].Count)
				sawHist = true
			}
		}
	}
	require.True(t, sawCount && sawHist)
}

// notFoundDriver answers every call with the backend's "not found".
type notFoundDriver struct{}

func (notFoundDriver) Get(context.Context, string) (*driver.Secret, error) {
	return nil, &secretstore.Error{Kind: edgesecrets.ErrNotFound}
}
func (notFoundDriver) Stat(context.Context, string) (*driver.Secret, error) {
	return nil, &secretstore.Error{Kind: edgesecrets.ErrNotFound}
}
func (notFoundDriver) Put(context.Context, *driver.Write) error { return nil }
func (notFoundDriver) Delete(context.Context, string) error     { return nil }
func (notFoundDriver) List(context.Context, string) ([]string, error) {
	return nil, nil
}
func (notFoundDriver) Close() error { return nil }

// TestAStatAllocatesNothing: a watcher cycle makes a Stat per watched
// name, so a Stat of a secret with a version (and no labels) allocates
// nothing, the metric options included.
func TestAStatAllocatesNothing(t *testing.T) {
	s, err := secretstore.New(versionDriver{s: &driver.Secret{Version: "7"}}, secretstore.Options{Backend: "memory", MeterProvider: noop.NewMeterProvider()})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = s.Stat(ctx, "db/password") // the first call of an outcome makes its options
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.Stat(ctx, "db/password"); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// versionDriver answers every read with the same secret, and everything
// else as notFoundDriver does.
type versionDriver struct {
	notFoundDriver
	s *driver.Secret
}

func (d versionDriver) Get(context.Context, string) (*driver.Secret, error)  { return d.s, nil }
func (d versionDriver) Stat(context.Context, string) (*driver.Secret, error) { return d.s, nil }
