package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// meterName is the instrumentation scope of the engine's instruments.
const meterName = "github.com/edgesecrets/edgesecrets/agreement/delivery"

// Message events, the "event" attribute of edgesecrets.delivery.messages.
const (
	eventSealed       = "sealed"
	eventSent         = "sent"
	eventSendFailed   = "send_failed"
	eventTimedOut     = "timed_out"
	eventAcknowledged = "acknowledged"
	eventRejected     = "rejected"
)

// Cancellation events, the "event" attribute of
// edgesecrets.delivery.cancellations.
const (
	eventDecided  = "decided"
	eventHeld     = "held"
	eventReleased = "released"
)

// Membership events, the "event" attribute of
// edgesecrets.delivery.membership.events.
const (
	eventJoined      = "joined"
	eventLeaseLost   = "lease_lost"
	eventRenewFailed = "renew_failed"
)

// instruments are the engine's OpenTelemetry instruments. Their attributes
// are bounded sets (events, outcomes, conditions, reason codes): no
// agreement, node or secret name is ever an attribute.
type instruments struct {
	messages      metric.Int64Counter
	seal          metric.Float64Histogram
	convergence   metric.Float64Histogram
	cycles        metric.Int64Counter
	cycleDuration metric.Float64Histogram
	changes       metric.Int64Counter
	cancellations metric.Int64Counter
	membership    metric.Int64Counter
	registration  metric.Float64Histogram
	watched       atomic.Int64 // names the last cycle watched
}

// attrs caches one attribute set per value of a bounded attribute, so that
// recording allocates nothing.
type attrs map[string]metric.MeasurementOption

func newAttrs(key string, values ...string) attrs {
	a := attrs{}
	for _, v := range values {
		a[v] = metric.WithAttributeSet(attribute.NewSet(attribute.String(key, v)))
	}
	return a
}

var (
	messageAttrs      = newAttrs("event", eventSealed, eventSent, eventSendFailed, eventTimedOut, eventAcknowledged, eventRejected)
	cancellationAttrs = newAttrs("event", eventDecided, eventHeld, eventReleased)
	membershipAttrs   = newAttrs("event", eventJoined, eventLeaseLost, eventRenewFailed)
	cycleAttrs        = newAttrs("outcome", cycleHealthy, cycleUnavailable, cycleCredentials)
)

// Watcher cycle outcomes, the "outcome" attribute of
// edgesecrets.delivery.watch.cycles.
const (
	cycleHealthy     = "healthy"
	cycleUnavailable = "unavailable"
	cycleCredentials = "credentials"
)

// secondsBuckets are the histograms' bucket bounds, in seconds: from a
// millisecond (a seal) to ten minutes (a rotation reaching an agent that
// was away).
var secondsBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// newInstruments makes the engine's instruments from mp, or the global
// provider when mp is nil, and registers the callback of its gauges.
func newInstruments(mp metric.MeterProvider, e *Engine) (*instruments, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(meterName)
	in := &instruments{}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(secondsBuckets...))
		errs = append(errs, err)
		return h
	}
	in.messages = counter("edgesecrets.delivery.messages", "{message}",
		"Messages to agents by event: sealed, sent, send_failed, timed_out, acknowledged, rejected.")
	in.seal = histogram("edgesecrets.delivery.seal.duration", "Time to read, render and seal one message.")
	in.convergence = histogram("edgesecrets.delivery.convergence.duration",
		"Time from the watcher observing new content of a store secret to an agent acknowledging it, one per agreement and update.")
	in.cycles = counter("edgesecrets.delivery.watch.cycles", "{cycle}", "Watcher cycles by outcome: healthy, unavailable, credentials.")
	in.cycleDuration = histogram("edgesecrets.delivery.watch.cycle.duration", "Duration of one watcher cycle, the review included.")
	in.changes = counter("edgesecrets.delivery.watch.changes", "{change}", "Store secrets found changed, deleted or refused by the watcher.")
	in.cancellations = counter("edgesecrets.delivery.cancellations", "{cancellation}",
		"Cancellations by event: decided, held by the budget, released.")
	in.membership = counter("edgesecrets.delivery.membership.events", "{event}",
		"Membership events of a shared state: joined, lease_lost, renew_failed.")
	in.registration = histogram("edgesecrets.delivery.first_delivery.duration",
		"Time from an agreement's registration to its agent accepting the proposal.")

	agreements, err := m.Int64ObservableGauge("edgesecrets.delivery.agreements", metric.WithUnit("{agreement}"),
		metric.WithDescription("Agreements this agbot knows by condition (in_sync, due, in_flight, waiting, diverged, cancellation_held) and, when waiting, reason code."))
	errs = append(errs, err)
	problems, err := m.Int64ObservableGauge("edgesecrets.delivery.problems",
		metric.WithDescription("1 while the agbot has the problem: store (unavailable), store_credentials (the agbot's own credentials failing), state (the state unusable)."))
	errs = append(errs, err)
	interval, err := m.Float64ObservableGauge("edgesecrets.delivery.interval", metric.WithUnit("s"),
		metric.WithDescription("The engine's watcher interval, for alert thresholds in intervals."))
	errs = append(errs, err)
	watched, err := m.Int64ObservableGauge("edgesecrets.delivery.watch.names", metric.WithUnit("{secret}"),
		metric.WithDescription("Store secrets the watcher polls (bound by agreements, or awaited by deployments), as of the last cycle."))
	errs = append(errs, err)
	live, err := m.Int64ObservableGauge("edgesecrets.delivery.membership.live",
		metric.WithDescription("1 while the engine may deliver: its membership of a shared state is proven (always, on a state of its own)."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("delivery: metrics: %w", err)
	}
	problemAttrs := newAttrs("component", "store", "store_credentials", "state")
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for k, n := range e.conds.counts() {
			o.ObserveInt64(agreements, n, k.attrs())
		}
		store, creds, state := e.problems()
		o.ObserveInt64(problems, bit(store), problemAttrs["store"])
		o.ObserveInt64(problems, bit(creds), problemAttrs["store_credentials"])
		o.ObserveInt64(problems, bit(state), problemAttrs["state"])
		o.ObserveFloat64(interval, e.cfg.Interval.Seconds())
		o.ObserveInt64(live, bit(e.member.entitled()))
		o.ObserveInt64(watched, in.watched.Load())
		return nil
	}, agreements, problems, interval, live, watched)
	if err != nil {
		return nil, fmt.Errorf("delivery: metrics: %w", err)
	}
	return in, nil
}

func bit(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// message counts one message event.
func (in *instruments) message(event string) {
	in.messages.Add(context.Background(), 1, messageAttrs[event])
}

// cancellation counts n cancellation events.
func (in *instruments) cancellation(event string, n int) {
	if n > 0 {
		in.cancellations.Add(context.Background(), int64(n), cancellationAttrs[event])
	}
}

// member counts one membership event.
func (in *instruments) member(event string) {
	in.membership.Add(context.Background(), 1, membershipAttrs[event])
}

// cycle records one watcher cycle.
func (in *instruments) cycle(rep cycleReport, took time.Duration) {
	ctx := context.Background()
	outcome := cycleHealthy
	switch {
	case rep.credErr != nil:
		outcome = cycleCredentials
	case rep.problem() != "":
		outcome = cycleUnavailable
	}
	in.cycles.Add(ctx, 1, cycleAttrs[outcome])
	in.watched.Store(int64(rep.watched))
	in.cycleDuration.Record(ctx, took.Seconds())
}

// problems reports the engine-wide problems: the store unavailable, the
// agbot's own store credentials failing, the state unusable.
func (e *Engine) problems() (store, credentials, state bool) {
	h := e.Health(context.Background())
	e.mu.Lock()
	credentials = e.credProblem
	e.mu.Unlock()
	return h.StoreProblem != "" && !credentials, credentials, h.StateProblem != ""
}

// replyEffects collects what the agents' replies applied by one edit did,
// for the instruments once the edit is stored (a conflicting edit applies
// a reply again: the last application counts).
type replyEffects struct {
	events map[string]string          // by agreement: acknowledged or rejected
	fresh  map[string][]state.Content // by agreement: content an update brought the agent
	first  map[string]time.Time       // by agreement: its registration, for an accepted proposal
}

func newReplyEffects() *replyEffects {
	return &replyEffects{events: map[string]string{}, fresh: map[string][]state.Content{}, first: map[string]time.Time{}}
}

// answered records the agent's answer to in, the message in flight of r
// (before r takes it on).
func (fx *replyEffects) answered(r *state.Record, in *state.Sent, accepted bool) {
	if !accepted {
		fx.events[r.ID] = eventRejected
		delete(fx.fresh, r.ID)
		delete(fx.first, r.ID)
		return
	}
	fx.events[r.ID] = eventAcknowledged
	switch {
	case in.Type == agreement.TypeProposal:
		fx.first[r.ID] = r.CreatedAt
	case in.Kind == agreement.UpdateKindSecrets:
		var fresh []state.Content
		for i, c := range in.Contents {
			if i < len(r.Slots) && !r.Slots[i].Acked.IsZero() && r.Slots[i].Acked != c {
				fresh = append(fresh, c)
			}
		}
		fx.fresh[r.ID] = fresh
	}
}

// finishReplies records the effects of stored replies: the messages'
// events, the time to each agreement's first delivery, and the convergence
// latency of each update that brought an agent new content, from the
// observation of the newest such content (Observation.Since).
func (e *Engine) finishReplies(ctx context.Context, fx *replyEffects, now time.Time) {
	if len(fx.events) == 0 {
		return
	}
	var names []string
	for id, ev := range fx.events {
		e.inst.message(ev)
		for _, c := range fx.fresh[id] {
			names = append(names, c.StoreName)
		}
	}
	for _, created := range fx.first {
		if !created.IsZero() {
			e.inst.registration.Record(ctx, now.Sub(created).Seconds())
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	obs, err := e.state.Observations(ctx, slices.Compact(names))
	if err != nil {
		return // a sample lost, not an answer
	}
	for _, fresh := range fx.fresh {
		var since time.Time
		for _, c := range fresh {
			if o, ok := obs[c.StoreName]; ok && o.State == state.Present && o.Tag == c.Tag && o.Since.After(since) {
				since = o.Since
			}
		}
		if !since.IsZero() {
			e.inst.convergence.Record(ctx, max(0, now.Sub(since).Seconds()))
		}
	}
}
