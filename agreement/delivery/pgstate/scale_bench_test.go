package pgstate_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
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

// scaleConfig is one state an idle fleet is measured on: the states of
// its engines (one per agbot) and, for PostgreSQL, the database.
type scaleConfig struct {
	name string
	open func(b *testing.B) (states []state.Backend, members []string, db *pgtest.Database)
	// jsonBody has the records read from their JSON body, as those an
	// agbot of schema version 4 wrote (BenchmarkIdleInterval's baseline
	// for the binary body).
	jsonBody bool
	// uncached has every Observations call read every name asked, as
	// before schema version 6 (the baseline for the observations'
	// generation).
	uncached bool
}

func scaleConfigs() []scaleConfig {
	postgres := func(members ...string) func(b *testing.B) ([]state.Backend, []string, *pgtest.Database) {
		return func(b *testing.B) ([]state.Backend, []string, *pgtest.Database) {
			db := pgtest.NewDatabase(b)
			if *profileDir != "" {
				// A server of its own with pg_stat_statements loaded.
				srv := pgtest.Start(b, pgtest.Options{Settings: map[string]string{
					"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all",
				}})
				db = srv.CreateDatabase(b)
				_, err := db.Pool(b).Exec(b.Context(), "CREATE EXTENSION pg_stat_statements")
				require.NoError(b, err)
			}
			var states []state.Backend
			for _, m := range joinAll(b, db.URL, pgstate.Options{}, members...) {
				states = append(states, m.sharedState)
			}
			return states, members, db
		}
	}
	return []scaleConfig{
		{name: "memory", open: func(*testing.B) ([]state.Backend, []string, *pgtest.Database) {
			return []state.Backend{state.NewMemory()}, []string{"agbot-1"}, nil
		}},
		{name: "embedded", open: func(b *testing.B) ([]state.Backend, []string, *pgtest.Database) {
			st, _, err := boltstate.Open(filepath.Join(b.TempDir(), "agbot.db"), boltstate.Options{})
			require.NoError(b, err)
			b.Cleanup(func() { _ = st.Close() })
			return []state.Backend{st}, []string{"agbot-1"}, nil
		}},
		{name: "postgres", open: postgres("agbot-1")},
		{name: "postgres-jsonbody", open: postgres("agbot-1"), jsonBody: true},
		{name: "postgres-uncached", open: postgres("agbot-1"), uncached: true},
		{name: "postgres-2agbots", open: postgres("agbot-1", "agbot-2")},
	}
}

// scaleConfig2Agbots is the configuration of two agbots sharing a
// PostgreSQL state, found by name: the list's order is not its contract.
func scaleConfig2Agbots(b *testing.B) scaleConfig {
	for _, c := range scaleConfigs() {
		if c.name == "postgres-2agbots" {
			return c
		}
	}
	b.Fatal("no configuration postgres-2agbots")
	return scaleConfig{}
}

// idleFleet is a fleet loaded in sync and its engines running, their
// first review pass done.
type idleFleet struct {
	engines []*delivery.Engine
	agents  *fanOutAgents
	store   *secretstore.Store
	db      *pgtest.Database
	cpu     scalefleet.CPU // the agbots' and the database's
	created int
	loading time.Duration // loading the fleet, wall time
}

// agentKeysFor returns keys for the agents of the agreements keyed
// among n, by node.
func agentKeysFor(b *testing.B, n int, keyed func(int) bool) map[string]*agreement.PrivateKeys {
	out := map[string]*agreement.PrivateKeys{}
	for i := range n {
		if keyed(i) {
			k, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
			require.NoError(b, err)
			out[scalefleet.Node(i)] = k
		}
	}
	return out
}

// startIdleFleet loads n agreements (internal/testkit/scalefleet) into the
// configuration's state, the agents with keys in agentKeys knowing
// theirs, and runs an engine per state (1 s interval) until b ends.
func startIdleFleet(b *testing.B, c scaleConfig, n int, agentKeys map[string]*agreement.PrivateKeys) *idleFleet {
	ctx := b.Context()
	states, members, db := c.open(b)
	if c.uncached {
		for _, st := range states {
			pgstate.ReadObservationsUncached(st)
		}
	}
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	require.NoError(b, err)
	f := &idleFleet{store: memory.New(), db: db, agents: &fanOutAgents{agbot: keys.Public(), keys: agentKeys, arrived: make(chan struct{}, 1)}}
	if db != nil {
		f.cpu.DB = db.Server()
	}
	f.agents.counting.Store(true)
	start := time.Now()
	// The secrets first (a name bound already is its owner's to observe),
	// then the agbots share the registrations, as they would the
	// callers'.
	tags, err := scalefleet.Observe(ctx, states[0], f.store, scalefleet.Options{N: n, Member: members[0]})
	require.NoError(b, err)
	var wg sync.WaitGroup
	counts := make([]int, len(states))
	errs := make([]error, len(states))
	for i, st := range states {
		wg.Go(func() {
			counts[i], errs[i] = scalefleet.Load(ctx, st, f.store, scalefleet.Options{
				N: n, Member: members[i], Tags: tags,
				Bind: func(j int) string {
					if j%len(states) != i {
						return ""
					}
					return scalefleet.Secret(j)
				},
				AgentKey: func(j int) agreement.KeyID {
					if k, ok := agentKeys[scalefleet.Node(j)]; ok {
						return k.Public().EncryptionKeyID()
					}
					return ""
				},
			})
		})
	}
	wg.Wait()
	f.loading = time.Since(start)
	for i := range states {
		require.NoError(b, errs[i])
		f.created += counts[i]
	}
	if db != nil {
		scalefleet.Settle(b, db)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var running sync.WaitGroup
	for i, st := range states {
		e, err := delivery.New(delivery.Options{
			Store: f.store, State: st, Keys: keys, Agents: f.agents, Transport: f.agents,
			Interval: time.Second, ReplyTimeout: time.Hour, MaxDelay: time.Hour,
			Member: members[i],
		})
		require.NoError(b, err)
		f.engines = append(f.engines, e)
		running.Go(func() { _ = e.Run(runCtx) })
	}
	b.Cleanup(func() { cancel(); running.Wait() })
	// Until every engine's first review pass is done: the reviews of a
	// restart, not of an idle interval.
	for _, e := range f.engines {
		for e.Health(ctx).Agreements == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second)
	// The heap the loading left, collected and handed back to the system
	// now: otherwise the runtime's scavenger returns it during the
	// measured intervals (madvise calls were half the agbot's CPU there
	// in the profile), a cost of the loading, not of an idle interval.
	debug.FreeOSMemory()
	return f
}

// BenchmarkIdleInterval measures what an agbot whose fleet is in sync and
// whose store does not change spends per interval (1 s, the default 5 min
// resync period), on each state in one run: the agbot process's CPU time
// and, on PostgreSQL, the database server's (all its processes, read
// from /proc: pg_stat_statements would leave out the server's own work,
// the commits and the vacuuming, and needs the extension preloaded). An
// iteration is one interval, so run it for ten:
//
//	go test -run '^$' -bench IdleInterval -benchtime 10x -benchmem ./agreement/delivery/pgstate/
//
// postgres-2agbots is two agbots sharing the database: the figures are
// the two together per interval. postgres-jsonbody is one agbot reading
// the records' JSON body, as the schema before version 5 had it read;
// postgres-uncached one reading every observation its review asks for
// each interval, as before version 6.
func BenchmarkIdleInterval(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, c := range scaleConfigs() {
			b.Run(fmt.Sprintf("%s/agreements=%d", c.name, n), func(b *testing.B) {
				f := startIdleFleet(b, c, n, nil)
				if c.jsonBody {
					_, err := f.db.Pool(b).Exec(b.Context(), "UPDATE edgesecrets_delivery.agreements SET body_bin = NULL")
					require.NoError(b, err)
				}

				stop := f.profile(b, fmt.Sprintf("%s-%d", c.name, n))
				mark := f.cpu.Now(b)
				intervals := 0
				for b.Loop() {
					time.Sleep(time.Second)
					intervals++
				}
				f.cpu.Report(b, f.cpu.Since(b, mark, intervals), "interval")
				stop()
				require.Zero(b, f.agents.sent.Load(), "an idle fleet is sent nothing")
			})
		}
	}
}

// profileDir, when set, has BenchmarkIdleInterval write the agbots' CPU
// profile of the measured intervals there, and their allocations before
// and after them (what the intervals allocated: go tool pprof
// -sample_index=alloc_space -diff_base NAME.allocs-before NAME.allocs-after;
// run with -test.memprofilerate=4096 for more than a few samples), and
// print the database's costliest statements over them
// (pg_stat_statements, on a server of the benchmark's own).
var profileDir = flag.String("pgstate.profile", "", "BenchmarkIdleInterval: write the idle intervals' CPU profile to this directory, print the costliest statements")

// profile starts what -pgstate.profile asks for, and returns the function
// that stops it and reports.
func (f *idleFleet) profile(b *testing.B, name string) (stop func()) {
	if *profileDir == "" {
		return func() {}
	}
	out, err := os.Create(filepath.Join(*profileDir, name+".prof"))
	require.NoError(b, err)
	require.NoError(b, pprof.StartCPUProfile(out))
	writeAllocs(b, filepath.Join(*profileDir, name+".allocs-before"))
	if f.db != nil {
		_, err := f.db.Pool(b).Exec(b.Context(), "SELECT pg_stat_statements_reset()")
		require.NoError(b, err)
	}
	return func() {
		pprof.StopCPUProfile()
		writeAllocs(b, filepath.Join(*profileDir, name+".allocs-after"))
		require.NoError(b, out.Close())
		if f.db == nil {
			return
		}
		rows, err := f.db.Pool(b).Query(b.Context(), `
SELECT calls, round(total_exec_time::numeric, 1), rows, left(regexp_replace(query, '\s+', ' ', 'g'), 160)
FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 15`)
		require.NoError(b, err)
		defer rows.Close()
		for rows.Next() {
			var (
				calls, nrows int64
				ms           float64
				query        string
			)
			require.NoError(b, rows.Scan(&calls, &ms, &nrows, &query))
			b.Logf("%s: %6d calls %9.1f ms %8d rows  %s", name, calls, ms, nrows, query)
		}
		require.NoError(b, rows.Err())
	}
}

// writeAllocs writes the allocation profile as of the last garbage
// collection, made now, to path.
func writeAllocs(b *testing.B, path string) {
	runtime.GC()
	f, err := os.Create(path)
	require.NoError(b, err)
	require.NoError(b, pprof.Lookup("allocs").WriteTo(f, 0))
	require.NoError(b, f.Close())
}

// scaleRun is the number of agreements of BenchmarkScale; 0 skips it.
var scaleRun = flag.Int("pgstate.scale", 0, "run BenchmarkScale with this many agreements (the scale run: 1000000)")

// BenchmarkScale is the scale run, outside CI: a fleet on PostgreSQL
// shared by two agbots, 1 % of it bound to one secret. It reports the
// rate at which the two agbots store the fleet's agreements (in-sync
// records, state.Backend.Create; Engine.Register adds a NewEpoch statement to
// each), the agbots' heap and the database's size per agreement, the CPU
// of an idle interval (agbots and database, as BenchmarkIdleInterval),
// and the time and CPU of one rotation of the 1 % secret, from the store
// write to the last update handed to the transport:
//
//	nice -n 19 go test -run '^$' -bench Scale -benchtime 1x -timeout 3h ./agreement/delivery/pgstate/ -pgstate.scale=1000000
func BenchmarkScale(b *testing.B) {
	n := *scaleRun
	if n <= 0 {
		b.Skip("the scale run: -pgstate.scale=1000000")
	}
	hot := func(i int) bool { return scalefleet.Secret(i) == scalefleet.Hot }
	agentKeys := agentKeysFor(b, n, hot)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	progress := func(what string) {
		fmt.Fprintf(os.Stderr, "scale run: %s after %s\n", what, time.Since(start).Round(time.Second))
	}
	f := startIdleFleet(b, scaleConfig2Agbots(b), n, agentKeys)
	progress(fmt.Sprintf("%d agreements stored in %s, first review passes done", f.created, f.loading.Round(time.Second)))
	b.ReportMetric(float64(f.created)/f.loading.Seconds(), "registrations/s")
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(f.created), "agbot-heap-B/agreement")
	var size int64
	require.NoError(b, f.db.Pool(b).QueryRow(b.Context(), "SELECT pg_database_size(current_database())").Scan(&size))
	b.ReportMetric(float64(size)/float64(f.created), "db-B/agreement")

	const intervals = 10
	mark := f.cpu.Now(b)
	time.Sleep(intervals * time.Second)
	f.cpu.Report(b, f.cpu.Since(b, mark, intervals), "interval")
	require.Zero(b, f.agents.sent.Load(), "an idle fleet is sent nothing")
	progress("idle intervals measured")

	fanned := n / 100
	f.agents.target.Store(int64(fanned))
	mark = f.cpu.Now(b)
	start = time.Now()
	_, err := f.store.Put(b.Context(), &secretstore.Secret{Name: scalefleet.Hot, Data: edgesecrets.Data{"password": []byte("v1")}}, secretstore.PutOptions{})
	require.NoError(b, err)
	select {
	case <-f.agents.arrived:
	case <-time.After(30 * time.Minute):
		b.Fatalf("%d of %d updates sent after 30 minutes", f.agents.sent.Load(), fanned)
	}
	b.ReportMetric(time.Since(start).Seconds(), "rotation-s")
	f.cpu.Report(b, f.cpu.Since(b, mark, 1), "rotation")
	b.ReportMetric(float64(fanned), "rotated-agreements")
}
