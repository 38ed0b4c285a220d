package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// BenchmarkRotationFanOutMetered measures what OpenTelemetry's SDK costs
// the 10,000-agreement rotation fan-out: two engines on memory states, one
// with an SDK meter provider installed (a manual reader, collected after
// each rotation, as a scrape would), one without (the global no-op),
// rotated by turns; "metered/plain" is the metered engine's throughput as
// a fraction of the plain one's:
//
//	go test -run '^$' -bench RotationFanOutMetered -benchtime 10x ./agreement/delivery/
func BenchmarkRotationFanOutMetered(b *testing.B) {
	const n = 10_000
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	b.Cleanup(func() { _ = mp.Shutdown(ctx) })
	type engine struct {
		rotate func()
		took   time.Duration
	}
	newEngine := func(configure ...func(*delivery.Options)) *engine {
		e, store, a, _, stop := benchEngine(b, n, agreement.SuiteMLKEM768X25519, state.NewMemory(), configure...)
		b.Cleanup(stop)
		version := 0
		return &engine{rotate: func() {
			version++
			a.expect(n)
			_, err := store.Put(ctx, &secretstore.Secret{Name: "org/db", Data: edgesecrets.Data{"password": fmt.Appendf(nil, "v%d", version)}}, secretstore.PutOptions{})
			require.NoError(b, err)
			e.TriggerCycle()
			<-a.arrived
		}}
	}
	plain := newEngine()
	metered := newEngine(func(o *delivery.Options) { o.MeterProvider = mp })
	var rm metricdata.ResourceMetrics
	runPlain := func() {
		start := time.Now()
		plain.rotate()
		plain.took += time.Since(start)
	}
	runMetered := func() {
		start := time.Now()
		metered.rotate()
		require.NoError(b, reader.Collect(ctx, &rm))
		metered.took += time.Since(start)
	}
	// By turns, each first every other time: neither pays the other's
	// garbage more often.
	odd := false
	for b.Loop() {
		if odd = !odd; odd {
			runPlain()
			runMetered()
		} else {
			runMetered()
			runPlain()
		}
	}
	b.ReportMetric(plain.took.Seconds()/metered.took.Seconds(), "metered/plain")
	b.ReportMetric(float64(plain.took.Nanoseconds())/float64(b.N*n), "plain-ns/agreement")
	b.ReportMetric(float64(metered.took.Nanoseconds())/float64(b.N*n), "metered-ns/agreement")
}

// BenchmarkAgreementsByReason lists a page of 100 agreements waiting for
// one reason, 1,000 of them, among 10,000 and 100,000 known agreements:
// the cost follows the agreements with that reason, not the fleet (compare
// the two sizes' ns/op):
//
//	go test -run '^$' -bench AgreementsByReason -benchmem ./agreement/delivery/
func BenchmarkAgreementsByReason(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("agreements=%d", n), func(b *testing.B) {
			keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
			require.NoError(b, err)
			e, err := delivery.New(delivery.Options{Store: memory.New(), State: state.NewMemory(), Keys: keys,
				Agents: newFleet(), Transport: newFleet()})
			require.NoError(b, err)
			for i := range n {
				c, reason := delivery.ConditionInSync, delivery.ReasonCode("")
				if i%(n/1000) == 0 {
					c, reason = delivery.ConditionWaiting, delivery.ReasonFormatUnrenderable
				}
				e.SetCondition(fmt.Sprintf("agr-%07d", i), "node", c, reason)
			}
			opts := delivery.ListOptions{Reason: delivery.ReasonFormatUnrenderable}
			for b.Loop() {
				if page := e.Agreements(context.Background(), opts); len(page.Agreements) != 100 {
					b.Fatalf("listed %d", len(page.Agreements))
				}
			}
		})
	}
}
