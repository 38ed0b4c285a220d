package mock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

func secret(name, value string) *secretstore.Secret {
	return &secretstore.Secret{Name: name, Data: secretstore.Data{"k": []byte(value)}}
}

var ops = testkit.Ops

// call runs one operation through s by its Op name (testkit.Call).
func call(ctx context.Context, s *mock.Store, op, name string) error {
	return testkit.Call(ctx, s.Store, op, name)
}

func TestNewStoreWrapsMemoryByDefault(t *testing.T) {
	s := mock.NewStore(nil)
	changed, err := s.Put(t.Context(), secret("a", "1"), secretstore.PutOptions{})
	require.NoError(t, err)
	assert.True(t, changed)
	got, err := s.Get(t.Context(), "a")
	require.NoError(t, err)
	assert.Equal(t, []byte("1"), []byte(got.Data["k"]))
	inner, err := s.Inner().Get(t.Context(), "a")
	require.NoError(t, err)
	assert.Equal(t, []byte("1"), []byte(inner.Data["k"]), "the data is in the wrapped store")
}

func TestStoreRecordsCalls(t *testing.T) {
	ctx := t.Context()
	s := mock.NewStore(nil)
	_, _ = s.Put(ctx, secret("db/pw", "x"), secretstore.PutOptions{})
	_, _ = s.Get(ctx, "db/pw")
	_, _ = s.Get(ctx, "db/pw")
	_, _ = s.Get(ctx, "missing")
	_, _ = s.Stat(ctx, "db/pw")
	_, _ = s.List(ctx, "db/")
	_ = s.Delete(ctx, "db/pw")
	_, _ = s.Put(ctx, nil, secretstore.PutOptions{})
	require.NoError(t, s.Close())

	assert.Equal(t, []mock.Call{
		{Op: "get", Name: "db/pw"}, // the Put's read, to compare
		{Op: "put", Name: "db/pw"},
		{Op: "get", Name: "db/pw"},
		{Op: "get", Name: "db/pw"},
		{Op: "get", Name: "missing"},
		{Op: "stat", Name: "db/pw"},
		{Op: "list", Name: "db/"},
		{Op: "delete", Name: "db/pw"},
		// The nil Put was refused before any backend: not recorded.
		{Op: mock.OpClose},
	}, s.Calls())

	for op, want := range map[string]int{
		"get": 4, "put": 1, "stat": 1, "list": 1,
		"delete": 1, mock.OpClose: 1, mock.OpGetBatch: 0, mock.AnyOp: 9,
	} {
		assert.Equal(t, want, s.Count(op), "Count(%q)", op)
	}
	assert.Equal(t, 3, s.CountName("get", "db/pw"))
	assert.Equal(t, 1, s.CountName("get", "missing"))
	assert.Equal(t, 6, s.CountName(mock.AnyOp, "db/pw"))

	_, err := s.Put(ctx, secret("db/pw", "x"), secretstore.PutOptions{})
	assert.ErrorIs(t, err, secretstore.ErrUnavailable, "closed")

	calls := s.Calls()
	calls[0].Name = "changed"
	assert.Equal(t, "db/pw", s.Calls()[0].Name, "Calls returns a copy")
}

func TestFailNext(t *testing.T) {
	for _, op := range ops {
		for _, kind := range []error{secretstore.ErrNotFound, secretstore.ErrPermission, secretstore.ErrUnavailable, secretstore.ErrConflict, secretstore.ErrInvalid} {
			t.Run(op+"/"+kind.Error(), func(t *testing.T) {
				ctx := t.Context()
				// The inner mock records what reaches the wrapped store.
				backend := mock.NewStore(nil)
				_, err := backend.Put(ctx, secret("x", "old"), secretstore.PutOptions{}) // so each Put through s changes it
				require.NoError(t, err)
				s := mock.NewStore(backend.Store)
				s.FailNext(op, 2, kind)
				before := backend.Count(op)

				for i := range 2 {
					err := call(ctx, s, op, "x")
					if op == "delete" && kind == secretstore.ErrNotFound {
						require.NoError(t, err, "deleting a missing secret is no error")
						continue
					}
					require.ErrorIs(t, err, kind, "call %d fails with the injected kind", i)
					assert.ErrorIs(t, err, mock.ErrInjected)
					assert.Equal(t, kind, secretstore.KindOf(err))
					assert.Contains(t, err.Error(), op, "error names the operation")
					assert.Contains(t, err.Error(), `"x"`, "error names the secret")
					for _, other := range []string{"get", "stat", "list"} {
						if other != op {
							assert.NoError(t, call(ctx, s, other, "x"), "%s is not affected", other)
						}
					}
				}
				assert.Equal(t, before, backend.Count(op), "failed calls never reached the wrapped store")
				assert.NoError(t, call(ctx, s, op, "x"), "the third call succeeds")
				assert.Equal(t, before+1, backend.Count(op))
				assert.Equal(t, 3, s.Count(op), "failed calls are recorded too")
			})
		}
	}
}

func TestFailNextPrecedenceAndClearing(t *testing.T) {
	ctx := t.Context()
	s := mock.NewStore(nil)
	s.FailNext(mock.AnyOp, 2, secretstore.ErrUnavailable)
	s.FailNext("get", 1, secretstore.ErrPermission)

	assert.ErrorIs(t, call(ctx, s, "get", "a"), secretstore.ErrPermission, "the op's own failure comes first")
	assert.ErrorIs(t, call(ctx, s, "get", "a"), secretstore.ErrUnavailable, "then AnyOp's")
	assert.ErrorIs(t, call(ctx, s, "list", ""), secretstore.ErrUnavailable, "AnyOp applies to every op")
	assert.NoError(t, call(ctx, s, "list", ""), "AnyOp failures are used up")

	s.FailNext("stat", 5, secretstore.ErrUnavailable)
	s.FailNext("stat", 1, secretstore.ErrConflict)
	assert.ErrorIs(t, call(ctx, s, "stat", "a"), secretstore.ErrConflict, "a second FailNext replaces the first")
	assert.ErrorIs(t, call(ctx, s, "stat", "a"), secretstore.ErrNotFound, "the replacement is used up; the real store answers")

	s.FailNext("stat", 5, secretstore.ErrUnavailable)
	s.FailNext("stat", 0, nil)
	assert.ErrorIs(t, call(ctx, s, "stat", "a"), secretstore.ErrNotFound, "n=0 clears pending failures")
}

func TestFailNextConcurrent(t *testing.T) {
	s := mock.NewStore(nil)
	s.FailNext(mock.AnyOp, 50, secretstore.ErrUnavailable)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if errors.Is(call(t.Context(), s, "list", ""), mock.ErrInjected) {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 50, failed.Load(), "exactly the requested number of calls fail")
	assert.Equal(t, 200, s.Count("list"))
}

func TestUnavailableSwitch(t *testing.T) {
	ctx := t.Context()
	s := mock.NewStore(nil)
	require.NoError(t, call(ctx, s, "put", "a"))
	s.SetUnavailable(true)
	for _, op := range ops {
		err := call(ctx, s, op, "a")
		assert.ErrorIs(t, err, secretstore.ErrUnavailable, op)
		assert.ErrorIs(t, err, mock.ErrInjected, op)
	}
	batch, err := s.GetBatch(ctx, []string{"a"})
	assert.ErrorIs(t, err, secretstore.ErrUnavailable, "GetBatch")
	assert.Nil(t, batch)
	s.SetUnavailable(false)
	got, err := s.Get(ctx, "a")
	require.NoError(t, err, "back up, and the data survived")
	assert.Equal(t, []byte("v-a"), []byte(got.Data["k"]))
	require.NoError(t, s.Close(), "Close is never faulted")
}

func TestLatency(t *testing.T) {
	cases := []struct {
		name      string
		setOp     string
		d         time.Duration
		op        string
		timeout   time.Duration // 0: none
		wantDelay time.Duration
		wantErr   error
	}{
		{"own op delayed", "get", 3 * time.Second, "get", 0, 3 * time.Second, nil},
		{"other op not delayed", "get", 3 * time.Second, "list", 0, 0, nil},
		{"AnyOp delays every op", mock.AnyOp, 2 * time.Second, "stat", 0, 2 * time.Second, nil},
		{"context ends during latency", "get", time.Minute, "get", time.Second, time.Second, context.DeadlineExceeded},
		{"cleared latency", "get", 0, "get", 0, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				s := mock.NewStore(nil)
				require.NoError(t, call(ctx, s, "put", "x"))
				s.SetLatency("get", time.Hour)
				s.SetLatency(c.setOp, c.d)
				if c.setOp == mock.AnyOp {
					s.SetLatency("get", 0)
				}
				if c.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.timeout)
					defer cancel()
				}
				reached := false
				s.SetHook(func(context.Context, mock.Call) error { reached = true; return nil })
				start := time.Now()
				err := call(ctx, s, c.op, "x")
				assert.Equal(t, c.wantDelay, time.Since(start), "delay (fake clock)")
				if c.wantErr == nil {
					assert.NoError(t, err)
				} else {
					assert.ErrorIs(t, err, c.wantErr)
				}
				assert.Equal(t, !errors.Is(c.wantErr, context.DeadlineExceeded), reached, "a call cut short by its context goes no further")
			})
		})
	}
}

func TestHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := mock.NewStore(nil)
		require.NoError(t, call(ctx, s, "put", "x"))
		release := make(chan struct{})
		var seen []mock.Call
		s.SetHook(func(ctx context.Context, c mock.Call) error {
			seen = append(seen, c)
			if c.Name == "fail" {
				return errBoom
			}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})

		done := make(chan error)
		go func() { done <- call(ctx, s, "get", "x") }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the hook did not hold the call")
		default:
		}
		close(release)
		require.NoError(t, <-done)

		err := call(ctx, s, "get", "fail")
		assert.ErrorIs(t, err, errBoom, "the hook's error fails the call")
		assert.ErrorIs(t, err, secretstore.ErrUnavailable, "an error of no kind is ErrUnavailable")
		assert.Contains(t, err.Error(), `get "fail"`)
		assert.Equal(t, []mock.Call{{Op: "get", Name: "x"}, {Op: "get", Name: "fail"}}, seen)

		s.SetHook(nil)
		assert.ErrorIs(t, call(ctx, s, "get", "fail"), secretstore.ErrNotFound, "hook removed")
	})
}

var errBoom = errors.New("boom")

func TestGetBatch(t *testing.T) {
	ctx := t.Context()
	names := []string{"a", "b", "missing", "a"}
	d := testkit.NewDriver()
	inner, err := secretstore.New(testkit.Batching(d), secretstore.Options{})
	require.NoError(t, err)
	s := mock.NewStore(inner)
	require.NoError(t, call(ctx, s, "put", "a"))
	require.NoError(t, call(ctx, s, "put", "b"))
	s.Reset()
	got, err := s.GetBatch(ctx, names)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "b"}, keys(got))
	assert.EqualValues(t, 1, d.Batches(), "one backend batch")
	assert.Equal(t, 1, s.Count(mock.OpGetBatch))
	assert.Zero(t, s.Count("get"))
	assert.ElementsMatch(t, []string{"a", "b", "missing"}, s.Calls()[0].Names, "each distinct name once")

	s.FailNext(mock.OpGetBatch, 1, secretstore.ErrUnavailable)
	_, err = s.GetBatch(ctx, names)
	assert.ErrorIs(t, err, secretstore.ErrUnavailable)
	assert.EqualValues(t, 1, d.Batches(), "the failed batch did not reach the store")
}

func keys(m map[string]*secretstore.Secret) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestReset(t *testing.T) {
	ctx := t.Context()
	s := mock.NewStore(nil)
	require.NoError(t, call(ctx, s, "put", "a"))
	s.FailNext(mock.AnyOp, 10, secretstore.ErrUnavailable)
	s.SetUnavailable(true)
	s.SetLatency(mock.AnyOp, time.Hour)
	s.SetHook(func(context.Context, mock.Call) error { return errBoom })
	s.Reset()
	assert.Empty(t, s.Calls())
	assert.NoError(t, call(ctx, s, "get", "a"), "faults are gone and the data is kept")
	assert.Equal(t, 1, s.Count(mock.AnyOp))
}

// A credential check is recorded and meets faults like any call: a
// rejection for a few checks, a store switched down, and pass-through to
// the wrapped store's own check (or its absence).
func TestCheckCredentialsFaults(t *testing.T) {
	cases := []struct {
		name  string
		inner *secretstore.Store
		setup func(*mock.Store)
		want  []error // per check, in order; nil entries pass
	}{
		{"passes through to memory", nil, func(*mock.Store) {}, []error{nil, nil}},
		{"rejected twice, then accepted", nil, func(s *mock.Store) {
			s.FailNext("check-credentials", 2, secretstore.ErrPermission)
		}, []error{secretstore.ErrPermission, secretstore.ErrPermission, nil}},
		{"reads are not affected by a check's fault", nil, func(s *mock.Store) {
			s.FailNext("get", 5, secretstore.ErrPermission)
		}, []error{nil}},
		{"store down", nil, func(s *mock.Store) { s.SetUnavailable(true) }, []error{secretstore.ErrUnavailable}},
		{"any-op spell", nil, func(s *mock.Store) {
			s.FailNext(mock.AnyOp, 1, secretstore.ErrPermission)
		}, []error{secretstore.ErrPermission, nil}},
		{"wrapped store without a check", storeWithoutCheck(t), func(*mock.Store) {},
			[]error{errors.ErrUnsupported}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mock.NewStore(c.inner)
			c.setup(s)
			for i, want := range c.want {
				err := s.CheckCredentials(t.Context())
				if want == nil {
					require.NoError(t, err, "check %d", i)
					continue
				}
				require.ErrorIs(t, err, want, "check %d", i)
				if want != errors.ErrUnsupported {
					assert.ErrorIs(t, err, mock.ErrInjected)
				}
			}
			assert.Equal(t, len(c.want), s.Count("check-credentials"), "every check is recorded")
			assert.Equal(t, mock.Call{Op: "check-credentials"}, s.Calls()[0])
		})
	}
}

// storeWithoutCheck returns a store whose driver has no credential check.
func storeWithoutCheck(t *testing.T) *secretstore.Store {
	s, err := secretstore.New(struct{ driver.Store }{testkit.NewDriver()}, secretstore.Options{})
	require.NoError(t, err)
	return s
}
