package storewatch_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/storewatch"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// faultStore is a store over a test driver, which counts Stat and Get
// calls per name and injects per-name errors, a gate that holds every
// Stat, and versionless metadata.
type faultStore struct {
	*testkit.Driver
	store *secretstore.Store
}

func newFaultStore(t testing.TB) *faultStore {
	d := testkit.NewDriver()
	return &faultStore{Driver: d, store: testkit.NewStore(t, d)}
}

func (f *faultStore) setFault(kind error, names ...string) { f.Fail(kind, names...) }

func (f *faultStore) statCalls() (total int, perName map[string]int) {
	perName = f.CallsByName("stat")
	for _, c := range perName {
		total += c
	}
	return total, perName
}

func (f *faultStore) getCalls() int { return f.Calls("get", "") }

// summary renders events compactly for assertions.
func summary(events []storewatch.Event) []string {
	out := []string{}
	for _, e := range events {
		if e.Kind == storewatch.Unavailable {
			out = append(out, fmt.Sprintf("unavailable %s outage=%t", strings.Join(e.Names, ","), e.Outage))
			continue
		}
		s := e.Kind.String() + " " + e.Name
		if e.Initial {
			s += " initial"
		}
		out = append(out, s)
	}
	return out
}

// running is a Watcher driven by Run, in a synctest bubble.
type running struct {
	t        *testing.T
	w        *storewatch.Watcher
	interval time.Duration
	cycles   chan storewatch.Cycle
	beats    atomic.Int64
	cancel   context.CancelFunc
	done     chan error
}

func startWatcher(t *testing.T, store *secretstore.Store, opts storewatch.Options, names ...string) *running {
	t.Helper()
	r := &running{t: t, cycles: make(chan storewatch.Cycle, 100), done: make(chan error, 1)}
	opts.Heartbeat = func(time.Time) { r.beats.Add(1) }
	w, err := storewatch.New(store, opts)
	require.NoError(t, err)
	require.NoError(t, w.Watch(names...))
	r.w, r.interval = w, cmp.Or(opts.Interval, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- w.Run(ctx, func(_ context.Context, c storewatch.Cycle) { r.cycles <- c }) }()
	t.Cleanup(r.stop)
	return r
}

// tick lets one interval pass.
func (r *running) tick() { time.Sleep(r.interval) }

// next returns the events of the next cycle.
func (r *running) next() []storewatch.Event {
	r.t.Helper()
	return r.nextCycle().Events
}

// nextCycle returns the next cycle.
func (r *running) nextCycle() storewatch.Cycle {
	r.t.Helper()
	select {
	case c := <-r.cycles:
		return c
	case <-time.After(10 * time.Second):
		r.t.Fatal("no cycle within 10s")
		return storewatch.Cycle{}
	}
}

func (r *running) stop() {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		r.t.Error("Run did not return within 10s of cancel")
	}
}

func TestWatcherEventKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newFaultStore(t)
		mem := fs.store
		testkit.Put(t, mem, "a", "1")
		r := startWatcher(t, fs.store, storewatch.Options{}, "a", "b")

		first := r.next()
		assert.Equal(t, []string{"appeared a initial", "deleted b initial"}, summary(first))
		md, err := mem.Stat(context.Background(), "a")
		require.NoError(t, err)
		assert.Equal(t, md.Version, first[0].Version, "Appeared carries the version")

		steps := []struct {
			name   string
			change func()
			want   []string
		}{
			{"nothing changes", func() {}, nil},
			{"new value", func() { testkit.Put(t, mem, "a", "2") }, []string{"changed a"}},
			{"deleted", func() { require.NoError(t, mem.Delete(context.Background(), "a")) }, []string{"deleted a"}},
			{"missing one appears, no earlier content so no Changed", func() { testkit.Put(t, mem, "b", "1") }, []string{"appeared b"}},
			{"recreated with new content", func() { testkit.Put(t, mem, "a", "3") }, []string{"appeared a", "changed a"}},
			{"access revoked", func() { fs.setFault(edgesecrets.ErrPermission, "a") }, []string{"forbidden a"}},
			{"still revoked: no repeat", func() {}, nil},
			{"access restored, same version", func() { fs.setFault(nil, "a") }, []string{"appeared a"}},
			{"one name unavailable", func() { fs.setFault(edgesecrets.ErrUnavailable, "b") }, []string{"unavailable b outage=false"}},
			{"back, unchanged: nothing", func() { fs.setFault(nil, "b") }, nil},
			{"final change", func() { testkit.Put(t, mem, "b", "2") }, []string{"changed b"}},
		}
		for _, s := range steps {
			s.change()
			r.tick()
			// The cycle is over once every goroutine waits, so the next
			// step's change cannot reach into this cycle.
			synctest.Wait()
			got := r.next()
			if s.want == nil {
				assert.Empty(t, got, s.name)
				continue
			}
			assert.Equal(t, s.want, summary(got), s.name)
			for _, e := range got {
				switch e.Kind {
				case storewatch.Forbidden:
					assert.ErrorIs(t, e.Err, edgesecrets.ErrPermission)
				case storewatch.Unavailable:
					assert.ErrorIs(t, e.Err, edgesecrets.ErrUnavailable)
				case storewatch.Changed:
					md, err := mem.Stat(context.Background(), e.Name)
					require.NoError(t, err)
					assert.Equal(t, md.Version, e.Version)
				}
			}
		}
	})
}

func TestWatcherMultiErrorCycle(t *testing.T) {
	ctx := context.Background()
	fs := newFaultStore(t)
	mem := fs.store
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	for _, n := range names {
		testkit.Put(t, mem, n, "1")
	}
	w, err := storewatch.New(fs.store, storewatch.Options{Concurrency: 3})
	require.NoError(t, err)
	require.NoError(t, w.Watch(names...))
	require.Len(t, w.Poll(ctx).Events, len(names))

	fs.setFault(edgesecrets.ErrPermission, "a", "c")
	fs.setFault(edgesecrets.ErrUnavailable, "b", "f")
	require.NoError(t, mem.Delete(ctx, "d"))
	testkit.Put(t, mem, "e", "2")
	ev := w.Poll(ctx).Events
	assert.Equal(t, []string{"forbidden a", "forbidden c", "deleted d", "changed e", "unavailable b,f outage=false"}, summary(ev),
		"every errored name is reported in the cycle it failed")
}

func TestWatcherOutage(t *testing.T) {
	ctx := context.Background()
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("s/%02d", i)
	}
	cases := []struct {
		name        string
		outageAfter int
		wantStats   int
	}{
		{"every name checked", -1, 50},
		{"cut short after 8 unavailable in a row", 0, 8},
		{"cut short after 3", 3, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := newFaultStore(t)
			mem := fs.store
			for _, n := range names {
				testkit.Put(t, mem, n, "1")
			}
			w, err := storewatch.New(fs.store, storewatch.Options{Concurrency: 1, OutageAfter: c.outageAfter})
			require.NoError(t, err)
			require.NoError(t, w.Watch(names...))
			require.Len(t, w.Poll(ctx).Events, 50)
			before, _ := fs.statCalls()

			fs.setFault(edgesecrets.ErrUnavailable, names...)
			ev := w.Poll(ctx).Events
			require.Len(t, ev, 1, "an outage is one event, not one per name")
			assert.Equal(t, storewatch.Unavailable, ev[0].Kind)
			assert.True(t, ev[0].Outage)
			assert.Equal(t, names, ev[0].Names)
			assert.ErrorIs(t, ev[0].Err, edgesecrets.ErrUnavailable)
			after, _ := fs.statCalls()
			assert.Equal(t, c.wantStats, after-before)

			// Recovery: state was kept, so nothing is reported until a real change.
			fs.setFault(nil, names...)
			assert.Empty(t, w.Poll(ctx).Events)
			testkit.Put(t, mem, names[7], "2")
			assert.Equal(t, []string{"changed s/07"}, summary(w.Poll(ctx).Events))
		})
	}
}

func TestWatcherClosedStoreIsOutageNotDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := testkit.NewStore(t, nil)
		testkit.Put(t, mem, "a", "1")
		testkit.Put(t, mem, "b", "1")
		r := startWatcher(t, mem, storewatch.Options{}, "a", "b")
		require.Len(t, r.next(), 2)
		require.NoError(t, mem.Close()) // every call now fails with ErrUnavailable
		r.tick()
		assert.Equal(t, []string{"unavailable a,b outage=true"}, summary(r.next()))
		_ = ctx
	})
}

func TestWatcherOneStatPerDistinctName(t *testing.T) {
	ctx := context.Background()
	fs := newFaultStore(t)
	mem := fs.store
	testkit.Put(t, mem, "a", "1")
	w, err := storewatch.New(fs.store, storewatch.Options{})
	require.NoError(t, err)
	require.NoError(t, w.Watch("a", "a", "b"))
	require.NoError(t, w.Watch("b", "a"))
	assert.Equal(t, []string{"a", "b"}, w.Names())
	gets := fs.getCalls()
	for range 3 {
		w.Poll(ctx)
	}
	_, per := fs.statCalls()
	assert.Equal(t, map[string]int{"a": 3, "b": 3}, per)
	assert.Equal(t, gets, fs.getCalls(), "a store with versions is never read")
}

// Where the store lists metadata (Store.StatBatch), a cycle is one listing
// and three spot checks in turn; a watcher with no names lists nothing.
func TestWatcherListsWhereTheStoreCan(t *testing.T) {
	ctx := t.Context()
	d := testkit.NewDriver()
	s := testkit.NewStore(t, testkit.Batching(d))
	w, err := storewatch.New(s, storewatch.Options{})
	require.NoError(t, err)
	w.Poll(ctx)
	assert.Zero(t, d.Batches(), "no names: nothing to list")

	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	for _, n := range names {
		testkit.Put(t, s, n, "1")
	}
	require.NoError(t, w.Watch(names...))
	spotted := map[string]int{}
	for i := range 3 {
		before := d.CallsByName("stat")
		c := w.Poll(ctx)
		assert.EqualValues(t, i+1, d.Batches(), "one listing a cycle")
		assert.Equal(t, len(names), c.Answered)
		assert.Equal(t, 3, c.AnsweredAlone, "three spot checks")
		for n, calls := range d.CallsByName("stat") {
			spotted[n] += calls - before[n]
		}
	}
	assert.Len(t, spotted, len(names), "the spot checks go round every name in turn")

	testkit.Put(t, s, "e", "2")
	assert.Equal(t, []string{"changed e"}, summary(w.Poll(ctx).Events), "a change seen in the listing")
}

func TestWatcherChecksumFallback(t *testing.T) {
	ctx := context.Background()
	fs := newFaultStore(t)
	mem := fs.store
	fs.HideVersions(true)
	testkit.Put(t, mem, "a", "1")
	testkit.Put(t, mem, "b", "1")
	w, err := storewatch.New(fs.store, storewatch.Options{})
	require.NoError(t, err)
	require.NoError(t, w.Watch("a", "b"))
	gets := fs.getCalls()
	first := w.Poll(ctx).Events
	require.Len(t, first, 2)
	assert.Empty(t, first[0].Version, "no version, and the checksum is not exposed")

	// New labels, same data: a new version in the backend, but the data
	// checksum is the same.
	_, err = mem.Put(ctx, &secretstore.Secret{Name: "a", Data: edgesecrets.Data{"v": []byte("1")}, Labels: map[string]string{"x": "y"}}, secretstore.PutOptions{})
	require.NoError(t, err)
	assert.Empty(t, w.Poll(ctx).Events)
	testkit.Put(t, mem, "b", "2")
	ev := w.Poll(ctx).Events
	assert.Equal(t, []string{"changed b"}, summary(ev))
	assert.Empty(t, ev[0].Version)
	assert.Equal(t, 3*2, fs.getCalls()-gets-2, "one Get per name per cycle, only because Stat had no version (and two to compare the Puts)")
	_, per := fs.statCalls()
	assert.Equal(t, map[string]int{"a": 3, "b": 3}, per)

	fs.setFault(edgesecrets.ErrPermission, "b")
	assert.Equal(t, []string{"forbidden b"}, summary(w.Poll(ctx).Events))
}

// TestWatcherObserved: Observed gives the tag of the last present
// observation, equal to the ContentTag of the same revision read with Get,
// with or without store versions.
func TestWatcherObserved(t *testing.T) {
	for _, noVersions := range []bool{false, true} {
		t.Run(fmt.Sprintf("noVersions=%t", noVersions), func(t *testing.T) {
			ctx := context.Background()
			fs := newFaultStore(t)
			mem := fs.store
			fs.HideVersions(noVersions)
			w, err := storewatch.New(fs.store, storewatch.Options{})
			require.NoError(t, err)
			read := func() secretstore.ContentTag {
				s, err := fs.store.Get(ctx, "a")
				require.NoError(t, err)
				return s.ContentTag()
			}
			observed := func() (secretstore.ContentTag, bool) { return w.Observed("a") }

			testkit.Put(t, mem, "a", "1")
			_, ok := observed()
			assert.False(t, ok, "not watched")
			require.NoError(t, w.Watch("a"))
			_, ok = observed()
			assert.False(t, ok, "not observed yet")

			w.Poll(ctx)
			v1, ok := observed()
			require.True(t, ok)
			assert.Equal(t, read(), v1)
			assert.Equal(t, !noVersions, strings.HasPrefix(v1.Encode(), "version:"))

			testkit.Put(t, mem, "a", "2")
			unchanged, _ := observed()
			assert.Equal(t, v1, unchanged, "an observation changes with a cycle only")
			ev := w.Poll(ctx).Events
			v2, ok := observed()
			require.True(t, ok)
			assert.NotEqual(t, v1, v2)
			assert.Equal(t, read(), v2)
			require.Len(t, ev, 1)
			if noVersions {
				assert.Empty(t, ev[0].Version, "events carry versions, never checksums")
			} else {
				assert.Equal(t, v2.Encode(), "version:"+ev[0].Version, "events carry versions")
			}

			require.NoError(t, mem.Delete(ctx, "a"))
			w.Poll(ctx)
			_, ok = observed()
			assert.False(t, ok, "deleted")
			testkit.Put(t, mem, "a", "2")
			w.Poll(ctx)
			back, ok := observed()
			require.True(t, ok)
			assert.Equal(t, read(), back)

			fs.setFault(edgesecrets.ErrUnavailable, "a")
			w.Poll(ctx)
			kept, ok := observed()
			assert.True(t, ok, "an unavailable store keeps the last observation")
			assert.Equal(t, back, kept)
			w.Unwatch("a")
			_, ok = observed()
			assert.False(t, ok, "unwatched")
		})
	}
}

func TestWatcherRetryReportsChangedAgain(t *testing.T) {
	ctx := context.Background()
	mem := testkit.NewStore(t, nil)
	testkit.Put(t, mem, "a", "1")
	w, err := storewatch.New(mem, storewatch.Options{})
	require.NoError(t, err)
	require.NoError(t, w.Watch("a", "b"))
	w.Poll(ctx)
	w.Retry("a", "b", "not-watched")
	assert.Equal(t, []string{"changed a"}, summary(w.Poll(ctx).Events), "b is missing: nothing to report as changed")
	assert.Empty(t, w.Poll(ctx).Events, "Retry applies to one cycle")
}

func TestWatcherWatchValidatesAll(t *testing.T) {
	w, err := storewatch.New(testkit.NewStore(t, nil), storewatch.Options{})
	require.NoError(t, err)
	err = w.Watch("ok", "../escape")
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.Contains(t, err.Error(), `"../escape"`)
	assert.Empty(t, w.Names(), "nothing added when one name is invalid")
	w.Unwatch("never-watched")
}

func TestWatcherSlowCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newFaultStore(t)
		mem := fs.store
		names := []string{"a", "b", "c", "d", "e", "f"}
		for _, n := range names {
			testkit.Put(t, mem, n, "1")
		}
		fs.Gate.Hold()
		r := startWatcher(t, fs.store, storewatch.Options{Concurrency: 3}, names...)
		require.Eventually(t, func() bool { n, _ := fs.statCalls(); return n == 3 }, 10*time.Second, time.Millisecond,
			"the first cycle is stuck with 3 Stats in flight")
		goroutines := runtime.NumGoroutine()

		for range 20 {
			r.tick() // 20 intervals pass while the first cycle is stuck
		}
		n, _ := fs.statCalls()
		assert.Equal(t, 3, n, "no second cycle starts while one is running")
		assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "ticks during a slow cycle start no goroutines")
		assert.Equal(t, int64(1), r.beats.Load(), "the loop is busy: no heartbeat until the cycle ends")

		fs.Gate.Release()
		require.Len(t, r.next(), 6)
		// The ticks that came during the slow cycle collapse into one
		// back-to-back cycle.
		require.Eventually(t, func() bool { n, _ := fs.statCalls(); return n == 12 }, 10*time.Second, time.Millisecond)
		require.Never(t, func() bool { n, _ := fs.statCalls(); return n > 12 }, 200*time.Millisecond, 5*time.Millisecond)
		assert.Equal(t, int64(2), r.beats.Load())
		assert.LessOrEqual(t, fs.MaxInflight(), 3, "never more Stats in flight than Concurrency")

		r.tick()
		require.Eventually(t, func() bool { n, _ := fs.statCalls(); return n == 18 }, 10*time.Second, time.Millisecond)
		assert.Equal(t, int64(3), r.beats.Load())
	})
}

func TestWatcherHeartbeatEachTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := testkit.NewStore(t, nil)
		testkit.Put(t, mem, "a", "1")
		r := startWatcher(t, mem, storewatch.Options{}, "a")
		r.next()
		for i := range 5 {
			r.tick()
			want := int64(i + 2)
			require.Eventually(t, func() bool { return r.beats.Load() == want }, 10*time.Second, time.Millisecond)
		}
	})
}

func TestWatcherStopsOnCancelDuringCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newFaultStore(t)
		mem := fs.store
		testkit.Put(t, mem, "a", "1")
		fs.Gate.Hold()
		r := startWatcher(t, fs.store, storewatch.Options{}, "a")
		require.Eventually(t, func() bool { n, _ := fs.statCalls(); return n == 1 }, 10*time.Second, time.Millisecond)
		r.cancel()
		select {
		case err := <-r.done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not stop")
		}
		r.done <- nil // for the cleanup
		assert.Empty(t, r.cycles, "a cancelled cycle reports nothing")
		// No goroutine left behind: synctest.Test fails the test when a
		// goroutine of its bubble is still blocked once the function
		// returns. (The process-wide runtime.NumGoroutine counted before
		// failed 8 runs in 300 with goroutines outside the bubble.)
	})
}

func TestWatcherRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := testkit.NewStore(t, nil)
		r := startWatcher(t, mem, storewatch.Options{}, "a")
		r.next()
		err := r.w.Run(context.Background(), func(context.Context, storewatch.Cycle) {})
		assert.ErrorContains(t, err, "already active")
		assert.ErrorContains(t, r.w.Run(context.Background(), nil), "handler")
	})
}

func TestWatcherHandlerMayChangeNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := testkit.NewStore(t, nil)
		testkit.Put(t, mem, "a", "1")
		testkit.Put(t, mem, "b", "1")
		w, err := storewatch.New(mem, storewatch.Options{})
		require.NoError(t, err)
		require.NoError(t, w.Watch("a"))
		got := make(chan []string, 10)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- w.Run(ctx, func(_ context.Context, c storewatch.Cycle) {
				// Called on the watcher's goroutine: changing the name set
				// here must not deadlock.
				w.Unwatch("a")
				require.NoError(t, w.Watch("b"))
				w.Retry("b")
				got <- summary(c.Events)
			})
		}()
		defer func() { cancel(); <-done }()
		assert.Equal(t, []string{"appeared a initial"}, <-got)
		time.Sleep(time.Minute) // the default interval
		select {
		case s := <-got:
			assert.Equal(t, []string{"appeared b initial"}, s)
		case <-time.After(10 * time.Second):
			t.Fatal("second cycle did not report")
		}
	})
}

func TestWatcherUnwatchDuringCycle(t *testing.T) {
	ctx := context.Background()
	fs := newFaultStore(t)
	mem := fs.store
	testkit.Put(t, mem, "a", "1")
	testkit.Put(t, mem, "b", "1")
	w, err := storewatch.New(fs.store, storewatch.Options{Concurrency: 1})
	require.NoError(t, err)
	require.NoError(t, w.Watch("a", "b"))
	fs.Gate.Hold()
	res := make(chan []storewatch.Event)
	go func() { res <- w.Poll(ctx).Events }()
	require.Eventually(t, func() bool { n, _ := fs.statCalls(); return n == 1 }, 10*time.Second, time.Millisecond)
	w.Unwatch("b")
	fs.Gate.Release()
	assert.Equal(t, []string{"appeared a initial"}, summary(<-res))
	require.NoError(t, w.Watch("b"))
	assert.Equal(t, []string{"appeared b initial"}, summary(w.Poll(ctx).Events), "re-watched name starts afresh")
}

func TestWatcherChangedWithinOneInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The acceptance check used against real backends: a new version
		// written between two ticks is reported at the next tick.
		mem := testkit.NewStore(t, nil)
		testkit.Put(t, mem, "db/password", "old")
		r := startWatcher(t, mem, storewatch.Options{}, "db/password")
		r.next()
		testkit.Put(t, mem, "db/password", "new")
		r.tick()
		assert.Equal(t, []string{"changed db/password"}, summary(r.next()))
	})
}

func TestWatcherInterval(t *testing.T) {
	cases := []struct {
		interval time.Duration
		wantErr  string
		effect   time.Duration
	}{
		{0, "", time.Minute},
		{time.Second, "", time.Second},
		{90 * time.Second, "", 90 * time.Second},
		{-time.Second, "must be positive", 0},
		{500 * time.Millisecond, "below the minimum of 1s", 0},
		{time.Nanosecond, "below the minimum of 1s", 0},
	}
	for _, c := range cases {
		t.Run(c.interval.String(), func(t *testing.T) {
			if c.wantErr != "" {
				_, err := storewatch.New(testkit.NewStore(t, nil), storewatch.Options{Interval: c.interval})
				require.ErrorIs(t, err, edgesecrets.ErrInvalid)
				assert.ErrorContains(t, err, c.wantErr)
				assert.ErrorContains(t, err, c.interval.String(), "the error names the bad value")
				return
			}
			synctest.Test(t, func(t *testing.T) {
				r := startWatcher(t, testkit.NewStore(t, nil), storewatch.Options{Interval: c.interval}, "a")
				r.next()
				time.Sleep(c.effect - time.Millisecond)
				synctest.Wait()
				assert.Empty(t, r.cycles, "no cycle before the interval has passed")
				time.Sleep(time.Millisecond)
				r.next()
			})
		})
	}
	_, err := storewatch.New(nil, storewatch.Options{})
	assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
}

func TestEventKindString(t *testing.T) {
	assert.Equal(t, "unavailable", storewatch.Unavailable.String())
	assert.Equal(t, "EventKind(9)", storewatch.EventKind(9).String())
}

// BenchmarkWatcherCycle measures one steady-state cycle (nothing changed)
// over 10,000 names on the memory store, per name: with versions (Stat
// only) at two concurrencies, and without versions (Stat + Get + SHA-256).
// benchDriver serves prepared secrets as they are, allocating nothing, so
// the benchmark measures the store and the watcher.
type benchDriver struct {
	driver.Store
	secrets map[string]*driver.Secret
}

func (d benchDriver) Get(_ context.Context, name string) (*driver.Secret, error) {
	if s, ok := d.secrets[name]; ok {
		return s, nil
	}
	return nil, &secretstore.Error{Kind: edgesecrets.ErrNotFound}
}

func (d benchDriver) Stat(ctx context.Context, name string) (*driver.Secret, error) {
	return d.Get(ctx, name)
}
func (d benchDriver) CheckCredentials(context.Context) error { return nil }

func BenchmarkWatcherCycle(b *testing.B) {
	const names = 10000
	ctx := context.Background()
	all := make([]string, names)
	versioned := map[string]*driver.Secret{}
	unversioned := map[string]*driver.Secret{}
	for i := range all {
		all[i] = fmt.Sprintf("org/app%03d/secret%05d", i%100, i)
		data := map[string][]byte{"v": []byte("value-of-some-length-0123456789")}
		versioned[all[i]] = &driver.Secret{Data: data, Version: strconv.Itoa(i + 1)}
		unversioned[all[i]] = &driver.Secret{Data: data}
	}
	cases := []struct {
		name        string
		noVersions  bool
		noCheck     bool // hide the driver's credential check
		concurrency int
	}{
		{"versions/concurrency=1", false, false, 1},
		{"versions/concurrency=1/no-credential-check", false, true, 1},
		{"versions/concurrency=4", false, false, 4},
		{"checksum/concurrency=1", true, false, 1},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			d := benchDriver{secrets: versioned}
			if c.noVersions {
				d.secrets = unversioned
			}
			var drv driver.Store = d
			if c.noCheck {
				drv = struct{ driver.Store }{d}
			}
			w, err := storewatch.New(testkit.NewStore(b, drv), storewatch.Options{Concurrency: c.concurrency})
			require.NoError(b, err)
			require.NoError(b, w.Watch(all...))
			require.Len(b, w.Poll(ctx).Events, names) // baseline
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mallocs := ms.Mallocs
			b.ResetTimer()
			cycles := 0
			for b.Loop() {
				if ev := w.Poll(ctx).Events; len(ev) != 0 {
					b.Fatalf("steady state reported %d events", len(ev))
				}
				cycles++
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms)
			perName := float64(cycles * names)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/perName, "ns/name")
			b.ReportMetric(float64(ms.Mallocs-mallocs)/perName, "allocs/name")
		})
	}
}

// A cycle reports how every name fared and the credential check's result,
// so a caller can tell the store refusing the caller itself (an expired
// token) from one secret's permission removed.
func TestWatcherCycleTellsStoreFailureFromOneSecret(t *testing.T) {
	names := []string{"a", "b", "c", "d", "gone"}
	refused := &secretstore.Error{Kind: edgesecrets.ErrPermission, Err: errors.New("refused")}
	down := &secretstore.Error{Kind: edgesecrets.ErrUnavailable, Err: errors.New("down")}
	cases := []struct {
		name    string
		noCheck bool // the store has no credential check
		fault   func(*testkit.Driver)
		// want: the second cycle's counts and events.
		answered, forbidden, unavailable int
		credentials                      error // nil: checked and accepted
		storeFailure                     error // nil: none
		events                           []string
	}{
		{name: "healthy", fault: func(*testkit.Driver) {},
			answered: 5},
		{name: "one secret's permission removed", fault: func(d *testkit.Driver) { d.Fail(edgesecrets.ErrPermission, "b") },
			answered: 4, forbidden: 1, events: []string{"forbidden b"}},
		{name: "credentials rejected: every name refused", fault: func(d *testkit.Driver) {
			d.Fail(edgesecrets.ErrPermission, names...)
			d.SetCredentials(refused)
		},
			forbidden: 5, credentials: edgesecrets.ErrPermission, storeFailure: edgesecrets.ErrPermission,
			events: []string{"forbidden a", "forbidden b", "forbidden c", "forbidden d", "forbidden gone"}},
		{name: "store down", fault: func(d *testkit.Driver) {
			d.Fail(edgesecrets.ErrUnavailable, names...)
			d.SetCredentials(down)
		},
			unavailable: 5, credentials: edgesecrets.ErrUnavailable, storeFailure: edgesecrets.ErrUnavailable,
			events: []string{"unavailable a,b,c,d,gone outage=true"}},
		{name: "credential check fails, names read fine", fault: func(d *testkit.Driver) { d.SetCredentials(refused) },
			answered: 5, credentials: edgesecrets.ErrPermission, storeFailure: edgesecrets.ErrPermission},
		{name: "no check: one name refused, others answered", noCheck: true, fault: func(d *testkit.Driver) { d.Fail(edgesecrets.ErrPermission, "b") },
			answered: 4, forbidden: 1, events: []string{"forbidden b"}},
		{name: "no check: every name refused", noCheck: true, fault: func(d *testkit.Driver) { d.Fail(edgesecrets.ErrPermission, names...) },
			forbidden: 5, storeFailure: edgesecrets.ErrPermission,
			events: []string{"forbidden a", "forbidden b", "forbidden c", "forbidden d", "forbidden gone"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				d := testkit.NewDriver()
				var drv driver.Store = d
				if c.noCheck {
					drv = struct{ driver.Store }{d}
				}
				store := testkit.NewStore(t, drv)
				for _, n := range names[:4] {
					testkit.Put(t, store, n, "1")
				}
				w, err := storewatch.New(store, storewatch.Options{OutageAfter: -1})
				require.NoError(t, err)
				require.NoError(t, w.Watch(names...))
				first := w.Poll(ctx)
				require.Equal(t, 5, first.Answered, "a healthy first cycle")
				require.Equal(t, !c.noCheck, first.CredentialsChecked)
				require.NoError(t, first.StoreFailure())

				c.fault(d)
				checks := d.Calls("check-credentials", "")
				time.Sleep(time.Minute)
				got := w.Poll(ctx)
				assert.Equal(t, time.Now(), got.At)
				assert.Equal(t, 5, got.Watched)
				assert.Equal(t, c.answered, got.Answered, "answered")
				assert.Equal(t, c.forbidden, got.Forbidden, "forbidden")
				assert.Equal(t, c.unavailable, got.Unavailable, "unavailable")
				assert.Equal(t, got.Watched, got.Answered+got.Forbidden+got.Unavailable)
				assert.Equal(t, c.events, nilIfEmpty(summary(got.Events)))
				assert.Equal(t, !c.noCheck, got.CredentialsChecked)
				if c.noCheck {
					assert.Equal(t, checks, d.Calls("check-credentials", ""), "no check to run")
					assert.NoError(t, got.Credentials)
				} else {
					assert.Equal(t, checks+1, d.Calls("check-credentials", ""), "one check per cycle")
					if c.credentials == nil {
						assert.NoError(t, got.Credentials)
					} else {
						assert.ErrorIs(t, got.Credentials, c.credentials)
					}
				}
				if c.storeFailure == nil {
					assert.NoError(t, got.StoreFailure())
				} else {
					assert.ErrorIs(t, got.StoreFailure(), c.storeFailure)
				}

				// The next cycle counts the same states again, without
				// repeating their events.
				again := w.Poll(ctx)
				assert.Equal(t, [3]int{c.answered, c.forbidden, c.unavailable}, [3]int{again.Answered, again.Forbidden, again.Unavailable})
				for _, e := range again.Events {
					assert.Equal(t, storewatch.Unavailable, e.Kind, "only Unavailable repeats")
				}
			})
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Run hands over every cycle, events or not, and a watcher with no names
// still checks the credentials.
func TestWatcherRunHandsOverEveryCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backend := mock.NewStore(nil)
		r := startWatcher(t, backend.Store, storewatch.Options{})
		for i := range 3 {
			c := r.nextCycle()
			assert.Empty(t, c.Events)
			assert.Zero(t, c.Watched)
			assert.True(t, c.CredentialsChecked)
			assert.NoError(t, c.StoreFailure())
			assert.Len(t, backend.Calls("check-credentials", ""), i+1)
			r.tick()
		}
	})
}

// The credential check's changes are logged once each: an error when the
// store starts rejecting the credentials, info when it accepts them again.
func TestWatcherLogsCredentialTransitionsOnce(t *testing.T) {
	ctx := t.Context()
	backend := mock.NewStore(nil)
	logger, logs := logtest.NewLogger()
	w, err := storewatch.New(backend.Store, storewatch.Options{Logger: logger})
	require.NoError(t, err)
	count := func(msg string) int { return strings.Count(logs.String(), msg) }
	const rejected, accepted = `"level":"ERROR","msg":"secret store rejects the credentials`, `"msg":"secret store accepts the credentials again"`
	steps := []struct {
		fail               error
		rejected, accepted int
	}{
		{nil, 0, 0},
		{edgesecrets.ErrPermission, 1, 0},
		{edgesecrets.ErrPermission, 1, 0},
		{edgesecrets.ErrPermission, 1, 0},
		{nil, 1, 1},
		{nil, 1, 1},
		{edgesecrets.ErrPermission, 2, 1},
	}
	for i, s := range steps {
		if s.fail != nil {
			backend.SetFaults(mock.Faults{Op: "check-credentials", Fail: s.fail, Times: 1})
		}
		w.Poll(ctx)
		assert.Equal(t, s.rejected, count(rejected), "step %d: rejections logged", i)
		assert.Equal(t, s.accepted, count(accepted), "step %d: recoveries logged", i)
	}
}
