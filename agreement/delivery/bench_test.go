package delivery_test

import (
	"context"
	"crypto"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// benchAgents is a fleet of agents that answer only with keys: during
// setup they accept every message with a real sealed reply; once counting
// is switched on they take each envelope without answering (an
// asynchronous transport), so a benchmark measures the engine alone.
type benchAgents struct {
	agbot    *agreement.PublicKeys
	keys     map[string]*agreement.PrivateKeys
	counting atomic.Bool
	sent     atomic.Int64
	arrived  chan struct{} // signalled when sent reaches target
	target   int64
}

func newBenchAgents(b *testing.B, agbot *agreement.PublicKeys, n int, suite agreement.Suite) *benchAgents {
	b.Helper()
	a := &benchAgents{agbot: agbot, keys: make(map[string]*agreement.PrivateKeys, n)}
	for i := range n {
		k, err := agreement.GenerateKeys(suite)
		require.NoError(b, err)
		a.keys[benchNode(i)] = k
	}
	return a
}

func benchNode(i int) string { return fmt.Sprintf("node-%06d", i) }

func (a *benchAgents) Keys(_ context.Context, node string) (*agreement.PublicKeys, error) {
	return a.keys[node].Public(), nil
}

func (a *benchAgents) Send(_ context.Context, m delivery.Message) ([]byte, error) {
	if a.counting.Load() {
		if a.sent.Add(1) == a.target {
			a.arrived <- struct{}{}
		}
		return nil, nil
	}
	h, err := agreement.PeekHeader(m.Envelope, agreement.Options{})
	if err != nil {
		return nil, err
	}
	r := agreement.NewReply(h, true, "")
	return agreement.Seal(a.keys[m.Node], a.agbot, r, agreement.Header{Sequence: h.Sequence}, agreement.Options{})
}

// expect arms the signal for n more sends.
func (a *benchAgents) expect(n int) {
	a.target = a.sent.Load() + int64(n)
}

// benchEngine runs an engine with n agreements, all bound to org/db and in
// sync, with counting switched on.
func benchEngine(b *testing.B, n int, suite agreement.Suite, st state.Backend, configure ...func(*delivery.Options)) (*delivery.Engine, *secretstore.Store, *benchAgents, *agreement.PrivateKeys, func()) {
	b.Helper()
	ctx := context.Background()
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	require.NoError(b, err)
	agents := newBenchAgents(b, keys.Public(), n, suite)
	agents.arrived = make(chan struct{}, 1)
	store := memory.New()
	_, err = store.Put(ctx, &secretstore.Secret{Name: "org/db", Data: edgesecrets.Data{"password": []byte("v0")}}, secretstore.PutOptions{})
	require.NoError(b, err)
	opts := delivery.Options{
		Store: store, State: st, Keys: keys, Agents: agents, Transport: agents,
		Interval: time.Hour, ReplyTimeout: time.Hour, MaxDelay: time.Hour,
	}
	for _, c := range configure {
		c(&opts)
	}
	e, err := delivery.New(opts)
	require.NoError(b, err)
	registerAll(b, e, n, func(i int) delivery.Agreement {
		return testAgreement(fmt.Sprintf("agr-%06d", i), benchNode(i), "org/db")
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(runCtx)
	}()
	for i := range n {
		_, err := e.Wait(ctx, fmt.Sprintf("agr-%06d", i))
		require.NoError(b, err)
	}
	agents.counting.Store(true)
	return e, store, agents, keys, func() { cancel(); <-done }
}

// BenchmarkRotationFanOut measures one rotation fanned out to 10,000
// agreements: the engine (watcher cycle, the value read once, each update
// sealed to its agent, stored in flight and handed to the transport), on
// the embedded state (boltstate, a file in a temporary directory) and on
// the memory state, against a bare loop of SealUpdate calls to the same
// agents, one after another and on every core. Compare ns/agreement;
// "interleaved" runs a rotation of each engine and a bare loop by turns
// and reports each engine's throughput as a fraction of the bare loop's
// (embedded/bare, memory/bare), which a machine whose load drifts skews
// least:
//
//	go test -run '^$' -bench RotationFanOut -benchtime 5x ./agreement/delivery/
func BenchmarkRotationFanOut(b *testing.B) {
	const n = 10_000
	file, _, err := boltstate.Open(filepath.Join(b.TempDir(), "agbot.db"), boltstate.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = file.Close() })
	type engine struct {
		name   string
		rotate func()
		took   time.Duration
	}
	var (
		engines []*engine
		agents  *benchAgents
		keys    *agreement.PrivateKeys
	)
	ctx := context.Background()
	for _, st := range []struct {
		name  string
		state state.Backend
	}{{"embedded", file}, {"memory", state.NewMemory()}} {
		e, store, a, k, stop := benchEngine(b, n, agreement.SuiteMLKEM768X25519, st.state)
		b.Cleanup(stop)
		agents, keys = a, k
		version := 0
		engines = append(engines, &engine{name: st.name, rotate: func() {
			version++
			a.expect(n)
			_, err := store.Put(ctx, &secretstore.Secret{Name: "org/db", Data: edgesecrets.Data{"password": fmt.Appendf(nil, "v%d", version)}}, secretstore.PutOptions{})
			require.NoError(b, err)
			e.TriggerCycle()
			<-a.arrived
		}})
	}
	publics := make([]*agreement.PublicKeys, n)
	ids := make([]string, n)
	for i := range n {
		publics[i], ids[i] = agents.keys[benchNode(i)].Public(), fmt.Sprintf("agr-%06d", i)
	}
	seal := func(i int, seq uint64) {
		u, err := agreement.NewSecretsUpdate(ids[i], agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{
			Service: agreement.ServiceRef{Org: "org", URL: "svc", Version: "1.0.0"},
			Secrets: map[string]agreement.SecretDetails{"pw": {Data: edgesecrets.Data{"password": []byte("v1")}}},
		}}})
		if err == nil {
			_, err = agreement.Seal(keys, publics[i], u, agreement.Header{Sequence: seq}, agreement.Options{})
		}
		if err != nil {
			panic(err)
		}
	}
	seq := uint64(0)
	bareLoop := func() {
		for i := range n {
			seq++
			seal(i, seq)
		}
	}
	perAgreement := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/agreement")
	}

	for _, e := range engines {
		b.Run("engine-"+e.name+"-state", func(b *testing.B) {
			for b.Loop() {
				e.rotate()
			}
			perAgreement(b)
		})
	}
	b.Run("bare-seal-loop", func(b *testing.B) {
		for b.Loop() {
			bareLoop()
		}
		perAgreement(b)
	})
	b.Run("bare-seal-loop-all-cores", func(b *testing.B) {
		workers := runtime.GOMAXPROCS(0)
		for b.Loop() {
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := w; i < n; i += workers {
						seal(i, uint64(i+1))
					}
				})
			}
			wg.Wait()
		}
		perAgreement(b)
	})
	b.Run("interleaved", func(b *testing.B) {
		var bare time.Duration
		for _, e := range engines {
			e.took = 0
		}
		for b.Loop() {
			for _, e := range engines {
				start := time.Now()
				e.rotate()
				e.took += time.Since(start)
			}
			start := time.Now()
			bareLoop()
			bare += time.Since(start)
		}
		for _, e := range engines {
			b.ReportMetric(bare.Seconds()/e.took.Seconds(), e.name+"/bare")
		}
	})
}

// BenchmarkMemoryPerAgreement measures the heap in use, after a GC, per
// agreement registered with a state.Memory and in sync: the state's
// records and indexes, the watcher's names and the engine's own. Each
// agreement binds one secret to two candidates, a node-level one of its
// own and an organisation-level one all share.
func BenchmarkMemoryPerAgreement(b *testing.B) {
	n := 100_000
	if s := os.Getenv("DELIVERY_MEMORY_AGREEMENTS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for _, kind := range []string{"memory-state", "embedded-state"} {
		b.Run(kind, func(b *testing.B) { memoryPerAgreement(b, n, kind) })
	}
}

func memoryPerAgreement(b *testing.B, n int, kind string) {
	ctx := context.Background()
	for b.Loop() {
		keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
		require.NoError(b, err)
		agents := newBenchAgents(b, keys.Public(), n, agreement.SuiteX25519)
		store := memory.New()
		_, err = store.Put(ctx, &secretstore.Secret{Name: "org/db", Data: edgesecrets.Data{"password": []byte("v0")}}, secretstore.PutOptions{})
		require.NoError(b, err)
		var st state.Backend = state.NewMemory()
		if kind == "embedded-state" {
			// The file's pages are mapped, not on the heap: the engine's
			// own memory is what remains.
			file, _, err := boltstate.Open(filepath.Join(b.TempDir(), "agbot.db"), boltstate.Options{})
			require.NoError(b, err)
			st = file
		}
		e, err := delivery.New(delivery.Options{
			Store: store, State: st, Keys: keys, Agents: agents, Transport: agents,
			Interval: time.Hour, ReplyTimeout: time.Hour, MaxDelay: time.Hour,
		})
		require.NoError(b, err)
		// The agents' signing keys keep precomputed tables once used:
		// the agents' memory, not the engine's.
		for _, k := range agents.keys {
			_, err := k.Signer().Sign(nil, []byte("warm up"), crypto.Hash(0))
			require.NoError(b, err)
		}
		before := heapInUse()
		registerAll(b, e, n, func(i int) delivery.Agreement {
			return testAgreement(fmt.Sprintf("agr-%06d", i), benchNode(i), "node/"+benchNode(i)+"/db", "org/db")
		})
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = e.Run(runCtx)
		}()
		waitInSync(b, st, n)
		registered := heapInUse()
		if p := os.Getenv("DELIVERY_HEAP_PROFILE"); p != "" {
			f, err := os.Create(p)
			require.NoError(b, err)
			require.NoError(b, pprof.WriteHeapProfile(f))
			require.NoError(b, f.Close())
		}
		cancel()
		<-done
		require.NoError(b, st.Close())
		b.ReportMetric(float64(registered-before)/float64(n), "B/agreement")
		runtime.KeepAlive(e)
		runtime.KeepAlive(agents)
	}
}

// registerAll registers agreement(i) for i < n from several goroutines,
// so that a durable state's group commit shares its syncs among them.
func registerAll(b *testing.B, e *delivery.Engine, n int, agreement func(i int) delivery.Agreement) {
	b.Helper()
	const workers = 32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := e.Register(context.Background(), agreement(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.False(b, b.Failed(), "every agreement registered")
}

// waitInSync waits until the n agreements of st are proposed, with
// nothing in flight.
func waitInSync(b *testing.B, st state.Backend, n int) {
	b.Helper()
	for {
		synced := 0
		require.NoError(b, st.Records(context.Background(), func(r state.Record) bool {
			if r.Proposed && r.InFlight == nil {
				synced++
			}
			return true
		}))
		if synced == n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
