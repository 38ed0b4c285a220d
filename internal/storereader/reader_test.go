package storereader_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/storereader"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/internal/testkit/testgate"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// holdReads makes every call to backend wait at g.
func holdReads(backend *mock.Store, g *testgate.Gate) {
	g.Hold()
	backend.SetFaults(mock.Faults{Hook: func(ctx context.Context, _ mock.Call) error { return g.Wait(ctx) }})
}

func value(s *secretstore.Secret) string {
	if s == nil {
		return "<nil>"
	}
	return string(s.Data["v"])
}

func TestReaderCoalescesConcurrentGets(t *testing.T) {
	const goroutines, names = 10_000, 100
	run := func(t *testing.T, r *storereader.Reader) {
		var wg sync.WaitGroup
		var wrong atomic.Int64
		for i := range goroutines {
			wg.Go(func() {
				name := fmt.Sprintf("s%03d", i%names)
				s, err := r.Get(context.Background(), name)
				if err != nil || value(s) != "v-"+name {
					wrong.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Zero(t, wrong.Load(), "every Get returned its secret")
	}
	seed := func(t *testing.T, backend *mock.Store) {
		for i := range names {
			name := fmt.Sprintf("s%03d", i)
			testkit.Put(t, backend.Inner, name, "v-"+name)
		}
	}

	t.Run("with TTL", func(t *testing.T) {
		backend := mock.NewStore(nil)
		seed(t, backend)
		r := storereader.New(backend.Store, storereader.Options{TTL: time.Minute})
		run(t, r)
		assert.LessOrEqual(t, len(backend.Calls("get", "")), names, "at most one backend read per name")
		for i := range names {
			assert.Len(t, backend.Calls("get", fmt.Sprintf("s%03d", i)), 1)
		}
	})

	t.Run("TTL 0 still coalesces", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			backend := mock.NewStore(nil)
			seed(t, backend)
			var g testgate.Gate
			holdReads(backend, &g)
			r := storereader.New(backend.Store, storereader.Options{})
			done := make(chan struct{})
			go func() { run(t, r); close(done) }()
			synctest.Wait() // every Get is now either reading the backend or waiting for a read
			assert.Len(t, backend.Calls("get", ""), names, "one backend read per name in flight")
			g.Release()
			<-done
			assert.Len(t, backend.Calls("get", ""), names, "waiters shared those reads")
		})
	})
}

func TestReaderTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		backend := mock.NewStore(nil)
		testkit.Put(t, backend.Inner, "x", "1")
		const ttl = 30 * time.Second
		r := storereader.New(backend.Store, storereader.Options{TTL: ttl})

		steps := []struct {
			advance   time.Duration
			change    string // new backend value written before the read, or ""
			wantValue string
			wantReads int
		}{
			{0, "", "1", 1},
			{0, "", "1", 1},
			{ttl - time.Nanosecond, "2", "1", 1}, // still fresh: the cached copy is served
			{time.Nanosecond, "", "2", 2},        // expired: read again
			{ttl / 2, "", "2", 2},
		}
		for i, st := range steps {
			time.Sleep(st.advance)
			if st.change != "" {
				testkit.Put(t, backend.Inner, "x", st.change)
			}
			s, err := r.Get(ctx, "x")
			require.NoError(t, err, "step %d", i)
			assert.Equal(t, st.wantValue, value(s), "step %d", i)
			assert.Len(t, backend.Calls("get", ""), st.wantReads, "step %d", i)
		}
	})
}

func TestReaderTTLZeroDoesNotCache(t *testing.T) {
	ctx := t.Context()
	backend := mock.NewStore(nil)
	testkit.Put(t, backend.Inner, "x", "1")
	r := storereader.New(backend.Store, storereader.Options{TTL: 0})
	for i := range 3 {
		_, err := r.Get(ctx, "x")
		require.NoError(t, err)
		assert.Len(t, backend.Calls("get", ""), i+1)
	}
	r = storereader.New(backend.Store, storereader.Options{TTL: -time.Second})
	_, _ = r.Get(ctx, "x")
	_, _ = r.Get(ctx, "x")
	assert.Len(t, backend.Calls("get", ""), 5, "a negative TTL disables caching too")
}

func TestReaderNeverCachesErrors(t *testing.T) {
	cases := []struct {
		name   string
		inject error // kind injected on the first read; nil: the secret is missing
	}{
		{"not found", nil},
		{"unavailable", edgesecrets.ErrUnavailable},
		{"permission", edgesecrets.ErrPermission},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			backend := mock.NewStore(nil)
			r := storereader.New(backend.Store, storereader.Options{TTL: time.Hour})
			if c.inject != nil {
				testkit.Put(t, backend.Inner, "x", "1")
				backend.SetFaults(mock.Faults{Op: "get", Fail: c.inject, Times: 1})
			}
			_, err := r.Get(ctx, "x")
			if c.inject != nil {
				require.ErrorIs(t, err, c.inject)
			} else {
				require.ErrorIs(t, err, edgesecrets.ErrNotFound)
				testkit.Put(t, backend.Inner, "x", "1")
			}
			s, err := r.Get(ctx, "x")
			require.NoError(t, err, "the error was not cached")
			assert.Equal(t, "1", value(s))
			_, err = r.Get(ctx, "x")
			require.NoError(t, err)
			assert.Len(t, backend.Calls("get", ""), 2, "the success was cached")
		})
	}
}

// heldStore is a driver that reads the wrapped one at once, then holds the
// result until the test releases it, so a test decides when each read
// completes.
type heldStore struct {
	driver.Store
	reads chan heldRead
}

type heldRead struct {
	name    string
	release chan struct{}
}

func (h *heldStore) Get(ctx context.Context, name string) (*driver.Secret, error) {
	s, err := h.Store.Get(ctx, name)
	r := heldRead{name: name, release: make(chan struct{})}
	select {
	case h.reads <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-r.release:
		return s, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// newHeld returns a store whose reads are held, and a store over the same
// data whose reads are not.
func newHeld(t *testing.T) (held *secretstore.Store, reads chan heldRead, direct *secretstore.Store) {
	d := testkit.NewDriver()
	reads = make(chan heldRead)
	return testkit.NewStore(t, &heldStore{Store: d, reads: reads}), reads, testkit.NewStore(t, d)
}

// getAsync runs r.Get in a goroutine and returns a channel for its result.
func getAsync(ctx context.Context, r *storereader.Reader, name string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		s, err := r.Get(ctx, name)
		ch <- result{s, err}
	}()
	return ch
}

type result struct {
	s   *secretstore.Secret
	err error
}

func TestReaderInvalidateDuringInFlightRead(t *testing.T) {
	for _, rereadFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("fresh read completes first=%v", rereadFirst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				heldStore, reads, mem := newHeld(t)
				testkit.Put(t, mem, "x", "old")
				backend := mock.NewStore(heldStore)
				r := storereader.New(backend.Store, storereader.Options{TTL: time.Hour})

				a := getAsync(ctx, r, "x")
				readA := <-reads // A has read "old" and is in flight
				testkit.Put(t, mem, "x", "new")
				r.Invalidate("x")

				c := getAsync(ctx, r, "x")
				readC := <-reads // C does not join A's stale read: it reads again
				if rereadFirst {
					close(readC.release)
					assert.Equal(t, "new", value((<-c).s))
					close(readA.release)
					assert.Equal(t, "old", value((<-a).s), "A gets what it read")
				} else {
					close(readA.release)
					assert.Equal(t, "old", value((<-a).s))
					close(readC.release)
					assert.Equal(t, "new", value((<-c).s))
				}

				d := getAsync(ctx, r, "x")
				synctest.Wait()
				select {
				case rd := <-reads:
					t.Errorf("Get read the backend again (%s) instead of the cached fresh value", rd.name)
					close(rd.release)
				default:
				}
				got := <-d
				require.NoError(t, got.err)
				assert.Equal(t, "new", value(got.s), "the stale in-flight read was never cached")
				assert.Len(t, backend.Calls("get", ""), 2)
			})
		})
	}

	t.Run("no reader after the invalidation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := t.Context()
			held, reads, mem := newHeld(t)
			testkit.Put(t, mem, "x", "old")
			r := storereader.New(held, storereader.Options{TTL: time.Hour})

			a := getAsync(ctx, r, "x")
			readA := <-reads
			testkit.Put(t, mem, "x", "new")
			r.Invalidate("x")
			close(readA.release)
			assert.Equal(t, "old", value((<-a).s))

			b := getAsync(ctx, r, "x")
			readB := <-reads // the old value was not cached: B reads the backend
			close(readB.release)
			assert.Equal(t, "new", value((<-b).s))
		})
	})
}

func TestReaderLeaderCancelDoesNotFailWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		heldStore, reads, mem := newHeld(t)
		testkit.Put(t, mem, "x", "1")
		backend := mock.NewStore(heldStore)
		r := storereader.New(backend.Store, storereader.Options{TTL: time.Hour})

		leaderCtx, cancelLeader := context.WithCancel(t.Context())
		leader := getAsync(leaderCtx, r, "x")
		<-reads // the leader's read is in flight; never released
		waiter := getAsync(t.Context(), r, "x")
		synctest.Wait() // the waiter has joined the leader's read
		assert.Len(t, backend.Calls("get", ""), 1)

		cancelLeader()
		got := <-leader
		assert.ErrorIs(t, got.err, context.Canceled, "the leader sees its own cancellation")

		retry := <-reads // the waiter reads again on its own context
		close(retry.release)
		got = <-waiter
		require.NoError(t, got.err, "the waiter is not failed by the leader's cancellation")
		assert.Equal(t, "1", value(got.s))
		assert.Len(t, backend.Calls("get", ""), 2)
	})
}

func TestReaderWaiterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		held, reads, mem := newHeld(t)
		testkit.Put(t, mem, "x", "1")
		r := storereader.New(held, storereader.Options{TTL: time.Hour})

		leader := getAsync(t.Context(), r, "x")
		read := <-reads
		waiterCtx, cancelWaiter := context.WithCancel(t.Context())
		waiter := getAsync(waiterCtx, r, "x")
		synctest.Wait()
		cancelWaiter()
		got := <-waiter
		assert.ErrorIs(t, got.err, context.Canceled, "a waiter stops waiting when its context ends")
		assert.ErrorContains(t, got.err, `get "x"`, "the error names the operation and secret")
		assert.Nil(t, got.s)

		close(read.release)
		got = <-leader
		require.NoError(t, got.err, "the leader is unaffected")
		assert.Equal(t, "1", value(got.s))
	})
}

// panicStore is a driver that panics on Get once released.
type panicStore struct {
	driver.Store
	release chan struct{}
}

func (p *panicStore) Get(context.Context, string) (*driver.Secret, error) {
	<-p.release
	panic("backend bug")
}

func TestReaderLeaderPanicDoesNotHangWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := &panicStore{Store: testkit.NewDriver(), release: make(chan struct{})}
		r := storereader.New(testkit.NewStore(t, ps), storereader.Options{TTL: time.Hour})
		panicked := make(chan any, 1)
		go func() {
			defer func() { panicked <- recover() }()
			_, _ = r.Get(context.Background(), "x")
		}()
		synctest.Wait()
		waiter := getAsync(t.Context(), r, "x")
		synctest.Wait()
		close(ps.release)
		assert.Equal(t, "backend bug", <-panicked, "the leader's panic goes on")
		got := <-waiter
		assert.ErrorIs(t, got.err, edgesecrets.ErrUnavailable, "the waiter gets an error instead of hanging")
	})
}

func TestReaderInvalidate(t *testing.T) {
	ctx := t.Context()
	backend := mock.NewStore(nil)
	r := storereader.New(backend.Store, storereader.Options{TTL: time.Hour})
	testkit.Put(t, backend.Inner, "y", "1")
	_, err := r.Get(ctx, "y")
	require.NoError(t, err)
	testkit.Put(t, backend.Inner, "y", "2")
	s, err := r.Get(ctx, "y")
	require.NoError(t, err)
	assert.Equal(t, "1", value(s), "the cached copy")
	r.Invalidate("y")
	s, err = r.Get(ctx, "y")
	require.NoError(t, err)
	assert.Equal(t, "2", value(s), "Invalidate drops the cached copy")
	assert.Len(t, backend.Calls("get", ""), 2, "each Get after an invalidation read the backend")
}

func TestReaderReturnsCopies(t *testing.T) {
	ctx := t.Context()
	backend := mock.NewStore(nil)
	testkit.Put(t, backend.Inner, "x", "1")
	r := storereader.New(backend.Store, storereader.Options{TTL: time.Hour})
	for range 3 {
		s, err := r.Get(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, "1", value(s))
		s.Data["v"][0] = 'X'
		s.Data["extra"] = nil
	}
	assert.Len(t, backend.Calls("get", ""), 1)
}

func TestReaderStat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backend := mock.NewStore(nil)
		_, err := backend.Inner.Put(t.Context(), &secretstore.Secret{Name: "x", Data: edgesecrets.Data{"v": []byte("1")}, Labels: map[string]string{"l": "1"}}, secretstore.PutOptions{})
		require.NoError(t, err)
		r := storereader.New(backend.Store, storereader.Options{TTL: time.Hour})
		var g testgate.Gate
		holdReads(backend, &g)

		results := make(chan secretstore.Metadata, 5)
		for range 5 {
			go func() {
				md, err := r.Stat(t.Context(), "x")
				assert.NoError(t, err)
				results <- md
			}()
		}
		synctest.Wait()
		assert.Len(t, backend.Calls("stat", ""), 1, "concurrent Stats share one call")
		g.Release()
		var mds []secretstore.Metadata
		for range 5 {
			md := <-results
			assert.Equal(t, "1", md.Labels["l"])
			mds = append(mds, md)
		}
		mds[0].Labels["l"] = "changed"
		assert.Equal(t, "1", mds[1].Labels["l"], "each caller gets its own labels")

		_, err = r.Stat(t.Context(), "x")
		require.NoError(t, err)
		assert.Len(t, backend.Calls("stat", ""), 2, "Stat results are not cached")
	})
}

func TestReaderGetBatch(t *testing.T) {
	ctx := t.Context()
	names := []string{"a", "b", "missing", "b"}

	t.Run("store without batches", func(t *testing.T) {
		d := testkit.NewDriver()
		store := testkit.NewStore(t, d)
		testkit.Put(t, store, "a", "1")
		testkit.Put(t, store, "b", "2")
		r := storereader.New(store, storereader.Options{TTL: time.Hour})
		_, err := r.Get(ctx, "a")
		require.NoError(t, err)
		gets := d.CallsByName("get")

		got, err := r.GetBatch(ctx, names)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": "1", "b": "2"}, values(got))
		assert.Equal(t, map[string]int{"a": gets["a"], "b": gets["b"] + 1, "missing": 1}, d.CallsByName("get"),
			"cached a is not read again; b is read once")

		got, err = r.GetBatch(ctx, names)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": "1", "b": "2"}, values(got))
		assert.Equal(t, 2, d.Calls("get", "missing"), "only the missing name is read again")
		_, err = r.Get(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, gets["b"]+1, d.Calls("get", "b"), "GetBatch results are cached for Get")

		got["a"].Data["v"][0] = 'X'
		s, err := r.Get(ctx, "a")
		require.NoError(t, err)
		assert.Equal(t, "1", value(s), "GetBatch returns copies")

		d.Fail(edgesecrets.ErrUnavailable, "c")
		_, err = r.GetBatch(ctx, []string{"c", "d"})
		assert.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	})

	t.Run("store with batches", func(t *testing.T) {
		d := testkit.NewDriver()
		bm := testkit.NewStore(t, testkit.Batching(d))
		testkit.Put(t, bm, "a", "1")
		testkit.Put(t, bm, "b", "2")
		r := storereader.New(bm, storereader.Options{TTL: time.Hour})
		got, err := r.GetBatch(ctx, names)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": "1", "b": "2"}, values(got))
		require.EqualValues(t, 1, d.Batches(), "one backend call")
		assert.Equal(t, 1, d.Calls("getbatch", "missing"), "duplicates are not asked for")
		assert.Equal(t, 1, d.Calls("getbatch", "b"), "duplicates are not asked for")

		_, err = r.GetBatch(ctx, []string{"a", "b"})
		require.NoError(t, err)
		assert.EqualValues(t, 1, d.Batches(), "all cached: no backend call")
	})

	t.Run("invalidation during a batch", func(t *testing.T) {
		backend := mock.NewStore(nil)
		testkit.Put(t, backend.Inner, "a", "old")
		r := storereader.New(backend.Store, storereader.Options{TTL: time.Hour})
		backend.SetFaults(mock.Faults{Hook: func(context.Context, mock.Call) error {
			backend.SetFaults(mock.Faults{})
			r.Invalidate("a") // a watcher reports a change while the batch runs
			return nil
		}})
		_, err := r.GetBatch(ctx, []string{"a"})
		require.NoError(t, err)
		testkit.Put(t, backend.Inner, "a", "new")
		s, err := r.Get(ctx, "a")
		require.NoError(t, err)
		assert.Equal(t, "new", value(s), "a batch read during an invalidation is not cached")
	})
}

func values(m map[string]*secretstore.Secret) map[string]string {
	out := map[string]string{}
	for k, s := range m {
		out[k] = value(s)
	}
	return out
}

// BenchmarkAgreementReads models an agbot making b.N agreements, each reading
// the 3 secrets its services bind, over M distinct secrets, with and without
// the coalescing Reader. It reports backend reads per agreement.
func BenchmarkAgreementReads(b *testing.B) {
	const perAgreement = 3
	for _, m := range []int{10, 100, 1000} {
		for _, withReader := range []bool{false, true} {
			mode := "direct"
			if withReader {
				mode = "reader"
			}
			b.Run(fmt.Sprintf("M=%d/%s", m, mode), func(b *testing.B) {
				backend := mock.NewStore(nil)
				for i := range m {
					testkit.Put(b, backend.Inner, fmt.Sprintf("org/s%04d", i), "v")
				}
				var store interface {
					Get(context.Context, string) (*secretstore.Secret, error)
				} = backend.Store
				if withReader {
					store = storereader.New(backend.Store, storereader.Options{TTL: time.Minute})
				}
				var next atomic.Int64
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						n := int(next.Add(1))
						for j := range perAgreement {
							if _, err := store.Get(ctx, fmt.Sprintf("org/s%04d", (n*perAgreement+j)%m)); err != nil {
								b.Error(err)
								return
							}
						}
					}
				})
				b.ReportMetric(float64(len(backend.Calls("get", "")))/float64(b.N), "backend-reads/op")
			})
		}
	}
}
