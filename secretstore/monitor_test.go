package secretstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// fakeClock is an injectable clock, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestMonitorInteraction(t *testing.T) {
	cases := []struct {
		name     string
		fail     error // kind injected by the mock; nil: none
		cancel   bool  // call with a cancelled context
		badName  bool  // call with an invalid name
		answered bool  // counts as a successful backend interaction
	}{
		{name: "success", answered: true},
		{name: "not found is an answer", fail: secretstore.ErrNotFound, answered: true},
		{name: "conflict is an answer", fail: secretstore.ErrConflict, answered: true},
		{name: "permission denied is an answer", fail: secretstore.ErrPermission, answered: true},
		{name: "unavailable is not", fail: secretstore.ErrUnavailable},
		{name: "invalid is not", fail: secretstore.ErrInvalid},
		{name: "invalid name is not", badName: true},
		{name: "cancelled context is not", cancel: true},
	}
	for _, c := range cases {
		for _, op := range ops {
			t.Run(c.name+"/"+op, func(t *testing.T) {
				clock := newFakeClock()
				backend := mock.NewStore(nil)
				put(t, backend.Inner(), "x", "1")
				m := secretstore.NewMonitor(backend, secretstore.WithMonitorClock(clock.Now))
				assert.True(t, m.LastSuccess().IsZero(), "no interaction yet")

				require.NoError(t, call(t.Context(), m, secretstore.OpGet, "x"))
				first := clock.Now()
				assert.WithinDuration(t, first, m.LastSuccess(), 0)
				clock.Advance(time.Minute)

				ctx := t.Context()
				if c.cancel {
					cctx, cancel := context.WithCancel(ctx)
					cancel()
					ctx = cctx
				}
				if c.fail != nil {
					backend.FailNext(op, 1, c.fail)
				}
				name := "x"
				if c.badName {
					name = "../x"
				}
				err := call(ctx, m, op, name)
				if c.fail == nil && !c.cancel && !c.badName {
					require.NoError(t, err)
				} else {
					require.Error(t, err)
				}

				if c.answered {
					assert.WithinDuration(t, first.Add(time.Minute), m.LastSuccess(), 0, "%s counts as interaction", c.name)
				} else {
					assert.WithinDuration(t, first, m.LastSuccess(), 0, "%s does not count as interaction", c.name)
				}
				st := m.Stats()
				wantErrors := int64(0)
				if err != nil {
					wantErrors = 1
				}
				if op == secretstore.OpGet {
					assert.Equal(t, secretstore.OpStats{Calls: 2, Errors: wantErrors}, st[op])
				} else {
					assert.Equal(t, secretstore.OpStats{Calls: 1, Errors: wantErrors}, st[op])
					assert.Equal(t, secretstore.OpStats{Calls: 1}, st[secretstore.OpGet])
				}
			})
		}
	}
}

var (
	call = testkit.Call
	ops  = testkit.Ops
)

func TestMonitorStatsAndGetBatch(t *testing.T) {
	ctx := t.Context()
	m := secretstore.NewMonitor(mock.NewStore(nil))
	put(t, m, "a", "1")
	_, err := m.GetBatch(ctx, []string{"a", "b"})
	require.NoError(t, err)
	m.Record("probe", secretstore.NewError("probe", "", secretstore.ErrUnavailable, nil))
	m.Record("probe", nil)

	assert.Equal(t, map[string]secretstore.OpStats{
		secretstore.OpPut: {Calls: 1},
		secretstore.OpGet: {Calls: 1}, // one batch
		"probe":           {Calls: 2, Errors: 1},
	}, m.Stats())
	assert.False(t, m.LastSuccess().IsZero())
	assert.WithinDuration(t, time.Now(), m.LastSuccess(), time.Hour, "the default clock is the wall clock")

	st := m.Stats()
	st["probe"] = secretstore.OpStats{}
	assert.Equal(t, int64(2), m.Stats()["probe"].Calls, "Stats returns a copy")
}

func TestMonitorConcurrent(t *testing.T) {
	ctx := t.Context()
	backend := mock.NewStore(nil)
	put(t, backend.Inner(), "x", "1")
	m := secretstore.NewMonitor(backend)
	backend.FailNext(secretstore.OpGet, 100, secretstore.ErrUnavailable)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 50 {
				_ = call(ctx, m, secretstore.OpGet, "x")
				_ = m.LastSuccess()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, secretstore.OpStats{Calls: 500, Errors: 100}, m.Stats()[secretstore.OpGet])
}

// storeOnly hides every method of a store but the Store interface's, so
// it has no credential check.
type storeOnly struct{ secretstore.Store }

// The credential check passes through Monitor and Reader to the backend,
// uncached; the Monitor counts it like any call; a store without a check
// reports ErrNoCredentialCheck, which no wrapper records.
func TestCheckCredentialsThroughMiddleware(t *testing.T) {
	wrappers := []struct {
		name string
		wrap func(secretstore.Store, *secretstore.Monitor) secretstore.Store
	}{
		{"bare", func(s secretstore.Store, _ *secretstore.Monitor) secretstore.Store { return s }},
		{"monitor", func(_ secretstore.Store, m *secretstore.Monitor) secretstore.Store { return m }},
		{"reader over monitor", func(_ secretstore.Store, m *secretstore.Monitor) secretstore.Store {
			return secretstore.NewReader(m, secretstore.ReaderOptions{TTL: time.Hour})
		}},
	}
	cases := []struct {
		name      string
		fail      error // kind injected into the backend's check; nil: none
		noCheck   bool  // the backend has no credential check
		want      error // nil: the check passes
		answered  bool  // the Monitor counts it as an interaction
		monitored bool  // the Monitor records it at all
	}{
		{name: "accepted", want: nil, answered: true, monitored: true},
		{name: "rejected", fail: secretstore.ErrPermission, want: secretstore.ErrPermission, answered: true, monitored: true},
		{name: "cannot tell", fail: secretstore.ErrUnavailable, want: secretstore.ErrUnavailable, monitored: true},
		{name: "no check", noCheck: true, want: secretstore.ErrNoCredentialCheck},
	}
	for _, w := range wrappers {
		for _, c := range cases {
			t.Run(w.name+"/"+c.name, func(t *testing.T) {
				backend := mock.NewStore(nil)
				var store secretstore.Store = backend
				if c.noCheck {
					store = storeOnly{backend}
				}
				clock := newFakeClock()
				m := secretstore.NewMonitor(store, secretstore.WithMonitorClock(clock.Now))
				s := w.wrap(store, m)
				if c.fail != nil {
					backend.FailNext(secretstore.OpCheckCredentials, 1, c.fail)
				}
				for i := range 2 {
					err := secretstore.CheckCredentials(t.Context(), s)
					if i == 0 && w.name != "bare" {
						assert.Equal(t, !c.answered, m.LastSuccess().IsZero(), "the first check counts as an interaction: %t", c.answered)
					}
					if i == 1 || c.fail == nil {
						if c.noCheck {
							require.ErrorIs(t, err, errors.ErrUnsupported)
							assert.Nil(t, secretstore.KindOf(err), "no error kind: the store was not asked")
						} else {
							require.NoError(t, err, "check %d", i)
						}
						continue
					}
					require.ErrorIs(t, err, c.want)
					assert.Contains(t, err.Error(), secretstore.OpCheckCredentials)
				}
				wantCalls := 2
				if c.noCheck {
					wantCalls = 0
				}
				assert.Equal(t, wantCalls, backend.Count(secretstore.OpCheckCredentials), "every check reaches the backend, none is cached")
				if w.name == "bare" {
					return
				}
				st := m.Stats()[secretstore.OpCheckCredentials]
				if !c.monitored {
					assert.Zero(t, st)
					assert.True(t, m.LastSuccess().IsZero())
					return
				}
				wantErrors := int64(0)
				if c.fail != nil {
					wantErrors = 1
				}
				assert.Equal(t, secretstore.OpStats{Calls: 2, Errors: wantErrors}, st)
			})
		}
	}
}
