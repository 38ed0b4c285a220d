package pgstate_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// fanOutAgents are agents that only have keys: during setup they accept
// every message with a real sealed reply; once counting, they take each
// envelope without answering (an asynchronous transport), so a rotation
// measures the engines and their state, as the delivery package's own
// fan-out benchmark does.
type fanOutAgents struct {
	agbot    *agreement.PublicKeys
	keys     map[string]*agreement.PrivateKeys
	counting atomic.Bool
	sent     atomic.Int64
	target   atomic.Int64
	arrived  chan struct{}
}

func (a *fanOutAgents) Keys(_ context.Context, node string) (*agreement.PublicKeys, error) {
	return a.keys[node].Public(), nil
}

func (a *fanOutAgents) Send(_ context.Context, m delivery.Message) ([]byte, error) {
	if a.counting.Load() {
		if a.sent.Add(1) == a.target.Load() {
			a.arrived <- struct{}{}
		}
		return nil, nil
	}
	h, err := agreement.PeekHeader(m.Envelope, agreement.Options{})
	if err != nil {
		return nil, err
	}
	return agreement.Seal(a.keys[m.Node], a.agbot, agreement.NewReply(h, true, ""), agreement.Header{Sequence: h.Sequence}, agreement.Options{})
}

// fanOut is one configuration: engines sharing a state, n agreements all
// bound to org/db.
type fanOut struct {
	name   string
	store  *secretstore.Store
	agents *fanOutAgents
	gen    int
}

// rotate changes org/db and waits until every agreement's update was
// handed to the transport.
func (f *fanOut) rotate(b *testing.B, n int) time.Duration {
	f.gen++
	f.agents.target.Store(f.agents.sent.Load() + int64(n))
	start := time.Now()
	_, err := f.store.Put(b.Context(), &secretstore.Secret{Name: "org/db", Data: edgesecrets.Data{"password": fmt.Appendf(nil, "gen%d", f.gen)}}, secretstore.PutOptions{})
	require.NoError(b, err)
	select {
	case <-f.agents.arrived:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%s: %d of %d updates sent after 5 minutes", f.name, f.agents.sent.Load()-(f.agents.target.Load()-int64(n)), n)
	}
	return time.Since(start)
}

// newFanOut starts engines, one per state, with n agreements in sync.
func newFanOut(b *testing.B, name string, n int, keys *agreement.PrivateKeys, agentKeys map[string]*agreement.PrivateKeys, states []state.Backend, members []string) *fanOut {
	ctx := b.Context()
	f := &fanOut{name: name, store: memory.New(), agents: &fanOutAgents{agbot: keys.Public(), keys: agentKeys, arrived: make(chan struct{}, 1)}}
	_, err := f.store.Put(ctx, &secretstore.Secret{Name: "org/db", Data: edgesecrets.Data{"password": []byte("gen0")}}, secretstore.PutOptions{})
	require.NoError(b, err)
	var engines []*delivery.Engine
	for i, st := range states {
		e, err := delivery.New(delivery.Options{
			Store: f.store, State: st, Keys: keys, Agents: f.agents, Transport: f.agents,
			Interval: time.Second, ReplyTimeout: time.Hour, InitialDelay: 100 * time.Millisecond, MaxDelay: time.Hour,
			Member: members[i],
		})
		require.NoError(b, err)
		engines = append(engines, e)
	}
	var wg sync.WaitGroup
	const writers = 8
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				a := delivery.Agreement{ID: fmt.Sprintf("agr-%05d", i), Node: fanOutNode(i), Services: []binding.ServiceBinding{{
					Service: agreement.ServiceRef{Org: "org", URL: "svc", Version: "1.0.0"},
					Secrets: map[string]binding.BoundSecret{"pw": {StoreNames: []string{"org/db"}}},
				}}}
				if err := engines[0].Register(ctx, a); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	runCtx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	for _, e := range engines {
		running.Go(func() { _ = e.Run(runCtx) })
	}
	b.Cleanup(func() { cancel(); running.Wait() })
	for {
		ok, err := converged(ctx, states[0])
		require.NoError(b, err)
		if ok {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.agents.counting.Store(true)
	return f
}

func fanOutNode(i int) string { return fmt.Sprintf("node-%05d", i) }

// BenchmarkRotationFanOut measures one rotation fanned out to 10,000
// agreements (the watcher's cycle, the value read, each update sealed,
// stored in flight and handed to the transport) by an engine on the
// embedded state, by one on PostgreSQL, and by two engines sharing
// PostgreSQL. The three take turns, rotation by rotation, so that a
// machine whose load drifts skews the ratios least:
//
//	go test -run '^$' -bench RotationFanOut -benchtime 3x ./agreement/delivery/pgstate/
//
// postgres/bolt is the throughput of one engine on PostgreSQL as a
// fraction of one on the embedded state; 2agbots/1agbot that of two
// engines sharing PostgreSQL as a multiple of one.
func BenchmarkRotationFanOut(b *testing.B) {
	const n = 10_000
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	require.NoError(b, err)
	agentKeys := make(map[string]*agreement.PrivateKeys, n)
	for i := range n {
		agentKeys[fanOutNode(i)], err = agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
		require.NoError(b, err)
	}
	bolt, _, err := boltstate.Open(filepath.Join(b.TempDir(), "agbot.db"), boltstate.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = bolt.Close() })
	pgStates := func(members ...string) []state.Backend {
		db := pgtest.NewDatabase(b)
		var out []state.Backend
		for _, m := range joinAll(b, db.URL, pgstate.Options{LeasePeriod: time.Hour}, members...) {
			out = append(out, m.sharedState)
		}
		return out
	}
	configs := []*fanOut{
		newFanOut(b, "bolt", n, keys, agentKeys, []state.Backend{bolt}, []string{"agbot-1"}),
		newFanOut(b, "postgres", n, keys, agentKeys, pgStates("agbot-1"), []string{"agbot-1"}),
		newFanOut(b, "postgres-2-agbots", n, keys, agentKeys, pgStates("agbot-1", "agbot-2"), []string{"agbot-1", "agbot-2"}),
	}
	took := make([]time.Duration, len(configs))
	b.ResetTimer()
	for b.Loop() {
		for i, c := range configs {
			took[i] += c.rotate(b, n)
		}
	}
	perAgreement := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*n) }
	for i, c := range configs {
		b.ReportMetric(perAgreement(took[i]), c.name+"-ns/agreement")
	}
	b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "postgres/bolt")
	b.ReportMetric(took[1].Seconds()/took[2].Seconds(), "2agbots/1agbot")
}
