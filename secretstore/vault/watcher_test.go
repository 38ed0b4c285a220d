package vault_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/storewatch"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// watchInterval is the watcher's interval in these tests: the minimum, on
// the real clock, as a fast-rotating deployment would configure it.
const watchInterval = time.Second

// eventSlack is how much longer than one interval an expected event may
// take to arrive on a loaded machine. Timing is not what these tests
// assert: the cycle count (see watchRun.await) is.
const eventSlack = 5 * time.Second

// cycleEvent is an event with the number of the watcher cycle that
// reported it.
type cycleEvent struct {
	cycle int64
	storewatch.Event
}

func (c cycleEvent) String() string {
	return fmt.Sprintf("cycle %d: %s %s%s", c.cycle, c.Kind, c.Name, strings.Join(c.Names, ","))
}

// watchRun runs a storewatch.Watcher over a real Vault store
// with the real clock, numbering its cycles by the heartbeat hook and
// recording each cycle's events with that number.
type watchRun struct {
	w        *storewatch.Watcher
	mon      *secretstore.Store
	interval time.Duration
	cycles   atomic.Int64 // cycles started (heartbeats)

	mu     sync.Mutex
	events []cycleEvent
	// before holds the monitor's stats as each cycle started, by cycle
	// number: the heartbeat runs between cycles, so they are exact.
	before map[int64]map[string]secretstore.OpStats
}

// startWatch watches names in store, polling every watchInterval until t
// ends.
func startWatch(t *testing.T, store *secretstore.Store, names ...string) *watchRun {
	t.Helper()
	r := &watchRun{mon: store, interval: watchInterval, before: map[int64]map[string]secretstore.OpStats{}}
	var err error
	r.w, err = storewatch.New(r.mon, storewatch.Options{Interval: watchInterval, Heartbeat: r.heartbeat})
	require.NoError(t, err)
	require.NoError(t, r.w.Watch(names...))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.w.Run(ctx, func(_ context.Context, c storewatch.Cycle) { r.record(c.Events) })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(time.Minute):
			t.Error("the watcher did not stop after its context was cancelled")
		}
	})
	return r
}

func (r *watchRun) heartbeat(time.Time) {
	n := r.cycles.Add(1)
	st := r.mon.Stats()
	r.mu.Lock()
	r.before[n] = st
	r.mu.Unlock()
}

// record records a cycle's events. It runs on the watcher's goroutine after
// the cycle's heartbeat, so the count is this cycle's number.
func (r *watchRun) record(events []storewatch.Event) {
	n := r.cycles.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range events {
		r.events = append(r.events, cycleEvent{cycle: n, Event: e})
	}
}

// mark returns the number of the cycle in progress (or last started).
// Every cycle numbered higher starts after mark returns, and the events of
// lower-numbered cycles are recorded already.
func (r *watchRun) mark() int64 { return r.cycles.Load() }

// window is the cycles around a change to the store: from is the cycle in
// progress as the change began, to the one in progress once it was done.
// Cycles from..to may or may not see the change; cycle to+1, the first to
// start after it, must.
type window struct{ from, to int64 }

// around makes a change and returns the window of cycles around it.
func (r *watchRun) around(change func()) window {
	from := r.mark()
	change()
	return window{from: from, to: r.mark()}
}

// since returns the events of cycles numbered from on.
func (r *watchRun) since(from int64) []cycleEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []cycleEvent
	for _, e := range r.events {
		if e.cycle >= from {
			out = append(out, e)
		}
	}
	return out
}

// await waits up to one interval plus eventSlack for an event of kind about
// name ("" for Unavailable) in the cycles of win or after, and requires it
// to come no later than the first cycle that started after the change
// (win.to+1): whatever a cycle took on a loaded machine, the change was
// seen within one interval of the watcher's own time.
func (r *watchRun) await(t *testing.T, win window, kind storewatch.EventKind, name string) cycleEvent {
	t.Helper()
	var found cycleEvent
	require.Eventually(t, func() bool {
		for _, e := range r.since(win.from) {
			if e.Kind == kind && e.Name == name {
				found = e
				return true
			}
		}
		return false
	}, r.interval+eventSlack, 10*time.Millisecond, "no %s event for %q from cycle %d on; events: %v", kind, name, win.from, r.since(0))
	assert.LessOrEqual(t, found.cycle, win.to+1, "%s reported in the first cycle after the change", kind)
	return found
}

// settle waits until cycle n's events are recorded: cycle n+1 has started.
func (r *watchRun) settle(t *testing.T, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return r.cycles.Load() > n }, time.Duration(n-r.cycles.Load()+2)*r.interval+eventSlack, 10*time.Millisecond,
		"watcher cycle %d did not end", n)
}

// statsBefore returns the monitor's stats as cycle n started.
func (r *watchRun) statsBefore(n int64) map[string]secretstore.OpStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.before[n]
}

// kvCase is a KV engine version and what the watcher sees on it.
type kvCase struct {
	name     string
	kv       int
	versions bool // KV v2 numbers versions; on v1 the watcher checksums
}

var kvCases = []kvCase{
	{name: "kv2", kv: 2, versions: true},
	{name: "kv1", kv: 1, versions: false},
}

// version returns the Version an event carries for the n-th version of a
// secret: the KV v2 version number, or nothing on KV v1 (the watcher's
// checksum is never exposed).
func (c kvCase) version(n int) string {
	if !c.versions {
		return ""
	}
	return fmt.Sprint(n)
}

// Issue 9's proof against the real Vault dev server: a watcher polling
// every second reports a new version of a watched secret as Changed in the
// first cycle after the write, then its deletion as Deleted, each exactly
// once and nothing for the secret left alone. On KV v2 a cycle costs one
// Stat (the metadata endpoint) per name; KV v1 keeps no versions, so the
// watcher falls back to Get and a SHA-256 of the content.
func TestWatcherOnVault(t *testing.T) {
	srv := vaulttest.Shared(t)
	for _, c := range kvCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := open(t, rootConfig(srv, srv.EnableKV(t, c.kv)))
			put(t, s, "app/db", d("password", "first"), nil)
			put(t, s, "app/api", d("token", "kept"), nil)
			w := startWatch(t, s, "app/db", "app/api")

			initial := w.await(t, window{}, storewatch.Appeared, "app/db")
			assert.True(t, initial.Initial)
			assert.Equal(t, c.version(1), initial.Version)
			w.settle(t, initial.cycle)
			require.ElementsMatch(t, []string{"appeared app/db", "appeared app/api"}, describe(w.since(0)),
				"the first cycle sets the baseline")

			// A new version: Changed for app/db in the next cycle, nothing
			// for app/api, nothing repeated.
			win := w.around(func() { put(t, s, "app/db", d("password", "second"), nil) })
			changed := w.await(t, win, storewatch.Changed, "app/db")
			assert.Equal(t, c.version(2), changed.Version)
			w.settle(t, changed.cycle+1)
			assert.Equal(t, []string{"changed app/db"}, describe(w.since(win.from)))

			// What the next cycle cost, from the monitor's counts between
			// heartbeats: one Stat per name, and a Get per name only where
			// Stat has no version.
			next := changed.cycle + 1
			st, st2 := w.statsBefore(next), w.statsBefore(next+1)
			require.NotNil(t, st2)
			assert.EqualValues(t, 2, st2["stat"].Calls-st["stat"].Calls, "one Stat per watched name")
			gets := st2["get"].Calls - st["get"].Calls
			if c.versions {
				assert.Zero(t, gets, "KV v2: versions suffice, no value is read")
			} else {
				assert.EqualValues(t, 2, gets, "KV v1: one Get per name for the checksum")
			}

			// Deleted once, in the first cycle after the delete.
			win = w.around(func() { require.NoError(t, s.Delete(ctx, "app/db")) })
			deleted := w.await(t, win, storewatch.Deleted, "app/db")
			assert.False(t, deleted.Initial)
			w.settle(t, deleted.cycle+1)
			assert.Equal(t, []string{"deleted app/db"}, describe(w.since(win.from)))
		})
	}
}

// While the server is sealed the watcher reports one Unavailable event per
// cycle covering every name (an outage), never Deleted; after unseal it
// reports nothing, as nothing changed, and sees the next rotation. It runs
// on a server of its own, since sealing would disturb the shared one.
func TestWatcherOnSealedVault(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	type run struct {
		kvCase
		store *secretstore.Store
		w     *watchRun
	}
	var runs []*run
	for _, c := range kvCases {
		cfg := rootConfig(srv, srv.EnableKV(t, c.kv))
		cfg.Timeout = "5s"
		r := &run{kvCase: c, store: open(t, cfg)}
		put(t, r.store, "app/db", d("password", "first"), nil)
		put(t, r.store, "app/api", d("token", "kept"), nil)
		r.w = startWatch(t, r.store, "app/db", "app/api")
		runs = append(runs, r)
	}
	for _, r := range runs {
		initial := r.w.await(t, window{}, storewatch.Appeared, "app/api")
		r.w.settle(t, initial.cycle)
		require.Len(t, r.w.since(0), 2, "%s: the baseline", r.name)
	}
	// around, for every run at once.
	around := func(change func()) map[string]window {
		wins := map[string]window{}
		for _, r := range runs {
			wins[r.name] = window{from: r.w.mark()}
		}
		change()
		for _, r := range runs {
			win := wins[r.name]
			win.to = r.w.mark()
			wins[r.name] = win
		}
		return wins
	}

	wins := around(func() { srv.Seal(t) })
	for _, r := range runs {
		win := wins[r.name]
		r.w.await(t, win, storewatch.Unavailable, "")
		r.w.settle(t, win.to+2)
		sealedCycles := 0
		for _, e := range r.w.since(win.from) {
			assert.Equal(t, storewatch.Unavailable, e.Kind, "%s: while sealed, only Unavailable: %v", r.name, e)
			assert.ErrorIs(t, e.Err, edgesecrets.ErrUnavailable)
			if e.cycle <= win.to {
				continue // a cycle the seal came in the middle of: some names may have been checked
			}
			sealedCycles++
			assert.True(t, e.Outage, "%s: every name failed: an outage: %v", r.name, e)
			assert.Equal(t, []string{"app/api", "app/db"}, e.Names)
		}
		assert.GreaterOrEqual(t, sealedCycles, 2, "%s: Unavailable is reported in every sealed cycle", r.name)
	}

	wins = around(func() { srv.Unseal(t) })
	for _, r := range runs {
		// Cycles during the unseal may still have found the server
		// sealed; the ones after report nothing.
		win := wins[r.name]
		r.w.settle(t, win.to+2)
		for _, e := range r.w.since(win.from) {
			if e.cycle <= win.to {
				assert.Equal(t, storewatch.Unavailable, e.Kind, "%s: %v", r.name, e)
				continue
			}
			t.Errorf("%s: a spurious event after unseal: %v", r.name, e)
		}
		_, err := r.store.Get(t.Context(), "app/db")
		require.NoError(t, err, "%s: the secret is still there", r.name)
	}

	// The state kept through the outage still tells a rotation from none.
	wins = around(func() {
		for _, r := range runs {
			put(t, r.store, "app/db", d("password", "second"), nil)
		}
	})
	for _, r := range runs {
		win := wins[r.name]
		changed := r.w.await(t, win, storewatch.Changed, "app/db")
		assert.Equal(t, r.version(2), changed.Version)
		r.w.settle(t, changed.cycle)
		assert.Equal(t, []string{"changed app/db"}, describe(r.w.since(win.from)), r.name)
	}
}

// describe renders events as "kind name" for comparisons.
func describe(events []cycleEvent) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.Kind.String()+" "+e.Name+strings.Join(e.Names, ","))
	}
	slices.Sort(out)
	return out
}
