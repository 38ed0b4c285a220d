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

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

func secret(name, value string) *secretstore.Secret {
	return &secretstore.Secret{Name: name, Data: edgesecrets.Data{"k": []byte(value)}}
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
	inner, err := s.Inner.Get(t.Context(), "a")
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
		{Op: "close"},
	}, s.Calls("", ""))

	for op, want := range map[string]int{
		"get": 4, "put": 1, "stat": 1, "list": 1,
		"delete": 1, "close": 1, "getbatch": 0, "": 9,
	} {
		assert.Len(t, s.Calls(op, ""), want, "Calls(%q)", op)
	}
	assert.Len(t, s.Calls("get", "db/pw"), 3)
	assert.Len(t, s.Calls("get", "missing"), 1)
	assert.Len(t, s.Calls("", "db/pw"), 6)
	assert.Empty(t, s.Calls("stat", "missing"))

	_, err := s.Put(ctx, secret("db/pw", "x"), secretstore.PutOptions{})
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "closed")

	calls := s.Calls("", "")
	calls[0].Name = "changed"
	assert.Equal(t, "db/pw", s.Calls("", "")[0].Name, "Calls returns a copy")
}

func TestFaultsFail(t *testing.T) {
	for _, op := range ops {
		for _, kind := range []error{edgesecrets.ErrNotFound, edgesecrets.ErrPermission, edgesecrets.ErrUnavailable, edgesecrets.ErrConflict, edgesecrets.ErrInvalid} {
			t.Run(op+"/"+kind.Error(), func(t *testing.T) {
				ctx := t.Context()
				// The inner mock records what reaches the wrapped store.
				backend := mock.NewStore(nil)
				_, err := backend.Put(ctx, secret("x", "old"), secretstore.PutOptions{}) // so each Put through s changes it
				require.NoError(t, err)
				s := mock.NewStore(backend.Store)
				s.SetFaults(mock.Faults{Op: op, Fail: kind, Times: 2})
				before := len(backend.Calls(op, ""))

				for i := range 2 {
					err := call(ctx, s, op, "x")
					if op == "delete" && kind == edgesecrets.ErrNotFound { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
						require.NoError(t, err, "deleting a missing secret is no error")
						continue
					}
					require.ErrorIs(t, err, kind, "call %d fails with the injected kind", i)
					assert.ErrorIs(t, err, mock.ErrInjected)
					assert.Equal(t, kind, edgesecrets.KindOf(err))
					assert.Contains(t, err.Error(), op, "error names the operation")
					assert.Contains(t, err.Error(), `"x"`, "error names the secret")
					for _, other := range []string{"get", "stat", "list"} {
						if other != op {
							assert.NoError(t, call(ctx, s, other, "x"), "%s is not affected", other)
						}
					}
				}
				assert.Len(t, backend.Calls(op, ""), before, "failed calls never reached the wrapped store")
				assert.NoError(t, call(ctx, s, op, "x"), "the third call succeeds")
				assert.Len(t, backend.Calls(op, ""), before+1)
				assert.Len(t, s.Calls(op, ""), 3, "failed calls are recorded too")
			})
		}
	}
}

func TestFaultsSelectAndReplace(t *testing.T) {
	ctx := t.Context()
	s := mock.NewStore(nil)
	s.SetFaults(mock.Faults{Fail: edgesecrets.ErrPermission, Times: 2})
	assert.ErrorIs(t, call(ctx, s, "get", "a"), edgesecrets.ErrPermission, "Op \"\" selects every operation")
	assert.ErrorIs(t, call(ctx, s, "list", ""), edgesecrets.ErrPermission, "Op \"\" selects every operation")
	assert.NoError(t, call(ctx, s, "list", ""), "the failures are used up")

	s.SetFaults(mock.Faults{Op: "stat", Fail: edgesecrets.ErrUnavailable, Times: 5})
	s.SetFaults(mock.Faults{Op: "stat", Fail: edgesecrets.ErrConflict, Times: 1})
	assert.ErrorIs(t, call(ctx, s, "stat", "a"), edgesecrets.ErrConflict, "a second SetFaults replaces the first")
	assert.ErrorIs(t, call(ctx, s, "stat", "a"), edgesecrets.ErrNotFound, "the replacement is used up; the real store answers")

	s.SetFaults(mock.Faults{Op: "stat", Fail: edgesecrets.ErrUnavailable})
	for i := range 3 {
		assert.ErrorIs(t, call(ctx, s, "stat", "a"), edgesecrets.ErrUnavailable, "Times 0 fails every call (%d)", i)
	}
	assert.NoError(t, call(ctx, s, "list", ""), "other operations are not selected")
	s.SetFaults(mock.Faults{})
	assert.ErrorIs(t, call(ctx, s, "stat", "a"), edgesecrets.ErrNotFound, "the zero Faults removes them")
	assert.Len(t, s.Calls("", ""), 10, "SetFaults keeps the recorded calls")
}

func TestFaultsFailConcurrent(t *testing.T) {
	s := mock.NewStore(nil)
	s.SetFaults(mock.Faults{Fail: edgesecrets.ErrUnavailable, Times: 50})
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
	assert.Len(t, s.Calls("list", ""), 200)
}

// A store that is down: every call but Close fails until the faults go.
func TestFaultsStoreDown(t *testing.T) {
	ctx := t.Context()
	s := mock.NewStore(nil)
	require.NoError(t, call(ctx, s, "put", "a"))
	s.SetFaults(mock.Faults{Fail: edgesecrets.ErrUnavailable})
	for _, op := range ops {
		err := call(ctx, s, op, "a")
		assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, op)
		assert.ErrorIs(t, err, mock.ErrInjected, op)
	}
	batch, err := s.GetBatch(ctx, []string{"a"})
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "GetBatch")
	assert.Nil(t, batch)
	assert.ErrorIs(t, s.CheckCredentials(ctx), edgesecrets.ErrUnavailable, "CheckCredentials")
	s.SetFaults(mock.Faults{})
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
		{"Op \"\" delays every op", "", 2 * time.Second, "stat", 0, 2 * time.Second, nil},
		{"context ends during latency", "get", time.Minute, "get", time.Second, time.Second, context.DeadlineExceeded},
		{"no latency", "get", 0, "get", 0, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				s := mock.NewStore(nil)
				require.NoError(t, call(ctx, s, "put", "x"))
				if c.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.timeout)
					defer cancel()
				}
				reached := false
				s.SetFaults(mock.Faults{Op: c.setOp, Latency: c.d, Hook: func(context.Context, mock.Call) error { reached = true; return nil }})
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
		s.SetFaults(mock.Faults{Hook: func(ctx context.Context, c mock.Call) error {
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
		}})

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
		assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "an error of no kind is ErrUnavailable")
		assert.Contains(t, err.Error(), `get "fail"`)
		assert.Equal(t, []mock.Call{{Op: "get", Name: "x"}, {Op: "get", Name: "fail"}}, seen)

		s.SetFaults(mock.Faults{})
		assert.ErrorIs(t, call(ctx, s, "get", "fail"), edgesecrets.ErrNotFound, "hook removed")
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
	before := len(s.Calls("", ""))
	got, err := s.GetBatch(ctx, names)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "b"}, keys(got))
	assert.EqualValues(t, 1, d.Batches(), "one backend batch")
	batches := s.Calls("getbatch", "")
	require.Len(t, batches, 1)
	assert.Len(t, s.Calls("", ""), before+1, "one call, no Gets")
	assert.ElementsMatch(t, []string{"a", "b", "missing"}, batches[0].Names, "each distinct name once")
	assert.Equal(t, batches, s.Calls("", "missing"), "a batch matches each of its names")
	assert.Empty(t, s.Calls("getbatch", "c"))

	s.SetFaults(mock.Faults{Op: "getbatch", Fail: edgesecrets.ErrUnavailable, Times: 1})
	_, err = s.GetBatch(ctx, names)
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	assert.EqualValues(t, 1, d.Batches(), "the failed batch did not reach the store")
}

func keys(m map[string]*secretstore.Secret) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The hook runs before Fail, and its error wins; a hook may change the
// faults, and Fail then applies as changed.
func TestFaultsHookBeforeFail(t *testing.T) {
	ctx := t.Context()
	s := mock.NewStore(nil)
	s.SetFaults(mock.Faults{Fail: edgesecrets.ErrPermission, Hook: func(context.Context, mock.Call) error { return errBoom }})
	err := call(ctx, s, "get", "a")
	assert.ErrorIs(t, err, errBoom)
	assert.NotErrorIs(t, err, mock.ErrInjected, "Fail was not reached")

	s.SetFaults(mock.Faults{Fail: edgesecrets.ErrPermission, Hook: func(context.Context, mock.Call) error {
		s.SetFaults(mock.Faults{})
		return nil
	}})
	assert.ErrorIs(t, call(ctx, s, "get", "a"), edgesecrets.ErrNotFound, "the hook removed the fault before Fail")
}

// Versionless hides the version of every read, as a KV v1 store would.
func TestFaultsVersionless(t *testing.T) {
	ctx := t.Context()
	d := testkit.NewDriver()
	inner, err := secretstore.New(testkit.Batching(d), secretstore.Options{})
	require.NoError(t, err)
	s := mock.NewStore(inner)
	require.NoError(t, call(ctx, s, "put", "a"))
	versions := func() []string {
		got, err := s.Get(ctx, "a")
		require.NoError(t, err)
		md, err := s.Stat(ctx, "a")
		require.NoError(t, err)
		batch, err := s.GetBatch(ctx, []string{"a"})
		require.NoError(t, err)
		return []string{got.Version, md.Version, batch["a"].Version}
	}
	for _, v := range versions() {
		require.NotEmpty(t, v, "the wrapped store has versions")
	}
	s.SetFaults(mock.Faults{Versionless: true})
	assert.Equal(t, []string{"", "", ""}, versions(), "Get, Stat and GetBatch report no version")
	s.SetFaults(mock.Faults{})
	for _, v := range versions() {
		assert.NotEmpty(t, v, "versions are back")
	}
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
			s.SetFaults(mock.Faults{Op: "check-credentials", Fail: edgesecrets.ErrPermission, Times: 2})
		}, []error{edgesecrets.ErrPermission, edgesecrets.ErrPermission, nil}},
		{"reads are not affected by a check's fault", nil, func(s *mock.Store) {
			s.SetFaults(mock.Faults{Op: "get", Fail: edgesecrets.ErrPermission, Times: 5})
		}, []error{nil}},
		{"every operation", nil, func(s *mock.Store) {
			s.SetFaults(mock.Faults{Fail: edgesecrets.ErrPermission, Times: 1})
		}, []error{edgesecrets.ErrPermission, nil}},
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
				if want != errors.ErrUnsupported { //nolint:errorlint // compares the table's values, not an error chain
					assert.ErrorIs(t, err, mock.ErrInjected)
				}
			}
			assert.Len(t, s.Calls("check-credentials", ""), len(c.want), "every check is recorded")
			assert.Equal(t, mock.Call{Op: "check-credentials"}, s.Calls("", "")[0])
		})
	}
}

// storeWithoutCheck returns a store whose driver has no credential check.
func storeWithoutCheck(t *testing.T) *secretstore.Store {
	s, err := secretstore.New(struct{ driver.Store }{testkit.NewDriver()}, secretstore.Options{})
	require.NoError(t, err)
	return s
}
