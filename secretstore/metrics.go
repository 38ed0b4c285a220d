package secretstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// meterName is the instrumentation scope of the store's instruments.
const meterName = "github.com/edgesecrets/edgesecrets/secretstore"

// instruments are a Store's OpenTelemetry instruments.
type instruments struct {
	backend  attribute.KeyValue
	ops      metric.Int64Counter
	duration metric.Float64Histogram
	// sets holds the options of each operation and outcome seen, made
	// once: a watcher cycle records a call per watched name, and a
	// variadic option made at each call would be two allocations a name.
	sets sync.Map // opOutcome → *measurement
}

// measurement is the attribute set of one operation and outcome, as the
// options the counter and the histogram take.
type measurement struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// opOutcome keys instruments.sets.
type opOutcome struct{ op, outcome string }

// newInstruments makes the instruments from mp, or the global provider
// when mp is nil.
func newInstruments(mp metric.MeterProvider, backend string) (*instruments, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if backend == "" {
		backend = "unknown"
	}
	m := mp.Meter(meterName)
	ops, err := m.Int64Counter("edgesecrets.store.operations",
		metric.WithUnit("{operation}"),
		metric.WithDescription("Calls of the secret store by backend, operation and outcome."))
	if err != nil {
		return nil, fmt.Errorf("metric edgesecrets.store.operations: %w", err)
	}
	dur, err := m.Float64Histogram("edgesecrets.store.operation.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of secret store calls, retries included."))
	if err != nil {
		return nil, fmt.Errorf("metric edgesecrets.store.operation.duration: %w", err)
	}
	return &instruments{backend: attribute.String("backend", backend), ops: ops, duration: dur}, nil
}

// outcome names the kind of err for the "outcome" attribute.
func outcome(err error) string {
	switch edgesecrets.KindOf(err) {
	case nil:
		if err == nil {
			return "ok"
		}
		if isContextError(err) {
			return "canceled"
		}
		return "other"
	case edgesecrets.ErrNotFound: //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
		return "not_found"
	case edgesecrets.ErrPermission:
		return "permission"
	case edgesecrets.ErrUnavailable:
		return "unavailable"
	case edgesecrets.ErrConflict:
		return "conflict"
	case edgesecrets.ErrInvalid:
		return "invalid"
	}
	return "other"
}

// observe records one call of op that began at start and ended with err.
func (in *instruments) observe(op string, start time.Time, err error) {
	key := opOutcome{op, outcome(err)}
	v, ok := in.sets.Load(key)
	if !ok {
		attrs := metric.WithAttributeSet(attribute.NewSet(in.backend, attribute.String("operation", key.op), attribute.String("outcome", key.outcome)))
		v, _ = in.sets.LoadOrStore(key, &measurement{add: []metric.AddOption{attrs}, record: []metric.RecordOption{attrs}})
	}
	m := v.(*measurement)
	ctx := context.Background()
	in.ops.Add(ctx, 1, m.add...)
	in.duration.Record(ctx, time.Since(start).Seconds(), m.record...)
}
