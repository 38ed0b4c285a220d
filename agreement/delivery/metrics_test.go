package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// meter is an SDK meter provider with a manual reader, for reading what
// the engine's instruments hold.
type meter struct {
	t      *testing.T
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newMeter(t *testing.T) *meter {
	reader := sdkmetric.NewManualReader()
	return &meter{t: t, reader: reader, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
}

// collect returns the instruments' data by name.
func (m *meter) collect() map[string]metricdata.Aggregation {
	m.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(m.t, m.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			out[x.Name] = x.Data
		}
	}
	return out
}

// gauge returns the gauge's value at the attributes (0 when absent).
func (m *meter) gauge(name string, kv ...attribute.KeyValue) int64 {
	m.t.Helper()
	want := attribute.NewSet(kv...)
	g, ok := m.collect()[name].(metricdata.Gauge[int64])
	require.True(m.t, ok, "%s is an int64 gauge", name)
	for _, p := range g.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Value
		}
	}
	return 0
}

// count returns the counter's value at the attributes.
func (m *meter) count(name string, kv ...attribute.KeyValue) int64 {
	m.t.Helper()
	want := attribute.NewSet(kv...)
	s, ok := m.collect()[name].(metricdata.Sum[int64])
	if !ok {
		return 0
	}
	for _, p := range s.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Value
		}
	}
	return 0
}

// histogram returns the histogram's one data point.
func (m *meter) histogram(name string) metricdata.HistogramDataPoint[float64] {
	m.t.Helper()
	h, ok := m.collect()[name].(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) == 0 {
		return metricdata.HistogramDataPoint[float64]{}
	}
	require.Len(m.t, h.DataPoints, 1)
	return h.DataPoints[0]
}

func condition(c delivery.Condition, reason delivery.ReasonCode) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("condition", string(c)), attribute.String("reason", string(reason))}
}

// An agreement's condition follows what the engine finds, on the
// agreements gauge and in Engine.Agreements: waiting with its reason while
// its secret cannot be rendered, in sync once rewritten.
func TestAgreementsGaugeFollowsTheCondition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMeter(t)
		h := newHarness(t, func(o *delivery.Options) { o.MeterProvider = m.mp })
		h.agent("node-1")
		_, err := h.store.Inner.Put(context.Background(), &secretstore.Secret{Name: "org/key",
			Data: edgesecrets.Data{"user": []byte(canary + "u"), "password": []byte(canary + "p")}}, secretstore.PutOptions{})
		require.NoError(t, err)
		require.NoError(t, h.engine.Register(context.Background(), formatAgreement(agreement.FormatRaw)))
		assert.EqualValues(t, 1, m.gauge("edgesecrets.delivery.agreements", condition(delivery.ConditionDue, "")...), "registered: due")
		h.start()
		defer h.stop()

		time.Sleep(2 * testInterval)
		synctest.Wait()
		waiting := condition(delivery.ConditionWaiting, delivery.ReasonFormatUnrenderable)
		assert.EqualValues(t, 1, m.gauge("edgesecrets.delivery.agreements", waiting...))
		assert.EqualValues(t, 0, m.gauge("edgesecrets.delivery.agreements", condition(delivery.ConditionDue, "")...))
		page := h.engine.Agreements(context.Background(), delivery.ListOptions{Reason: delivery.ReasonFormatUnrenderable})
		require.Len(t, page.Agreements, 1)
		got := page.Agreements[0]
		assert.Equal(t, "agr-1", got.ID)
		assert.Equal(t, "node-1", got.Node)
		assert.Equal(t, delivery.ConditionWaiting, got.Condition)
		require.NotNil(t, got.Reason)
		assert.Contains(t, got.Reason.Message, `format "raw" needs exactly one key`)
		assert.Empty(t, page.Next)
		assert.Equal(t, []delivery.ConditionCount{{Condition: delivery.ConditionWaiting, Reason: delivery.ReasonFormatUnrenderable, Agreements: 1}},
			h.engine.Health(context.Background()).Conditions)

		_, err = h.store.Inner.Put(context.Background(), &secretstore.Secret{Name: "org/key",
			Data: edgesecrets.Data{"key": []byte("api"), "value": []byte(canary + "v")}}, secretstore.PutOptions{})
		require.NoError(t, err)
		h.wait("agr-1", testInterval+testMaxDelay)
		synctest.Wait()
		assert.EqualValues(t, 0, m.gauge("edgesecrets.delivery.agreements", waiting...), "the reason cleared")
		assert.EqualValues(t, 1, m.gauge("edgesecrets.delivery.agreements", condition(delivery.ConditionInSync, "")...))
		assert.Empty(t, h.engine.Agreements(context.Background(), delivery.ListOptions{}).Agreements, "none out of sync")
		assert.EqualValues(t, 1, m.gauge("edgesecrets.delivery.membership.live"), "a state of its own: always live")
		assert.EqualValues(t, 60, m.collect()["edgesecrets.delivery.interval"].(metricdata.Gauge[float64]).DataPoints[0].Value)
	})
}

// A rotation adds one convergence sample per agreement whose agent
// acknowledged the new content, measured from the cycle that observed it;
// the messages are counted sealed, sent and acknowledged.
func TestConvergenceIsOneSamplePerAgentPerRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMeter(t)
		h := newHarness(t, func(o *delivery.Options) { o.MeterProvider = m.mp })
		const nodes = 3
		h.put("org/db", canary+"v1")
		for i := range nodes {
			node := fmt.Sprintf("node-%d", i)
			h.agent(node)
			h.register("agr-"+node, node, "org/db")
		}
		h.start()
		defer h.stop()
		for i := range nodes {
			h.wait(fmt.Sprintf("agr-node-%d", i), time.Minute)
		}
		synctest.Wait()
		assert.Zero(t, m.histogram("edgesecrets.delivery.convergence.duration").Count, "a proposal is no rotation")
		assert.EqualValues(t, nodes, m.histogram("edgesecrets.delivery.first_delivery.duration").Count)
		acked := attribute.String("event", "acknowledged")
		assert.EqualValues(t, nodes, m.count("edgesecrets.delivery.messages", acked))

		h.put("org/db", canary+"v2")
		time.Sleep(testInterval)
		synctest.Wait()
		for i := range nodes {
			h.wait(fmt.Sprintf("agr-node-%d", i), time.Minute)
		}
		synctest.Wait()
		conv := m.histogram("edgesecrets.delivery.convergence.duration")
		assert.EqualValues(t, nodes, conv.Count, "one sample per agent")
		assert.Less(t, conv.Sum, float64(nodes)*testInterval.Seconds(), "within the cycle that saw it")
		assert.EqualValues(t, 2*nodes, m.count("edgesecrets.delivery.messages", acked))
		// A batch whose records changed meanwhile (the first cycle's
		// observations) is sealed again and only then sent.
		assert.GreaterOrEqual(t, m.count("edgesecrets.delivery.messages", attribute.String("event", "sealed")), int64(2*nodes))
		assert.EqualValues(t, 2*nodes, m.count("edgesecrets.delivery.messages", attribute.String("event", "sent")))
		assert.Positive(t, m.histogram("edgesecrets.delivery.seal.duration").Count+1) // recorded; zero duration under synctest
		assert.Positive(t, m.count("edgesecrets.delivery.watch.cycles", attribute.String("outcome", "healthy")))
		assert.EqualValues(t, 1, m.gauge("edgesecrets.delivery.watch.names"), "org/db")
	})
}

// An agent that cannot be reached waits with ReasonAgentUnreachable, logged
// at WARN once however often it is retried, and cleared (INFO) when it
// answers.
func TestUnreachableAgentIsAReasonLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMeter(t)
		h := newHarness(t, func(o *delivery.Options) { o.MeterProvider = m.mp })
		agent := h.agent("node-1")
		agent.setDown(true)
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()

		time.Sleep(10 * testMaxDelay)
		synctest.Wait()
		unreachable := condition(delivery.ConditionWaiting, delivery.ReasonAgentUnreachable)
		assert.EqualValues(t, 1, m.gauge("edgesecrets.delivery.agreements", unreachable...))
		st := h.status("agr-1")
		require.NotNil(t, st.Reason)
		assert.Equal(t, delivery.ReasonAgentUnreachable, st.Reason.Code)
		assert.Contains(t, st.Reason.Message, `node "node-1"`)
		assert.Greater(t, st.Attempts, 3, "retried meanwhile")
		assert.Len(t, h.reasonLines("WARN", "agr-1", delivery.ReasonAgentUnreachable), 1, "once, not per retry")
		assert.Positive(t, m.count("edgesecrets.delivery.messages", attribute.String("event", "send_failed")))

		agent.setDown(false)
		require.NoError(t, h.engine.Resync(context.Background(), "node-1"))
		h.wait("agr-1", time.Minute)
		synctest.Wait()
		assert.EqualValues(t, 0, m.gauge("edgesecrets.delivery.agreements", unreachable...))
		assert.Contains(t, h.logs.String(), `"was":"AgentUnreachable"`, "its clearing is logged")
	})
}

// Many agreements held back for one reason in one batch are one log line
// with their count, not one per agreement.
func TestManyAgreementsWithOneReasonAreOneLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := &verifier{refuse: map[string]error{}}
		h := newHarness(t, func(o *delivery.Options) { o.Agents = v })
		v.fleet = h.fleet
		h.put("org/db", canary+"v1")
		const n = 20
		for i := range n {
			node := fmt.Sprintf("node-%02d", i)
			h.agent(node)
			v.set(node, errors.New("no record for the instance"))
			h.register(fmt.Sprintf("agr-%02d", i), node, "org/db")
		}
		h.start()
		defer h.stop()
		time.Sleep(5 * testMaxDelay)
		synctest.Wait()

		var lines []map[string]any
		for line := range strings.SplitSeq(strings.TrimSpace(h.logs.String()), "\n") {
			var r map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &r))
			if r["reason"] == string(delivery.ReasonAgentUnverified) {
				lines = append(lines, r)
			}
		}
		require.Len(t, lines, 1, "one line for the batch")
		assert.Equal(t, "WARN", lines[0]["level"])
		assert.EqualValues(t, n, lines[0]["agreements"])
		assert.Len(t, lines[0]["examples"], 3)
		page := h.engine.Agreements(context.Background(), delivery.ListOptions{Reason: delivery.ReasonAgentUnverified, Limit: 1000})
		assert.Len(t, page.Agreements, n)
	})
}

// countingState counts the calls that read records.
type countingState struct {
	state.Backend
	reads atomic.Int64
}

func (s *countingState) Get(ctx context.Context, id string) (state.Record, error) {
	s.reads.Add(1)
	return s.Backend.Get(ctx, id)
}

func (s *countingState) Records(ctx context.Context, fn func(state.Record) bool) error {
	s.reads.Add(1)
	return s.Backend.Records(ctx, fn)
}

func (s *countingState) RecordsAfter(ctx context.Context, after string, limit int, fn func(state.Record) bool) error {
	s.reads.Add(1)
	return s.Backend.RecordsAfter(ctx, after, limit, fn)
}

func (s *countingState) RecordsBound(ctx context.Context, names []string, fn func(state.Record) bool) error {
	s.reads.Add(1)
	return s.Backend.RecordsBound(ctx, names, fn)
}

func (s *countingState) Due(ctx context.Context, member string, now time.Time, lease time.Duration, limit int) ([]state.Record, error) {
	s.reads.Add(1)
	return s.Backend.Due(ctx, member, now, lease, limit)
}

// Listing agreements by condition pages through them in ID order without
// reading the state: the cost follows the agreements listed, on every
// state.
func TestAgreementsListPagesWithoutReadingTheState(t *testing.T) {
	states := map[string]func(t *testing.T) state.Backend{
		"memory": func(*testing.T) state.Backend { return state.NewMemory() },
		"embedded": func(t *testing.T) state.Backend {
			s, _, err := boltstate.Open(filepath.Join(t.TempDir(), "agbot.db"), boltstate.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"postgres": func(t *testing.T) state.Backend {
			db := pgtest.Start(t, pgtest.Options{}).CreateDatabase(t)
			s, _, err := pgstate.Open(t.Context(), pgstate.Options{URL: db.URL})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	for name, open := range states {
		t.Run(name, func(t *testing.T) {
			counting := &countingState{Backend: open(t)}
			h := newHarness(t, func(o *delivery.Options) { o.State = counting })
			const n = 95
			for i := range n {
				h.register(fmt.Sprintf("agr-%03d", i), fmt.Sprintf("node-%03d", i), "org/db")
			}
			before := counting.reads.Load()
			var ids []string
			after := ""
			pages := 0
			for {
				page := h.engine.Agreements(context.Background(), delivery.ListOptions{Condition: delivery.ConditionDue, After: after, Limit: 10})
				pages++
				for _, a := range page.Agreements {
					ids = append(ids, a.ID)
					assert.Equal(t, delivery.ConditionDue, a.Condition)
				}
				if page.Next == "" {
					break
				}
				after = page.Next
			}
			assert.Equal(t, 10, pages)
			require.Len(t, ids, n)
			assert.IsIncreasing(t, ids)
			assert.Equal(t, before, counting.reads.Load(), "no record read")
			assert.Empty(t, h.engine.Agreements(context.Background(), delivery.ListOptions{Condition: delivery.ConditionInSync}).Agreements)
			assert.Empty(t, h.engine.Agreements(context.Background(), delivery.ListOptions{Reason: delivery.ReasonAgentUnverified}).Agreements)
		})
	}
}
