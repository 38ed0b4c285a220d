package delivery_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
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
func scaleFleet(b *testing.B, st *scaleState, store *secretstore.Store, agents *benchAgents, n int, bind func(int) string) {
	b.Helper()
	_, err := scalefleet.Load(context.Background(), st.st, store, scalefleet.Options{N: n, Bind: bind, Member: st.member, AgentKey: func(i int) agreement.KeyID {
		if k, ok := agents.keys[scalefleet.Node(i)]; ok {
			return k.Public().EncryptionKeyID()
		}
		return ""
	}})
	require.NoError(b, err)
	if st.db != nil {
		scalefleet.Settle(b, st.db)
	}
}

// scaleEngine is an engine over a loaded fleet, not running: the
// benchmark runs it (runEngine). Its resync period is 300 intervals, as
// the defaults have it (1 s and 5 min), so that a cycle reviews the same
// slice of the fleet whatever the interval.
func scaleEngine(b *testing.B, st *scaleState, n int, bind func(int) string, keyed func(int) bool, interval time.Duration) (*delivery.Engine, *secretstore.Store, *benchAgents) {
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
		Store: store, State: st.st, Keys: keys, Agents: agents, Transport: agents,
		Interval: interval, ResyncPeriod: 300 * interval, ReplyTimeout: time.Hour, MaxDelay: time.Hour,
		Member: st.member,
	})
	require.NoError(b, err)
	return e, store, agents
}

// runEngine runs e until b ends, and returns once its first review pass
// is done (Health counts the agreements after a complete pass; on a shared
// State give or take a slice, so not exactly the fleet).
func runEngine(b *testing.B, e *delivery.Engine) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	for e.Health(ctx).Agreements == 0 {
		e.TriggerCycle()
		time.Sleep(10 * time.Millisecond)
	}
}

// scaleState is a state the scale benchmarks run on, opened empty.
type scaleState struct {
	// st is the state itself, not embedded: an engine finds a shared
	// state's membership and review by type assertion on it.
	st     state.Backend
	member string           // the member an engine on it is; "" when it is not shared
	db     *pgtest.Database // PostgreSQL's, on a server of its own
	cpu    scalefleet.CPU   // the agbot's and the database's
}

// scaleStates are the states the scale benchmarks compare: memory,
// embedded and PostgreSQL (a server of each benchmark's own, the agbot a
// member that joined).
func scaleStates() []struct {
	name string
	open func(b *testing.B) *scaleState
} {
	return []struct {
		name string
		open func(b *testing.B) *scaleState
	}{
		{"memory", func(*testing.B) *scaleState { return &scaleState{st: state.NewMemory()} }},
		{"embedded", func(b *testing.B) *scaleState {
			s, _, err := boltstate.Open(filepath.Join(b.TempDir(), "agbot.db"), boltstate.Options{})
			require.NoError(b, err)
			b.Cleanup(func() { _ = s.Close() })
			return &scaleState{st: s}
		}},
		{"postgres", func(b *testing.B) *scaleState {
			db := pgtest.Start(b, pgtest.Options{}).CreateDatabase(b)
			s, _, err := pgstate.Open(b.Context(), pgstate.Options{URL: db.URL})
			require.NoError(b, err)
			b.Cleanup(func() { _ = s.Close() })
			_, err = s.Join(b.Context(), "agbot-1")
			require.NoError(b, err)
			return &scaleState{st: s, member: "agbot-1", db: db, cpu: scalefleet.CPU{DB: db.Server()}}
		}},
	}
}

// BenchmarkIdleCycle measures the work of one interval (1 s, the default
// 5 min resync period) of an agbot whose fleet is in sync and whose store
// does not change, on each state, in two parts. The watcher's cycle (the
// store polled, the review's slice of 1/300 of the fleet): the engine runs
// (Run, its membership kept on PostgreSQL) with an interval of an hour and
// a resync period of 300 hours, the same slice, and the benchmark starts
// its cycles one after the other, so that a cycle finds the memory the
// previous one touched still warm (cycle-cpu-ms). And the work the clock
// drives apart from the cycles (the reconcile loop's poll of the due
// agreements, each second; the membership's heartbeat): the same engine
// left alone for five seconds first (clock-cpu-ms/s). cpu-ms/interval is
// the two together, the process's CPU (the garbage collector's included)
// and the database server's on PostgreSQL (agbot- and db-cpu-ms/interval
// apart). On a machine that makes memory left idle for a second several
// times slower to read, this is the engine's own cost, which
// BenchmarkIdleInterval of the pgstate package measures with the cycles
// a second apart. Compare 10,000 with 100,000 agreements; a thousand
// cycles at least, so that the collections of a large heap are spread
// over the cycles fairly:
//
//	go test -run '^$' -bench 'IdleCycle' -benchtime 1000x -benchmem ./agreement/delivery/
func BenchmarkIdleCycle(b *testing.B) {
	const clockSeconds = 5
	for _, st := range scaleStates() {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/agreements=%d", st.name, n), func(b *testing.B) {
				s := st.open(b)
				e, _, agents := scaleEngine(b, s, n, scalefleet.Secret, func(int) bool { return false }, time.Hour)
				runEngine(b, e)
				// The heap the loading left, collected and handed back
				// to the system now: otherwise the runtime's scavenger
				// returns it while the clock's work is measured.
				debug.FreeOSMemory()
				mark := s.cpu.Now(b)
				time.Sleep(clockSeconds * time.Second)
				clock := s.cpu.Since(b, mark, clockSeconds)
				ctx := b.Context()
				e.StartCycle(ctx)
				e.StartCycle(ctx)
				mark = s.cpu.Now(b)
				for b.Loop() {
					e.StartCycle(ctx)
				}
				cycle := s.cpu.Since(b, mark, b.N)
				ms := func(u scalefleet.Usage) float64 { return float64((u.Agbot + u.DB).Microseconds()) / 1000 }
				b.ReportMetric(ms(cycle), "cycle-cpu-ms")
				b.ReportMetric(ms(clock), "clock-cpu-ms/s")
				s.cpu.Report(b, cycle.Add(clock), "interval")
				require.Zero(b, agents.sent.Load(), "an idle fleet is sent nothing")
			})
		}
	}
}

// BenchmarkRotateOnePercent measures rotating org/hot, bound to 1 % of
// 100,000 agreements, against delivering those 1,000 agreements alone
// (a state holding only them), on each state: the CPU from the store write
// to the 1,000th update handed to the transport (the database's
// included on PostgreSQL).
func BenchmarkRotateOnePercent(b *testing.B) {
	const n = 100_000
	hot := func(i int) bool { return i%100 == 0 }
	for _, st := range scaleStates() {
		for _, c := range []struct {
			name string
			n    int
			bind func(int) string
		}{
			{"fleet=100000", n, scalefleet.Secret},
			// Those 1,000 alone, with the same ids and nodes.
			{"alone=1000", n, func(i int) string {
				if hot(i) {
					return scalefleet.Hot
				}
				return ""
			}},
		} {
			b.Run(st.name+"/"+c.name, func(b *testing.B) {
				s := st.open(b)
				e, store, agents := scaleEngine(b, s, c.n, c.bind, hot, time.Second)
				runEngine(b, e)
				version := 0
				mark := s.cpu.Now(b)
				for b.Loop() {
					version++
					agents.expect(n / 100)
					_, err := store.Put(context.Background(), &secretstore.Secret{Name: scalefleet.Hot, Data: edgesecrets.Data{"password": fmt.Appendf(nil, "v%d", version)}}, secretstore.PutOptions{})
					require.NoError(b, err)
					e.TriggerCycle()
					<-agents.arrived
				}
				s.cpu.Report(b, s.cpu.Since(b, mark, b.N), "rotation")
			})
		}
	}
}
