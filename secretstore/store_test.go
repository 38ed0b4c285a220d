package secretstore_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
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
		{strings.Repeat("x", secretstore.MaxNameLength), ""},
		{"", "empty"},
		{strings.Repeat("x", secretstore.MaxNameLength+1), "longer than 512 bytes"},
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
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := secretstore.ValidateName(c.name)
			if c.problem == "" {
				assert.NoError(t, err)
				assert.NoError(t, secretstore.CheckName(secretstore.OpGet, c.name))
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.problem)
			checked := secretstore.CheckName(secretstore.OpDelete, c.name)
			assert.ErrorIs(t, checked, secretstore.ErrInvalid)
			assert.Contains(t, checked.Error(), "delete", "CheckName names the operation")
		})
	}
	for _, n := range storetest.InvalidNames {
		assert.Error(t, secretstore.ValidateName(n), "storetest.InvalidNames entry %q", n)
	}
	for _, n := range storetest.OddNames {
		assert.NoError(t, secretstore.ValidateName(n), "storetest.OddNames entry %q", n)
	}
}

func TestCheckPrefix(t *testing.T) {
	cases := []struct {
		prefix string
		ok     bool
	}{
		{"", true}, {"a", true}, {"a/", true}, {"a/b", true}, {"a/b/", true}, {"lis", true},
		{"/", false}, {"a//", false}, {"../", false}, {"a/../", false}, {"/a", false}, {"a\\", false},
	}
	for _, c := range cases {
		err := secretstore.CheckPrefix(c.prefix)
		if c.ok {
			assert.NoError(t, err, "prefix %q", c.prefix)
		} else {
			assert.ErrorIs(t, err, secretstore.ErrInvalid, "prefix %q", c.prefix)
		}
	}
}

func TestCheckSecret(t *testing.T) {
	cases := []struct {
		name   string
		secret *secretstore.Secret
		want   string // empty: valid
	}{
		{"valid", &secretstore.Secret{Name: "a", Data: secretstore.Data{"k": nil}, Labels: map[string]string{"l": ""}}, ""},
		{"no data", &secretstore.Secret{Name: "a"}, ""},
		{"nil", nil, "secret is nil"},
		{"bad name", &secretstore.Secret{Name: "a/../b"}, `".." path segment`},
		{"empty data key", &secretstore.Secret{Name: "a", Data: secretstore.Data{"": []byte("v")}}, "data has an empty key"},
		{"empty label key", &secretstore.Secret{Name: "a", Labels: map[string]string{"": "v"}}, "labels have an empty key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := secretstore.CheckSecret(c.secret)
			if c.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, secretstore.ErrInvalid)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), "put")
		})
	}
}

func TestScope(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{"", "", false},
		{"/", "", false},
		{"org1", "org1", false},
		{"/org1/", "org1", false},
		{"org1/team", "org1/team", false},
		{"a//b", "", true},
		{"a/../b", "", true},
		{"..", "", true},
		{"x\x00", "", true},
	}
	for _, c := range cases {
		sc, err := secretstore.NewScope(c.in)
		if c.bad {
			assert.Error(t, err, "scope %q", c.in)
			assert.Contains(t, err.Error(), "scope")
			continue
		}
		require.NoError(t, err, "scope %q", c.in)
		assert.Equal(t, secretstore.Scope(c.want), sc, "scope %q", c.in)
	}

	paths := []struct {
		scope, name, path string
	}{
		{"", "db", "db"},
		{"org1", "db", "org1/db"},
		{"org1", "a/b", "org1/a/b"},
	}
	for _, p := range paths {
		sc := secretstore.Scope(p.scope)
		assert.Equal(t, p.path, sc.Path(p.name))
		rel, ok := sc.Rel(p.path)
		assert.True(t, ok)
		assert.Equal(t, p.name, rel, "Rel inverts Path")
	}

	outside := []struct{ scope, path string }{
		{"org1", "org2/db"},
		{"org1", "org10/db"},
		{"org1", "org1"},
		{"org1", "org1/"},
		{"", ""},
	}
	for _, o := range outside {
		_, ok := secretstore.Scope(o.scope).Rel(o.path)
		assert.False(t, ok, "path %q is outside scope %q", o.path, o.scope)
	}
}

func TestGetBatch(t *testing.T) {
	ctx := t.Context()
	names := []string{"a", "missing", "b", "a", "missing"}

	store := mock.NewStore(nil)
	put(t, store, "a", "1")
	put(t, store, "b", "2")
	store.Reset()
	got, err := secretstore.GetBatch(ctx, store.Inner(), names)
	require.NoError(t, err)
	assert.Equal(t, "1", string(got["a"].Data["v"]))
	assert.Equal(t, "2", string(got["b"].Data["v"]))
	assert.NotContains(t, got, "missing", "missing names are absent, not an error")

	// Through the mock, which has GetBatch and passes it on as one Get per
	// distinct name: duplicates are read once.
	got, err = secretstore.GetBatch(ctx, store, names)
	require.NoError(t, err)
	assert.Len(t, got, 2)
	assert.Equal(t, 3, store.Count(secretstore.OpGet))

	store.FailNext(secretstore.OpGet, 1, secretstore.ErrPermission)
	_, err = secretstore.GetBatch(ctx, store, names)
	assert.ErrorIs(t, err, secretstore.ErrPermission, "an error other than NotFound aborts the read")

	bm := testkit.NewBatchStore()
	put(t, bm, "a", "1")
	got, err = secretstore.GetBatch(ctx, bm, names)
	require.NoError(t, err)
	assert.Len(t, got, 1)
	assert.EqualValues(t, 1, bm.Batches(), "a BatchGetter is used")
}
