// Package storetest is the conformance suite every secretstore backend runs,
// in the style of Go CDK's drivertest: a backend implements a Harness that
// makes its driver, and Run executes the same cases against it through the
// portable secretstore.Store, which it wraps around the driver with the
// scope "storetest" (a driver sees names as "storetest/<name>"). The memory
// backend runs it always; the Vault and AWS backends run
// it against real endpoints.
//
// Some cases check rules the portable type enforces for every driver
// (names, closed stores, contexts, copies, unchanged writes); the others
// check what only the driver can get right: round trips, versions,
// labels, replacement, deletion, listing across pages, atomic
// compare-and-set under concurrent writers.
//
// A backend's test looks like
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, newHarness, storetest.Options{})
//	}
package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/storewatch"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// scope is the scope Run gives the store it makes around each driver, so
// a driver sees names as "storetest/<name>".
const scope = "storetest"

// Harness gives the suite access to one backend instance.
type Harness interface {
	// MakeDriver returns a driver over an empty namespace of its own (a
	// fresh mount, path or prefix), so cases do not see each other's
	// secrets.
	MakeDriver(ctx context.Context) (driver.Store, error)
	// BackendWrites returns how many write calls (create, update, delete
	// requests) the backend has received from drivers made by this
	// harness. The suite uses it to prove that an unchanged Put writes
	// nothing.
	BackendWrites() int64
	// Close releases the harness.
	Close()
}

// Options declare what a backend cannot do, so the suite checks the
// documented fallback instead. The zero value means full capability.
type Options struct {
	// NoVersions: the backend keeps no versions (Vault KV v1). Version is
	// empty and PutOptions.IfVersion fails with ErrInvalid.
	NoVersions bool
	// NoLabels: the backend cannot store labels; a Put with labels fails
	// with ErrInvalid.
	NoLabels bool
	// CASNotAtomic: IfVersion is checked but racing writers may both win
	// (the backend has no server-side compare-and-set).
	CASNotAtomic bool
	// ListPageSize is the backend's page size for List, so the paging case
	// writes more than two pages. Zero means 10.
	ListPageSize int
}

// Run runs every conformance case as a subtest, each with a Harness of its
// own that newHarness makes.
func Run(t *testing.T, newHarness func(ctx context.Context, t *testing.T) (Harness, error), opts Options) {
	if opts.ListPageSize <= 0 {
		opts.ListPageSize = 10
	}
	cases := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"GetMissing", testGetMissing},
		{"PutGetRoundTrip", testPutGetRoundTrip},
		{"BinaryValues", testBinaryValues},
		{"FullReplace", testFullReplace},
		{"Labels", testLabels},
		{"UnchangedPutIssuesNoWrite", testUnchangedPut},
		{"CompareAndSet", testCompareAndSet},
		{"CreateOnly", testCreateOnly},
		{"DeleteIdempotent", testDeleteIdempotent},
		{"ListPrefixAndPaging", testList},
		{"StatVersionChangesOnUpdate", testStatVersion},
		{"DeepCopies", testDeepCopies},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ConcurrentCompareAndSet", testConcurrentCAS},
		{"InvalidNamesRejected", testInvalidNames},
		{"InvalidSecretsRejected", testInvalidSecrets},
		{"OddNamesRejectedOrRoundTripped", testOddNames},
		{"ContextCancellation", testContextCancel},
		{"ClosedStoreIsUnavailable", testClosed},
		{"GetBatch", testGetBatch},
		{"WatcherSeesChanges", testWatcher},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			h, err := newHarness(ctx, t)
			require.NoError(t, err, "making harness")
			t.Cleanup(h.Close)
			drv, err := h.MakeDriver(ctx)
			require.NoError(t, err, "making driver")
			// No retries: the suite sees every failure.
			st, err := secretstore.New(drv, secretstore.Options{Scope: scope, MaxAttempts: 1})
			require.NoError(t, err, "making store")
			t.Cleanup(func() { _ = st.Close() })
			c.fn(t, &env{ctx: ctx, h: h, s: st, opts: opts})
		})
	}
}

type env struct {
	ctx  context.Context
	h    Harness
	s    *secretstore.Store
	opts Options
}

func (e *env) put(t *testing.T, name string, data edgesecrets.Data, labels map[string]string) bool {
	t.Helper()
	changed, err := e.s.Put(e.ctx, &secretstore.Secret{Name: name, Data: data, Labels: labels}, secretstore.PutOptions{})
	require.NoError(t, err, "put %q", name)
	return changed
}

func (e *env) get(t *testing.T, name string) *secretstore.Secret {
	t.Helper()
	s, err := e.s.Get(e.ctx, name)
	require.NoError(t, err, "get %q", name)
	require.NotNil(t, s)
	return s
}

func (e *env) labels(l map[string]string) map[string]string {
	if e.opts.NoLabels {
		return nil
	}
	return l
}

func d(kv ...string) edgesecrets.Data {
	out := edgesecrets.Data{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = []byte(kv[i+1])
	}
	return out
}

func testGetMissing(t *testing.T, e *env) {
	_, err := e.s.Get(e.ctx, "no/such/secret")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound)
	assert.Contains(t, err.Error(), "no/such/secret", "error names the secret")
	assert.Contains(t, err.Error(), "get", "error names the operation")

	_, err = e.s.Stat(e.ctx, "no/such/secret")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound)
}

func testPutGetRoundTrip(t *testing.T, e *env) {
	data := d("username", "alice", "password", "s3cr3t-value")
	labels := e.labels(map[string]string{"team": "edge", "env": "test"})
	assert.True(t, e.put(t, "app/db", data, labels), "first put reports a change")

	got := e.get(t, "app/db")
	assert.Equal(t, "app/db", got.Name)
	assert.True(t, data.Equal(got.Data), "data round trips")
	assert.True(t, maps.Equal(labels, got.Labels), "labels round trip: got %v", got.Labels)
	if !e.opts.NoVersions {
		assert.NotEmpty(t, got.Version, "version is set")
		assert.False(t, got.UpdatedAt.IsZero(), "updatedAt is set")
	}

	md, err := e.s.Stat(e.ctx, "app/db")
	require.NoError(t, err)
	assert.Equal(t, "app/db", md.Name)
	assert.Equal(t, got.Version, md.Version, "Stat and Get agree on the version")
	assert.True(t, maps.Equal(labels, md.Labels), "Stat returns labels")
}

func testBinaryValues(t *testing.T, e *env) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	data := edgesecrets.Data{
		"all-bytes": all,
		"nul":       {0, 0, 0},
		"not-utf8":  {0xff, 0xfe, 0xc3, 0x28},
		"empty":     {},
		"text":      []byte("plain text ünïcode"),
	}
	e.put(t, "binary", data, nil)
	got := e.get(t, "binary")
	assert.Equal(t, data.Keys(), got.Data.Keys())
	for _, k := range data.Keys() {
		assert.Equal(t, []byte(data[k]), append([]byte{}, got.Data[k]...), "value of key %q", k)
	}
}

func testFullReplace(t *testing.T, e *env) {
	e.put(t, "replace", d("a", "1", "b", "2"), nil)
	assert.True(t, e.put(t, "replace", d("a", "1"), nil), "dropping a key is a change")
	got := e.get(t, "replace")
	assert.Equal(t, []string{"a"}, got.Data.Keys(), "put replaces the whole secret")
}

func testLabels(t *testing.T, e *env) {
	if e.opts.NoLabels {
		_, err := e.s.Put(e.ctx, &secretstore.Secret{Name: "labels", Data: d("k", "v"), Labels: map[string]string{"a": "b"}}, secretstore.PutOptions{})
		require.ErrorIs(t, err, edgesecrets.ErrInvalid, "a backend without labels rejects them")
		return
	}
	e.put(t, "labels", d("k", "v"), map[string]string{"owner": "ops", "rotation": "30d"})
	assert.True(t, e.put(t, "labels", d("k", "v"), map[string]string{"owner": "sec"}), "a label change alone is a change")
	md, err := e.s.Stat(e.ctx, "labels")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"owner": "sec"}, md.Labels)

	assert.True(t, e.put(t, "labels", d("k", "v"), nil), "removing all labels is a change")
	got := e.get(t, "labels")
	assert.Empty(t, got.Labels, "labels were removed")
	assert.Equal(t, []byte("v"), []byte(got.Data["k"]), "data survives label changes")
}

func testUnchangedPut(t *testing.T, e *env) {
	labels := e.labels(map[string]string{"x": "y"})
	e.put(t, "same", d("k1", "v1", "k2", "v2"), labels)
	before := e.get(t, "same")
	writes := e.h.BackendWrites()
	assert.False(t, e.put(t, "same", d("k2", "v2", "k1", "v1"), labels), "identical put reports no change")
	assert.Equal(t, writes, e.h.BackendWrites(), "identical put issued no backend write")
	after := e.get(t, "same")
	assert.Equal(t, before.Version, after.Version, "version unchanged")

	assert.True(t, e.put(t, "same", d("k1", "v1", "k2", "v3"), labels), "changed value is a change")
	assert.Greater(t, e.h.BackendWrites(), writes, "changed put wrote")
}

func testCompareAndSet(t *testing.T, e *env) {
	e.put(t, "cas", d("v", "1"), nil)
	cur := e.get(t, "cas")
	if e.opts.NoVersions {
		_, err := e.s.Put(e.ctx, &secretstore.Secret{Name: "cas", Data: d("v", "2")}, secretstore.PutOptions{IfVersion: "1"})
		require.ErrorIs(t, err, edgesecrets.ErrInvalid, "IfVersion without versions is invalid")
		return
	}
	changed, err := e.s.Put(e.ctx, &secretstore.Secret{Name: "cas", Data: d("v", "2")}, secretstore.PutOptions{IfVersion: cur.Version})
	require.NoError(t, err, "CAS on the current version")
	assert.True(t, changed)

	_, err = e.s.Put(e.ctx, &secretstore.Secret{Name: "cas", Data: d("v", "3")}, secretstore.PutOptions{IfVersion: cur.Version})
	require.ErrorIs(t, err, edgesecrets.ErrConflict, "CAS on a stale version")
	assert.Contains(t, err.Error(), "cas")
	assert.Equal(t, []byte("2"), []byte(e.get(t, "cas").Data["v"]), "losing CAS wrote nothing")

	_, err = e.s.Put(e.ctx, &secretstore.Secret{Name: "cas-missing", Data: d("v", "1")}, secretstore.PutOptions{IfVersion: cur.Version})
	require.ErrorIs(t, err, edgesecrets.ErrConflict, "CAS on a missing secret")
}

func testCreateOnly(t *testing.T, e *env) {
	changed, err := e.s.Put(e.ctx, &secretstore.Secret{Name: "create", Data: d("v", "1")}, secretstore.PutOptions{CreateOnly: true})
	require.NoError(t, err, "create-only of a new secret")
	assert.True(t, changed)
	_, err = e.s.Put(e.ctx, &secretstore.Secret{Name: "create", Data: d("v", "2")}, secretstore.PutOptions{CreateOnly: true})
	require.ErrorIs(t, err, edgesecrets.ErrConflict, "create-only of an existing secret")
	assert.Equal(t, []byte("1"), []byte(e.get(t, "create").Data["v"]))
}

func testDeleteIdempotent(t *testing.T, e *env) {
	require.NoError(t, e.s.Delete(e.ctx, "never/existed"), "deleting a missing secret")
	e.put(t, "gone", d("k", "v"), nil)
	require.NoError(t, e.s.Delete(e.ctx, "gone"))
	_, err := e.s.Get(e.ctx, "gone")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "deleted secret is not found")
	_, err = e.s.Stat(e.ctx, "gone")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "deleted secret has no metadata")
	require.NoError(t, e.s.Delete(e.ctx, "gone"), "deleting twice")
	names, err := e.s.List(e.ctx, "")
	require.NoError(t, err)
	assert.NotContains(t, names, "gone")

	e.put(t, "gone", d("k", "again"), nil)
	assert.Equal(t, []byte("again"), []byte(e.get(t, "gone").Data["k"]), "a deleted name can be written again")
}

func testList(t *testing.T, e *env) {
	n := 2*e.opts.ListPageSize + 3
	var want []string
	for i := range n {
		name := fmt.Sprintf("list/a/s%03d", i)
		want = append(want, name)
		e.put(t, name, d("i", fmt.Sprint(i)), nil)
	}
	e.put(t, "list/a/deep/er", d("k", "v"), nil)
	want = append(want, "list/a/deep/er")
	e.put(t, "list/b/other", d("k", "v"), nil)
	e.put(t, "listing", d("k", "v"), nil)
	slices.Sort(want)

	got, err := e.s.List(e.ctx, "list/a/")
	require.NoError(t, err)
	assert.Equal(t, want, got, "List returns every name under the prefix, sorted, across pages")

	all, err := e.s.List(e.ctx, "")
	require.NoError(t, err)
	assert.Len(t, all, len(want)+2, "empty prefix lists everything")
	assert.True(t, slices.IsSorted(all), "List is sorted")

	var wantPart []string
	for _, name := range want {
		if strings.HasPrefix(name, "list/a/s00") {
			wantPart = append(wantPart, name)
		}
	}
	part, err := e.s.List(e.ctx, "list/a/s00")
	require.NoError(t, err)
	assert.Equal(t, wantPart, part, "a prefix may end inside a path segment")

	withSibling, err := e.s.List(e.ctx, "list")
	require.NoError(t, err)
	assert.Equal(t, all, withSibling, "prefix \"list\" also matches \"listing\"")

	none, err := e.s.List(e.ctx, "nothing/here/")
	require.NoError(t, err, "listing an empty prefix is not an error")
	assert.Empty(t, none)

	_, err = e.s.List(e.ctx, "../")
	require.ErrorIs(t, err, edgesecrets.ErrInvalid, "a prefix escaping the scope is rejected")
}

func testStatVersion(t *testing.T, e *env) {
	e.put(t, "ver", d("k", "1"), nil)
	md1, err := e.s.Stat(e.ctx, "ver")
	require.NoError(t, err)
	e.put(t, "ver", d("k", "2"), nil)
	md2, err := e.s.Stat(e.ctx, "ver")
	require.NoError(t, err)
	if e.opts.NoVersions {
		assert.Empty(t, md2.Version, "unversioned backend reports no version")
		return
	}
	assert.NotEqual(t, md1.Version, md2.Version, "an update changes the version")
	assert.False(t, md2.UpdatedAt.Before(md1.UpdatedAt), "updatedAt does not go back")
	assert.Equal(t, md2.Version, e.get(t, "ver").Version)
}

func testDeepCopies(t *testing.T, e *env) {
	in := &secretstore.Secret{Name: "copy", Data: d("k", "original"), Labels: e.labels(map[string]string{"l": "1"})}
	_, err := e.s.Put(e.ctx, in, secretstore.PutOptions{})
	require.NoError(t, err)
	in.Data["k"][0] = 'X'
	in.Data["new"] = []byte("x")
	if in.Labels != nil {
		in.Labels["l"] = "changed"
	}
	got := e.get(t, "copy")
	assert.Equal(t, []byte("original"), []byte(got.Data["k"]), "store is unaffected by changes to the Put argument")
	assert.Equal(t, []string{"k"}, got.Data.Keys())
	got.Data["k"][0] = 'Y'
	got.Data["added"] = []byte("y")
	if got.Labels != nil {
		got.Labels["l"] = "from-get"
	}
	again := e.get(t, "copy")
	assert.Equal(t, []byte("original"), []byte(again.Data["k"]), "store is unaffected by changes to a Get result")
	assert.Equal(t, []string{"k"}, again.Data.Keys())
	assert.Equal(t, e.labels(map[string]string{"l": "1"}), nilIfEmpty(again.Labels), "labels are unaffected by changes to the Put argument or a Get result")

	md, err := e.s.Stat(e.ctx, "copy")
	require.NoError(t, err)
	if md.Labels != nil {
		md.Labels["l"] = "from-stat"
	}
	md, err = e.s.Stat(e.ctx, "copy")
	require.NoError(t, err)
	assert.Equal(t, e.labels(map[string]string{"l": "1"}), nilIfEmpty(md.Labels), "labels are unaffected by changes to a Stat result")
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func testConcurrentWriters(t *testing.T, e *env) {
	const writers, rounds = 6, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds*2)
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				own := fmt.Sprintf("conc/w%d", w)
				if _, err := e.s.Put(e.ctx, &secretstore.Secret{Name: own, Data: d("r", fmt.Sprint(r))}, secretstore.PutOptions{}); err != nil {
					errs <- err
				}
				pair := fmt.Sprintf("%d/%d", w, r)
				if _, err := e.s.Put(e.ctx, &secretstore.Secret{Name: "conc/shared", Data: d("w", fmt.Sprint(w), "r", fmt.Sprint(r), "pair", pair)}, secretstore.PutOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "concurrent put")
	}
	for w := range writers {
		got := e.get(t, fmt.Sprintf("conc/w%d", w))
		assert.Equal(t, fmt.Sprint(rounds-1), string(got.Data["r"]), "writer %d's last write won", w)
	}
	shared := e.get(t, "conc/shared")
	assert.Len(t, shared.Data, 3, "shared secret holds one whole write")
	assert.Equal(t, string(shared.Data["w"])+"/"+string(shared.Data["r"]), string(shared.Data["pair"]), "shared secret holds one whole write, not a mix of writes")
}

func testConcurrentCAS(t *testing.T, e *env) {
	if e.opts.NoVersions || e.opts.CASNotAtomic {
		t.Skip("backend declares no atomic compare-and-set")
	}
	e.put(t, "race", d("v", "start"), nil)
	base := e.get(t, "race").Version
	const racers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := range racers {
		wg.Go(func() {
			_, err := e.s.Put(e.ctx, &secretstore.Secret{Name: "race", Data: d("v", fmt.Sprint(i))}, secretstore.PutOptions{IfVersion: base})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, edgesecrets.ErrConflict):
				conflicts++
			default:
				t.Errorf("racer %d: unexpected error %v", i, err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, wins, "exactly one compare-and-set wins")
	assert.Equal(t, racers-1, conflicts)
}

// invalidNames must be rejected by every backend with ErrInvalid.
var invalidNames = []string{"", "/abs", "trailing/", "a//b", "..", "../up", "a/../b", "./a", "a/.", "nul\x00byte", "back\\slash", "tab\tname", strings.Repeat("x", 512+1)}

// oddNames are valid names that a backend either stores and returns exactly
// or rejects with ErrInvalid.
var oddNames = []string{"with space", "ünïcödé", "a@b+c=d", "dash-under_dot.", "UPPER/lower", "x:y", "pct%2Fenc", "q?x", "h#x", "a.b/c.d", "-lead", "~tilde"}

func testInvalidNames(t *testing.T, e *env) {
	for _, name := range invalidNames {
		_, err := e.s.Get(e.ctx, name)
		assert.ErrorIs(t, err, edgesecrets.ErrInvalid, "Get(%q)", name)
		_, err = e.s.Stat(e.ctx, name)
		assert.ErrorIs(t, err, edgesecrets.ErrInvalid, "Stat(%q)", name)
		_, err = e.s.Put(e.ctx, &secretstore.Secret{Name: name, Data: d("k", "v")}, secretstore.PutOptions{})
		assert.ErrorIs(t, err, edgesecrets.ErrInvalid, "Put(%q)", name)
		assert.ErrorIs(t, e.s.Delete(e.ctx, name), edgesecrets.ErrInvalid, "Delete(%q)", name)
	}
	all, err := e.s.List(e.ctx, "")
	require.NoError(t, err)
	assert.Empty(t, all, "nothing was written by rejected puts")
}

func testInvalidSecrets(t *testing.T, e *env) {
	bad := map[string]*secretstore.Secret{
		"nil secret":      nil,
		"empty data key":  {Name: "bad/data", Data: edgesecrets.Data{"": []byte("v"), "k": []byte("v")}},
		"empty label key": {Name: "bad/labels", Data: d("k", "v"), Labels: map[string]string{"": "v"}},
	}
	for what, s := range bad {
		changed, err := e.s.Put(e.ctx, s, secretstore.PutOptions{})
		assert.ErrorIs(t, err, edgesecrets.ErrInvalid, what)
		assert.False(t, changed, what)
	}
	all, err := e.s.List(e.ctx, "")
	require.NoError(t, err)
	assert.Empty(t, all, "nothing was written by rejected puts")
}

func testOddNames(t *testing.T, e *env) {
	for _, name := range oddNames {
		_, err := e.s.Put(e.ctx, &secretstore.Secret{Name: name, Data: d("k", name)}, secretstore.PutOptions{})
		if errors.Is(err, edgesecrets.ErrInvalid) {
			continue
		}
		require.NoError(t, err, "Put(%q) either succeeds or is ErrInvalid", name)
		got, err := e.s.Get(e.ctx, name)
		require.NoError(t, err, "Get(%q) after a successful Put", name)
		assert.Equal(t, name, got.Name)
		assert.Equal(t, name, string(got.Data["k"]), "value of %q", name)
		names, err := e.s.List(e.ctx, "")
		require.NoError(t, err)
		assert.Contains(t, names, name, "List shows %q", name)
	}
}

func testContextCancel(t *testing.T, e *env) {
	e.put(t, "ctx", d("k", "v"), nil)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err := e.s.Get(ctx, "ctx")
	assert.ErrorIs(t, err, context.Canceled, "Get")
	_, err = e.s.Stat(ctx, "ctx")
	assert.ErrorIs(t, err, context.Canceled, "Stat")
	_, err = e.s.Put(ctx, &secretstore.Secret{Name: "ctx", Data: d("k", "w")}, secretstore.PutOptions{})
	assert.ErrorIs(t, err, context.Canceled, "Put")
	assert.ErrorIs(t, e.s.Delete(ctx, "ctx"), context.Canceled, "Delete")
	_, err = e.s.List(ctx, "")
	assert.ErrorIs(t, err, context.Canceled, "List")
	assert.Equal(t, []byte("v"), []byte(e.get(t, "ctx").Data["k"]), "cancelled calls changed nothing")
}

func testClosed(t *testing.T, e *env) {
	e.put(t, "closed", d("k", "v"), nil)
	require.NoError(t, e.s.Close())
	require.NoError(t, e.s.Close(), "Close is idempotent")
	_, err := e.s.Get(e.ctx, "closed")
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "Get")
	_, err = e.s.Stat(e.ctx, "closed")
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "Stat")
	_, err = e.s.Put(e.ctx, &secretstore.Secret{Name: "closed", Data: d("k", "w")}, secretstore.PutOptions{})
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "Put")
	assert.ErrorIs(t, e.s.Delete(e.ctx, "closed"), edgesecrets.ErrUnavailable, "Delete")
	_, err = e.s.List(e.ctx, "")
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "List")
	_, err = e.s.GetBatch(e.ctx, []string{"closed"})
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "GetBatch")
}

func testGetBatch(t *testing.T, e *env) {
	labels := e.labels(map[string]string{"l": "1"})
	e.put(t, "batch/a", d("k", "a"), labels)
	e.put(t, "batch/b", d("k", "b"), nil)
	got, err := e.s.GetBatch(e.ctx, []string{"batch/a", "batch/missing", "batch/b", "batch/a"})
	require.NoError(t, err)
	assert.Equal(t, []string{"batch/a", "batch/b"}, slices.Sorted(maps.Keys(got)), "present names only, once each")
	for _, name := range []string{"batch/a", "batch/b"} {
		want := e.get(t, name)
		require.NotNil(t, got[name], name)
		assert.Equal(t, name, got[name].Name)
		assert.True(t, want.Data.Equal(got[name].Data), "data of %s", name)
		assert.True(t, maps.Equal(want.Labels, got[name].Labels), "labels of %s", name)
		assert.Equal(t, want.Version, got[name].Version, "version of %s", name)
	}
	empty, err := e.s.GetBatch(e.ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, empty)
	_, err = e.s.GetBatch(e.ctx, []string{"batch/a", "../up"})
	assert.ErrorIs(t, err, edgesecrets.ErrInvalid, "an invalid name fails the batch")
}

// testWatcher checks what the watcher reads of the driver (a batch of
// metadata, when the driver lists it): every name's state in the first
// cycle, and a change in the next.
func testWatcher(t *testing.T, e *env) {
	const n = 25
	var names []string
	for i := range n {
		name := fmt.Sprintf("watch/s%02d", i)
		names = append(names, name)
		e.put(t, name, d("v", "1"), nil)
	}
	w, err := storewatch.New(e.s, storewatch.Options{OutageAfter: -1})
	require.NoError(t, err)
	require.NoError(t, w.Watch(append(names, "watch/missing")...))
	first := w.Poll(e.ctx)
	require.NoError(t, first.StoreFailure())
	assert.Equal(t, n+1, first.Watched)
	assert.Equal(t, n+1, first.Answered)
	kinds := map[string]storewatch.EventKind{}
	for _, ev := range first.Events {
		kinds[ev.Name] = ev.Kind
		assert.True(t, ev.Initial, "first observation of %s", ev.Name)
	}
	for _, name := range names {
		assert.Equal(t, storewatch.Appeared, kinds[name], name)
	}
	assert.Equal(t, storewatch.Deleted, kinds["watch/missing"])

	// Names the watcher's few per-cycle spot checks (taken from the start
	// of the sorted names) do not reach yet: the listing must show them.
	e.put(t, names[20], d("v", "2"), nil)
	require.NoError(t, e.s.Delete(e.ctx, names[21]))
	second := w.Poll(e.ctx)
	var got []string
	for _, ev := range second.Events {
		got = append(got, ev.Kind.String()+" "+ev.Name)
	}
	assert.Equal(t, []string{"changed " + names[20], "deleted " + names[21]}, got, "the second cycle sees the change and the deletion")
	if !e.opts.NoVersions {
		md, err := e.s.Stat(e.ctx, names[20])
		require.NoError(t, err)
		tag, ok := w.Observed(names[20])
		require.True(t, ok)
		assert.Equal(t, "version:"+md.Version, tag.Encode(), "the watcher observed the version Stat reports")
	}
}
