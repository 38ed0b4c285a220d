package delivery_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/scalefleet"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// Scale benchmarks: a fleet loaded straight into the state
// (internal/testkit/scalefleet), every agreement in sync with the store, 1,000
// secrets: agreement i binds org/hot when i%100 == 0 (1 % of the fleet),
// org/s-NNN otherwise.

// scaleFleet fills st with n agreements in sync with store, the
// agents of the keyed ones with keys.
func scaleFleet(b *testing.B, st state.Backend, store *secretstore.Store, agents *benchAgents, n int, bind func(int) string) {
	b.Helper()
	_, err := scalefleet.Load(context.Background(), st, store, scalefleet.Options{N: n, Bind: bind, AgentKey: func(i int) agreement.KeyID {
		if k, ok := agents.keys[scalefleet.Node(i)]; ok {
			return k.Public().EncryptionKeyID()
		}
		return ""
	}})
	require.NoError(b, err)
}

// scaleEngine is an engine over a loaded fleet, not running: the
// benchmark runs its cycles (Cycle) or Run itself.
func scaleEngine(b *testing.B, st state.Backend, n int, bind func(int) string, keyed func(int) bool) (*delivery.Engine, *secretstore.Store, *benchAgents) {
	b.Helper()
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	require.NoError(b, err)
	agents := &benchAgents{agbot: keys.Public(), keys: map[string]*agreement.PrivateKeys{}, arrived: make(chan struct{}, 1)}
	for i := range n {
		if keyed(i) {
			k, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
			require.NoError(b, err)
			agents.keys[scalefleet.Node(i)] = k
		}
	}
	agents.counting.Store(true)
	store := memory.New()
	scaleFleet(b, st, store, agents, n, bind)
	e, err := delivery.New(delivery.Options{
		Store: store, State: st, Keys: keys, Agents: agents, Transport: agents,
		Interval: time.Second, ReplyTimeout: time.Hour, MaxDelay: time.Hour,
	})
	require.NoError(b, err)
	return e, store, agents
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func scaleStates(b *testing.B) []struct {
	name string
	open func() state.Backend
} {
	return []struct {
		name string
		open func() state.Backend
	}{
		{"memory", func() state.Backend { return state.NewMemory() }},
		{"embedded", func() state.Backend {
			s, _, err := boltstate.Open(filepath.Join(b.TempDir(), "agbot.db"), boltstate.Options{})
			require.NoError(b, err)
			b.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}
}

// BenchmarkIdleCycle measures one watcher cycle of an agbot whose fleet is
// in sync and whose store does not change: the work every interval costs
// (1 s interval, the default 5 min resync period). cpu-ms/interval is the
// process's CPU time per cycle, the garbage collector's included; compare
// 10,000 with 100,000 agreements. A thousand cycles at least, so that the
// collections of a large heap are spread over the cycles fairly:
//
//	go test -run '^$' -bench 'IdleCycle' -benchtime 1000x -benchmem ./agreement/delivery/
func BenchmarkIdleCycle(b *testing.B) {
	for _, st := range scaleStates(b) {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/agreements=%d", st.name, n), func(b *testing.B) {
				e, _, agents := scaleEngine(b, st.open(), n, scalefleet.Secret, func(int) bool { return false })
				ctx := context.Background()
				e.Cycle(ctx) // the first pass reviews every agreement
				e.Cycle(ctx)
				cpu := cpuTime(b)
				for b.Loop() {
					e.Cycle(ctx)
				}
				b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/interval")
				require.Zero(b, agents.sent.Load(), "an idle fleet is sent nothing")
			})
		}
	}
}

// BenchmarkRotateOnePercent measures rotating org/hot, bound to 1 % of
// 100,000 agreements, against delivering those 1,000 agreements alone
// (a state holding only them): from the store write to the 1,000th
// update handed to the transport.
func BenchmarkRotateOnePercent(b *testing.B) {
	const n = 100_000
	hot := func(i int) bool { return i%100 == 0 }
	for _, st := range scaleStates(b) {
		for _, c := range []struct {
			name  string
			n     int
			count int // agreements stored
			bind  func(int) string
		}{
			{"fleet=100000", n, n, scalefleet.Secret},
			// Those 1,000 alone, with the same ids and nodes.
			{"alone=1000", n, n / 100, func(i int) string {
				if hot(i) {
					return scalefleet.Hot
				}
				return ""
			}},
		} {
			b.Run(st.name+"/"+c.name, func(b *testing.B) {
				e, store, agents := scaleEngine(b, st.open(), c.n, c.bind, hot)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); _ = e.Run(ctx) }()
				b.Cleanup(func() { cancel(); <-done })
				for e.Health(ctx).Agreements != c.count {
					e.TriggerCycle() // until the first review pass is done
					time.Sleep(10 * time.Millisecond)
				}
				version := 0
				cpu := cpuTime(b)
				for b.Loop() {
					version++
					agents.expect(n / 100)
					_, err := store.Put(context.Background(), &secretstore.Secret{Name: scalefleet.Hot, Data: edgesecrets.Data{"password": fmt.Appendf(nil, "v%d", version)}}, secretstore.PutOptions{})
					require.NoError(b, err)
					e.TriggerCycle()
					<-agents.arrived
				}
				b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/rotation")
			})
		}
	}
}
