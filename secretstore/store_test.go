package secretstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

func TestValidateName(t *testing.T) {
	cases := []struct {
		name    string
		problem string // empty: valid
	}{
		{"db", ""},
		{"org/user/alice/db-password", ""},
		{"with space/ünï.cödé@x+y=z", ""},
		{"...", ""},
		{"a.b/.c/d..", ""},
		{strings.Repeat("x", 512), ""},
		{"", "empty"},
		{strings.Repeat("x", 512+1), "longer than 512 bytes"},
		{"bad\xffutf8", "not valid UTF-8"},
		{"nul\x00", "control character"},
		{"del\x7f", "control character"},
		{"c1\u0085", "control character"},
		{`back\slash`, "backslash"},
		{"/abs", "empty path segment"},
		{"trailing/", "empty path segment"},
		{"a//b", "empty path segment"},
		{".", `"." path segment`},
		{"a/./b", `"." path segment`},
		{"..", `".." path segment`},
		{"../up", `".." path segment`},
		{"a/..", `".." path segment`},
	}
	d := testkit.NewDriver()
	s := newStore(t, d)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := secretstore.ValidateName(c.name)
			deleted := s.Delete(t.Context(), c.name)
			if c.problem == "" {
				assert.NoError(t, err)
				assert.NoError(t, deleted)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.problem)
			assert.ErrorIs(t, deleted, edgesecrets.ErrInvalid)
			assert.Contains(t, deleted.Error(), "delete", "the error names the operation")
			assert.Contains(t, deleted.Error(), c.problem)
		})
	}
	assert.Zero(t, d.Calls("delete", strings.Repeat("x", 512+1)), "an invalid name never reaches the driver")
}

func TestListPrefixes(t *testing.T) {
	s := newStore(t, nil)
	cases := []struct {
		prefix string
		ok     bool
	}{
		{"", true}, {"a", true}, {"a/", true}, {"a/b", true}, {"a/b/", true}, {"lis", true},
		{"/", false}, {"a//", false}, {"../", false}, {"a/../", false}, {"/a", false}, {"a\\", false},
	}
	for _, c := range cases {
		_, err := s.List(t.Context(), c.prefix)
		if c.ok {
			assert.NoError(t, err, "prefix %q", c.prefix)
		} else {
			assert.ErrorIs(t, err, edgesecrets.ErrInvalid, "prefix %q", c.prefix)
		}
	}
}

func TestPutChecksTheSecret(t *testing.T) {
	cases := []struct {
		name   string
		secret *secretstore.Secret
		want   string // empty: valid
	}{
		{"valid", &secretstore.Secret{Name: "a", Data: edgesecrets.Data{"k": nil}, Labels: map[string]string{"l": ""}}, ""},
		{"no data", &secretstore.Secret{Name: "a"}, ""},
		{"nil", nil, "secret is nil"},
		{"bad name", &secretstore.Secret{Name: "a/../b"}, `".." path segment`},
		{"empty data key", &secretstore.Secret{Name: "a", Data: edgesecrets.Data{"": []byte("v")}}, "data has an empty key"},
		{"empty label key", &secretstore.Secret{Name: "a", Labels: map[string]string{"": "v"}}, "labels have an empty key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := testkit.NewDriver()
			_, err := newStore(t, d).Put(t.Context(), c.secret, secretstore.PutOptions{})
			if c.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), "put")
			assert.Zero(t, d.Calls("get", "")+d.Calls("put", ""), "nothing reached the driver")
		})
	}
}

// The scope maps names to the driver's names and back: every name the
// driver sees is under it, and List shows only names under it, relative.
func TestScope(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{"", "", false},
		{"/", "", false},
		{"org1", "org1/", false},
		{"/org1/", "org1/", false},
		{"org1/team", "org1/team/", false},
		{"a//b", "", true},
		{"a/../b", "", true},
		{"..", "", true},
		{"x\x00", "", true},
	}
	for _, c := range cases {
		d := testkit.NewDriver()
		s, err := secretstore.New(d, secretstore.Options{Scope: c.in})
		if c.bad {
			require.ErrorIs(t, err, edgesecrets.ErrInvalid, "scope %q", c.in)
			assert.Contains(t, err.Error(), "scope")
			continue
		}
		require.NoError(t, err, "scope %q", c.in)
		put(t, s, "db/pw", "1")
		assert.Equal(t, 1, d.Calls("put", c.want+"db/pw"), "scope %q: the driver's name", c.in)
		got, err := s.Get(t.Context(), "db/pw")
		require.NoError(t, err)
		assert.Equal(t, "db/pw", got.Name)
	}

	d := testkit.NewDriver()
	other := newStore(t, d)
	for _, n := range []string{"org1/db", "org10/db", "org2/x", "org1/a/b"} {
		put(t, other, n, "1")
	}
	s, err := secretstore.New(d, secretstore.Options{Scope: "org1"})
	require.NoError(t, err)
	names, err := s.List(t.Context(), "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a/b", "db"}, names, "names outside the scope (org10 included) are not listed")
}

func TestGetBatch(t *testing.T) {
	ctx := t.Context()
	names := []string{"a", "missing", "b", "a", "missing"}
	for _, batching := range []bool{false, true} {
		d, s := storeOfAB(t, batching)
		gets := d.Calls("get", "")
		got, err := s.GetBatch(ctx, names)
		require.NoError(t, err)
		assert.Equal(t, "1", string(got["a"].Data["v"]))
		assert.Equal(t, "2", string(got["b"].Data["v"]))
		assert.Equal(t, "a", got["a"].Name)
		assert.NotContains(t, got, "missing", "missing names are absent, not an error")
		if batching {
			assert.EqualValues(t, 1, d.Batches(), "a driver.BatchGetter is used")
			assert.Equal(t, gets, d.Calls("get", ""))
		} else {
			assert.Equal(t, 3, d.Calls("get", "")-gets, "one Get per distinct name")
		}

		d.Fail(edgesecrets.ErrPermission, "b")
		_, err = s.GetBatch(ctx, names)
		assert.ErrorIs(t, err, edgesecrets.ErrPermission, "an error other than NotFound aborts the read")
	}
}

// storeOfAB returns a store holding "a" and "b" over a test driver, one
// with the batch reads when batching.
func storeOfAB(t *testing.T, batching bool) (*testkit.Driver, *secretstore.Store) {
	d := testkit.NewDriver()
	var drv driver.Store = d
	if batching {
		drv = testkit.Batching(d)
	}
	s := newStore(t, drv)
	put(t, s, "a", "1")
	put(t, s, "b", "2")
	return d, s
}

// StatBatch reads the metadata of several names in one driver call where
// the driver lists it, counted as one stat; where it does not, it says
// errors.ErrUnsupported with no kind and is not counted.
func TestStatBatch(t *testing.T) {
	ctx := t.Context()
	names := []string{"a", "missing", "b", "a"}
	for _, batching := range []bool{false, true} {
		d, s := storeOfAB(t, batching)
		got, err := s.StatBatch(ctx, names)
		if !batching {
			require.ErrorIs(t, err, errors.ErrUnsupported)
			assert.Nil(t, edgesecrets.KindOf(err), "no error kind: the store was not asked")
			assert.Nil(t, got)
			assert.Zero(t, s.Stats()["stat"].Calls, "not counted as a call")
			assert.Zero(t, d.Calls("stat", ""), "nothing asked of the driver")
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, secretstore.OpStats{Calls: 1}, s.Stats()["stat"], "one batch")
		assert.EqualValues(t, 1, d.Batches(), "a driver.BatchStater is used")
		assert.Equal(t, 0, d.Calls("stat", ""), "no Stat")
		assert.NotContains(t, got, "missing", "missing names are absent, not an error")
		for _, name := range []string{"a", "b"} {
			md, err := s.Stat(ctx, name)
			require.NoError(t, err)
			assert.Equal(t, md, got[name], "what Stat reports of %s", name)
		}

		_, err = s.StatBatch(ctx, []string{"a", "../up"})
		assert.ErrorIs(t, err, edgesecrets.ErrInvalid, "an invalid name fails the batch")
	}
}

// A driver that returns neither a secret nor an error, or an error of no
// kind, does not crash the store or leak its meaning.
func TestOddDriverAnswers(t *testing.T) {
	s := newStore(t, oddDriver{})
	_, err := s.Get(t.Context(), "x")
	require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	_, err = s.Stat(t.Context(), "x")
	require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	err = s.Delete(t.Context(), "x")
	require.ErrorIs(t, err, edgesecrets.ErrUnavailable, "an unclassified error is ErrUnavailable")
	assert.Contains(t, err.Error(), "disk on fire")
	assert.Contains(t, err.Error(), `delete "x"`)
	_, err = s.List(t.Context(), "")
	require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	assert.Contains(t, err.Error(), "the store did not answer in time", "a driver's own deadline is the store's trouble")
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
}

type oddDriver struct{ driver.Store }

func (oddDriver) Get(context.Context, string) (*driver.Secret, error)  { return nil, nil }
func (oddDriver) Stat(context.Context, string) (*driver.Secret, error) { return nil, nil }
func (oddDriver) Delete(context.Context, string) error                 { return errDisk }
func (oddDriver) List(context.Context, string) ([]string, error) {
	return nil, context.DeadlineExceeded
}

var errDisk = errorString("disk on fire")

type errorString string

func (e errorString) Error() string { return string(e) }
