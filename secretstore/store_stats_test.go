package secretstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

var (
	call = testkit.Call
	ops  = testkit.Ops
)

// newStore wraps d (a new test driver when nil) in a Store without
// retries, unless opts says otherwise.
func newStore(t testing.TB, d driver.Store, opts ...secretstore.Options) *secretstore.Store {
	t.Helper()
	if d == nil {
		d = testkit.NewDriver()
	}
	o := secretstore.Options{MaxAttempts: 1}
	if len(opts) > 0 {
		o = opts[0]
	}
	s, err := secretstore.New(d, o)
	require.NoError(t, err)
	return s
}

// put writes {"v": value} to name.
func put(t testing.TB, s *secretstore.Store, name, value string) {
	t.Helper()
	_, err := s.Put(context.Background(), &secretstore.Secret{Name: name, Data: edgesecrets.Data{"v": []byte(value)}}, secretstore.PutOptions{})
	require.NoError(t, err)
}

// A call counts as a backend interaction when the backend answered:
// success, NotFound, Conflict, Permission; not Unavailable, Invalid, a
// name refused before the backend, a cancelled context.
func TestLastSuccessAndStats(t *testing.T) {
	cases := []struct {
		name     string
		fail     error // kind the driver fails with; nil: none
		cancel   bool  // call with a cancelled context
		badName  bool  // call with an invalid name
		answered bool  // counts as a successful backend interaction
	}{
		{name: "success", answered: true},
		{name: "not found is an answer", fail: edgesecrets.ErrNotFound, answered: true},
		{name: "conflict is an answer", fail: edgesecrets.ErrConflict, answered: true},
		{name: "permission denied is an answer", fail: edgesecrets.ErrPermission, answered: true},
		{name: "unavailable is not", fail: edgesecrets.ErrUnavailable},
		{name: "invalid is not", fail: edgesecrets.ErrInvalid},
		{name: "invalid name is not", badName: true},
		{name: "cancelled context is not", cancel: true},
	}
	for _, c := range cases {
		for _, op := range ops {
			t.Run(c.name+"/"+op, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					d := testkit.NewDriver()
					s := newStore(t, d)
					put(t, s, "x", "1")
					assert.Equal(t, time.Now(), s.LastSuccess(), "the put answered")
					first := time.Now()
					time.Sleep(time.Minute)

					ctx := t.Context()
					if c.cancel {
						cctx, cancel := context.WithCancel(ctx)
						cancel()
						ctx = cctx
					}
					if c.fail != nil {
						d.Fail(c.fail, "x")
					}
					name := "x"
					if c.badName {
						name = "../x"
					}
					err := call(ctx, s, op, name)
					deleteMissing := op == "delete" && c.fail == edgesecrets.ErrNotFound //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
					if c.fail == nil && !c.cancel && !c.badName || deleteMissing {
						require.NoError(t, err, "deleting a missing secret is not an error")
					} else {
						require.Error(t, err)
					}
					if c.answered {
						assert.Equal(t, first.Add(time.Minute), s.LastSuccess(), "%s counts as interaction", c.name)
					} else {
						assert.Equal(t, first, s.LastSuccess(), "%s does not count as interaction", c.name)
					}
					wantErrors := int64(0)
					if err != nil {
						wantErrors = 1
					}
					st := s.Stats()
					if op == "put" {
						assert.Equal(t, secretstore.OpStats{Calls: 2, Errors: wantErrors}, st[op])
					} else {
						assert.Equal(t, secretstore.OpStats{Calls: 1, Errors: wantErrors}, st[op])
						assert.Equal(t, secretstore.OpStats{Calls: 1}, st["put"])
					}
				})
			})
		}
	}
}

func TestStatsOfBatchesAndCopies(t *testing.T) {
	ctx := t.Context()
	s := newStore(t, testkit.Batching(testkit.NewDriver()))
	put(t, s, "a", "1")
	_, err := s.GetBatch(ctx, []string{"a", "b"})
	require.NoError(t, err)
	assert.Equal(t, map[string]secretstore.OpStats{
		"put": {Calls: 1},
		"get": {Calls: 1}, // one batch
	}, s.Stats())
	st := s.Stats()
	st["put"] = secretstore.OpStats{}
	assert.Equal(t, int64(1), s.Stats()["put"].Calls, "Stats returns a copy")
	assert.WithinDuration(t, time.Now(), s.LastSuccess(), time.Hour, "the wall clock")
}

func TestStatsConcurrent(t *testing.T) {
	ctx := t.Context()
	d := testkit.NewDriver()
	s := newStore(t, d)
	put(t, s, "x", "1")
	d.FailTimes(100, edgesecrets.ErrUnavailable, "x")
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 50 {
				_ = call(ctx, s, "get", "x")
				_ = s.LastSuccess()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, secretstore.OpStats{Calls: 500, Errors: 100}, s.Stats()["get"])
}

// The credential check reaches the driver every time, is counted like any
// call, and keeps its promise: refused, cannot tell, or a context error;
// any other kind becomes ErrUnavailable with its cause. A driver without
// a check gives errors.ErrUnsupported, which is not counted.
func TestCheckCredentials(t *testing.T) {
	cause := errors.New("HTTP 400")
	cases := []struct {
		name     string
		driver   error // what the driver's check returns
		noCheck  bool
		want     error // kind; nil: passes
		text     string
		answered bool
	}{
		{name: "accepted", answered: true},
		{name: "refused", driver: &secretstore.Error{Kind: edgesecrets.ErrPermission, Err: cause}, want: edgesecrets.ErrPermission, answered: true,
			text: "secretstore: check-credentials: permission denied: HTTP 400"},
		{name: "cannot tell", driver: &secretstore.Error{Kind: edgesecrets.ErrUnavailable, Err: cause}, want: edgesecrets.ErrUnavailable},
		{name: "invalid", driver: &secretstore.Error{Kind: edgesecrets.ErrInvalid, Err: cause}, want: edgesecrets.ErrUnavailable,
			text: "secretstore: check-credentials: unavailable: HTTP 400"},
		{name: "not found", driver: &secretstore.Error{Kind: edgesecrets.ErrNotFound, Err: cause}, want: edgesecrets.ErrUnavailable,
			text: "secretstore: check-credentials: unavailable: HTTP 400"},
		{name: "foreign error with a kind", driver: errors.Join(errors.New("odd"), edgesecrets.ErrConflict), want: edgesecrets.ErrUnavailable,
			text: "secretstore: check-credentials: unavailable: odd\nconflict"},
		{name: "no check", noCheck: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := testkit.NewDriver()
			d.SetCredentials(c.driver)
			var drv driver.Store = d
			if c.noCheck {
				drv = struct{ driver.Store }{d}
			}
			s := newStore(t, drv)
			for range 2 {
				err := s.CheckCredentials(t.Context())
				switch {
				case c.noCheck:
					require.ErrorIs(t, err, errors.ErrUnsupported)
					assert.Nil(t, edgesecrets.KindOf(err), "no error kind: the store was not asked")
				case c.want == nil:
					require.NoError(t, err)
				default:
					require.ErrorIs(t, err, c.want)
					for _, other := range allKinds {
						if other != c.want { //nolint:errorlint // compares the table's values, not an error chain
							assert.NotErrorIs(t, err, other, "one kind only")
						}
					}
					if c.text != "" {
						assert.EqualError(t, err, c.text)
					}
				}
			}
			wantCalls := 2
			if c.noCheck {
				wantCalls = 0
			}
			assert.Equal(t, wantCalls, d.Calls("check-credentials", ""), "every check reaches the driver, none is cached")
			assert.Equal(t, int64(wantCalls), s.Stats()["check-credentials"].Calls)
			assert.Equal(t, c.answered, !s.LastSuccess().IsZero())
		})
	}
}

// Calls failing with ErrUnavailable are tried again, MaxAttempts in all;
// other kinds are not.
func TestRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := testkit.NewDriver()
		s := newStore(t, d, secretstore.Options{MaxAttempts: 4})
		put(t, s, "x", "1")

		d.FailTimes(3, edgesecrets.ErrUnavailable, "x")
		start := time.Now()
		_, err := s.Get(t.Context(), "x")
		require.NoError(t, err, "the fourth attempt succeeds")
		assert.Equal(t, 4, d.Calls("get", "x")-1, "four attempts")
		waited := time.Since(start)
		assert.GreaterOrEqual(t, waited, (50+100+200)*time.Millisecond, "with growing pauses")
		assert.LessOrEqual(t, waited, (100+200+400)*time.Millisecond)

		d.Fail(edgesecrets.ErrUnavailable, "x")
		before := d.Calls("stat", "x")
		_, err = s.Stat(t.Context(), "x")
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
		assert.Contains(t, err.Error(), "(attempt 4)", "the error says how often it was tried")
		assert.Equal(t, 4, d.Calls("stat", "x")-before)

		d.Fail(edgesecrets.ErrPermission, "x")
		before = d.Calls("stat", "x")
		_, err = s.Stat(t.Context(), "x")
		require.ErrorIs(t, err, edgesecrets.ErrPermission)
		assert.Equal(t, 1, d.Calls("stat", "x")-before, "an answer is not retried")
		assert.Equal(t, secretstore.OpStats{Calls: 2, Errors: 2}, s.Stats()["stat"], "a call counts once, however often it was tried")
	})
}

// A caller's deadline bounds a call, retries included: a pause that would
// end after it is not started, and the store's ErrUnavailable comes back,
// not the context's error.
func TestRetriesEndAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := testkit.NewDriver()
		s := newStore(t, d, secretstore.Options{MaxAttempts: 20, MaxBackoff: time.Second})
		d.Fail(edgesecrets.ErrUnavailable, "x")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		_, err := s.Get(ctx, "x")
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 2*time.Second, "within the bound")
		assert.Less(t, d.Calls("get", "x"), 20, "the deadline, not MaxAttempts, ended the call")

		// Cancelled while pausing: the context's error.
		ctx, cancel = context.WithCancel(t.Context())
		go func() {
			time.Sleep(20 * time.Millisecond)
			cancel()
		}()
		_, err = s.Get(ctx, "x")
		require.ErrorIs(t, err, context.Canceled)
		assert.Nil(t, edgesecrets.KindOf(err))
	})
}

// A Put whose write failed with ErrUnavailable is tried again: an
// unconditional one from the read, a conditional one by sending the same
// write, idempotency token included.
func TestPutRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		d := testkit.NewDriver()
		s := newStore(t, d, secretstore.Options{})
		put(t, s, "x", "1")
		md, err := s.Stat(ctx, "x")
		require.NoError(t, err)

		for _, conditional := range []bool{false, true} {
			var opts secretstore.PutOptions
			if conditional {
				opts.IfVersion = md.Version
			}
			d.FailTimes(1, edgesecrets.ErrUnavailable, "x") // the read
			reads := d.Calls("get", "x")
			tokens := len(d.Tokens())
			changed, err := s.Put(ctx, &secretstore.Secret{Name: "x", Data: edgesecrets.Data{"v": []byte(md.Version + "new")}}, opts)
			require.NoError(t, err, "%+v", opts)
			assert.True(t, changed)
			assert.Equal(t, 2, d.Calls("get", "x")-reads, "a failed read is read again")
			assert.Len(t, d.Tokens(), tokens+1)
			md, err = s.Stat(ctx, "x")
			require.NoError(t, err)
		}

		// The write fails: unconditional, read again and written.
		reads := d.Calls("get", "x")
		tokens := len(d.Tokens())
		failWrite := func() {
			d.SetHook(func(op string) error {
				if op == "put" {
					d.SetHook(nil)
					return &secretstore.Error{Kind: edgesecrets.ErrUnavailable, Err: errors.New("lost")}
				}
				return nil
			})
		}
		failWrite()
		changed, err := s.Put(ctx, &secretstore.Secret{Name: "x", Data: edgesecrets.Data{"v": []byte("a")}}, secretstore.PutOptions{})
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Equal(t, 2, d.Calls("get", "x")-reads, "read again")
		got := d.Tokens()[tokens:]
		require.Len(t, got, 2)
		assert.Equal(t, got[0], got[1], "one token for the Put's attempts")
		assert.Len(t, got[0], 36)

		// Conditional: the same write sent again, without reading.
		md, err = s.Stat(ctx, "x")
		require.NoError(t, err)
		reads = d.Calls("get", "x")
		tokens = len(d.Tokens())
		failWrite()
		changed, err = s.Put(ctx, &secretstore.Secret{Name: "x", Data: edgesecrets.Data{"v": []byte("b")}}, secretstore.PutOptions{IfVersion: md.Version})
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Equal(t, 1, d.Calls("get", "x")-reads, "not read again: the write would lose to itself")
		got = d.Tokens()[tokens:]
		require.Len(t, got, 2)
		assert.Equal(t, got[0], got[1], "sent again with its token")
		assert.NotEqual(t, d.Tokens()[tokens-1], got[0], "a new Put, a new token")
	})
}
