package memory_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// A store opened from a config counts its calls with the MeterProvider
// given to Open, named after its backend.
func TestOpenPassesTheMeterProvider(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{"type": "memory"}`))
	require.NoError(t, err)
	s, err := secretstore.Open(ctx, cfg, secretstore.OpenOptions{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Put(ctx, &secretstore.Secret{Name: "db", Data: edgesecrets.Data{"k": []byte("v")}}, secretstore.PutOptions{})
	require.NoError(t, err)
	_, err = s.Get(ctx, "db")
	require.NoError(t, err)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	want := attribute.NewSet(attribute.String("backend", "memory"), attribute.String("operation", "get"), attribute.String("outcome", "ok"))
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "edgesecrets.store.operations" {
				for _, dp := range sum.DataPoints {
					if dp.Attributes.Equals(&want) {
						assert.EqualValues(t, 1, dp.Value)
						found = true
					}
				}
			}
		}
	}
	assert.True(t, found, "a get counted, backend memory, outcome ok")
}
