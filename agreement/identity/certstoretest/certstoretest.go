// Package certstoretest is the conformance suite every identity.CertStore
// runs, in the style of delivery/state/statetest: an implementation provides a
// Harness, and Run executes the same cases against it.
// identity.NewMemoryCertStore runs it as it is, the embedded state file
// (delivery/boltstate) with reopens, and the PostgreSQL state
// (delivery/pgstate) also with a second store over the same database, as
// two agbots sharing it.
//
// A CertStore's test looks like
//
//	func TestCertStoreConformance(t *testing.T) {
//		certstoretest.Run(t, newHarness, certstoretest.Options{Durable: true})
//	}
//
// Times are compared to the microsecond (PostgreSQL's precision) and in
// UTC: a store need not keep a time's location or monotonic reading. The
// cases give every time explicitly (NonceUse.Now included), never the
// clock.
package certstoretest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// Harness gives the suite one CertStore implementation.
type Harness interface {
	// MakeStore returns a new CertStore over empty storage of its own (a
	// fresh file, a fresh database or schema), so cases do not see each
	// other's records.
	MakeStore(ctx context.Context) (identity.CertStore, error)
	// Close releases the harness, the stores it made and their storage.
	Close()
}

// DurableHarness is the Harness of a store that keeps its content across
// a restart: Options.Durable requires it.
type DurableHarness interface {
	Harness
	// Reopen closes cs, a store made by MakeStore or Reopen, and opens a
	// new store over the same storage, as an agbot restarting would.
	Reopen(ctx context.Context, cs identity.CertStore) (identity.CertStore, error)
	// CloseStore closes cs (the state it is kept in); its later calls
	// must fail with edgesecrets.ErrUnavailable.
	CloseStore(cs identity.CertStore) error
}

// SharedHarness is the Harness of a store that several agbots share:
// Options.Shared requires it.
type SharedHarness interface {
	Harness
	// OpenAnother opens another store over the storage of cs, as another
	// agbot sharing it would (its own connections).
	OpenAnother(ctx context.Context, cs identity.CertStore) (identity.CertStore, error)
}

// HarnessMaker makes a Harness for one test case.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// Options declare what the store under test is, so the suite runs the
// cases that apply. The zero value is a store for one process that keeps
// nothing across a restart (identity.NewMemoryCertStore).
type Options struct {
	// Durable: the store keeps records and nonces across a restart
	// (DurableHarness).
	Durable bool
	// Shared: several agbots share the store (SharedHarness): what one
	// stores, the others see, and compare-and-set and single use hold
	// across them.
	Shared bool
	// Writers is the number of goroutines of the concurrency cases; zero
	// means 8.
	Writers int
}

// Run runs every conformance case that applies as a subtest.
func Run(t *testing.T, newHarness HarnessMaker, opts Options) {
	if opts.Writers <= 0 {
		opts.Writers = 8
	}
	cases := []struct {
		name string
		fn   func(*testing.T, *env)
		when bool
	}{
		{"GetMissing", testGetMissing, true},
		{"PutCompareAndSet", testPutCompareAndSet, true},
		{"RecordRoundTrip", testRecordRoundTrip, true},
		{"TombstoneKept", testTombstone, true},
		{"InstancesAreDistinctKeys", testDistinctKeys, true},
		{"ConcurrentPutsOneWins", testConcurrentPuts, true},
		{"NonceSingleUse", testNonceSingleUse, true},
		{"ExpiredNonceForgotten", testNonceExpiry, true},
		{"ConcurrentNonceUsesOneWins", testConcurrentNonce, true},
		{"ContextCancellation", testContextCancel, true},
		{"ReopenKeepsRecordsAndNonces", testReopen, opts.Durable},
		{"ClosedStoreUnavailable", testClosed, opts.Durable},
		{"SharedRecords", testSharedRecords, opts.Shared},
		{"SharedNonceSingleUse", testSharedNonce, opts.Shared},
		{"SharedConcurrentNonceUsesOneWins", testSharedConcurrentNonce, opts.Shared},
		{"SharedConcurrentPutsOneWins", testSharedConcurrentPuts, opts.Shared},
	}
	for _, c := range cases {
		if !c.when {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			h, err := newHarness(ctx, t)
			require.NoError(t, err, "making the harness")
			t.Cleanup(h.Close)
			cs, err := h.MakeStore(ctx)
			require.NoError(t, err, "making the store")
			c.fn(t, &env{h: h, cs: cs, opts: opts})
		})
	}
}

// env is one case's harness, store and options.
type env struct {
	h    Harness
	cs   identity.CertStore
	opts Options
}

func (e *env) durable() DurableHarness { return e.h.(DurableHarness) }

// another opens a second store over the case's storage.
func (e *env) another(t *testing.T) identity.CertStore {
	t.Helper()
	cs, err := e.h.(SharedHarness).OpenAnother(t.Context(), e.cs)
	require.NoError(t, err, "opening another store over the same storage")
	return cs
}

// t0 is the suite's base time: UTC, microsecond precision.
var t0 = time.Date(2031, time.January, 2, 3, 4, 5, 678_901_000, time.UTC)

// instance is the suite's instance; other is a second one.
var (
	instance = identity.Identity{Provider: "openhorizon.factory1", Org: "org", Node: "node-1", InstanceID: "i-0123"}
	other    = identity.Identity{Provider: "openhorizon.factory1", Org: "org", Node: "node-2", InstanceID: "i-other"}
)

// newRecord returns a record of id not yet stored, with every field set
// but the revocation.
func newRecord(id identity.Identity) identity.Record {
	return identity.Record{
		Instance: id, CurrentSerial: "0a1b2c", PreviousSerial: "",
		NotAfter: t0.Add(90 * 24 * time.Hour), UpdatedAt: t0,
	}
}

// equalRecords asserts a and b are equal, times to the microsecond in UTC.
func equalRecords(t *testing.T, want, got identity.Record, msgAndArgs ...any) {
	t.Helper()
	norm := func(r identity.Record) identity.Record {
		for _, tm := range []*time.Time{&r.NotAfter, &r.RevokedAt, &r.UpdatedAt} {
			if !tm.IsZero() {
				*tm = tm.Truncate(time.Microsecond).UTC()
			}
		}
		return r
	}
	assert.Equal(t, norm(want), norm(got), msgAndArgs...)
}

// get reads id's record through cs.
func get(t *testing.T, cs identity.CertStore, id identity.Identity) identity.Record {
	t.Helper()
	rec, err := cs.Get(t.Context(), id.Provider, id.InstanceID)
	require.NoError(t, err, "reading the record of %s", id)
	return rec
}

// use records nonce as used for id at now, within a five-minute window.
func use(ctx context.Context, cs identity.CertStore, id identity.Identity, nonce string, now time.Time) error {
	return cs.UseNonce(ctx, identity.NonceUse{Provider: id.Provider, InstanceID: id.InstanceID,
		Nonce: []byte(nonce), Expires: now.Add(5 * time.Minute), Now: now})
}

// nonce returns a nonce of 16 bytes or more, distinct for each name.
func nonce(name string) string { return fmt.Sprintf("nonce-%-16s", name) }

func testGetMissing(t *testing.T, e *env) {
	_, err := e.cs.Get(t.Context(), instance.Provider, instance.InstanceID)
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "no record yet")
	var ie *identity.Error
	require.ErrorAs(t, err, &ie, "an identity.Error")
	assert.Equal(t, instance.InstanceID, ie.Instance.InstanceID, "it names the instance")
}

func testPutCompareAndSet(t *testing.T, e *env) {
	ctx := t.Context()
	rec, err := e.cs.Put(ctx, newRecord(instance))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), rec.Revision, "revision 0 creates; the stored record has revision 1")

	_, err = e.cs.Put(ctx, identity.Record{Instance: instance, CurrentSerial: "ff"})
	require.ErrorIs(t, err, edgesecrets.ErrConflict, "revision 0 means create; the record exists")
	_, err = e.cs.Put(ctx, identity.Record{Instance: other, CurrentSerial: "ff", Revision: 3})
	require.ErrorIs(t, err, edgesecrets.ErrConflict, "a revision other than 0 of a record not stored")

	rec.CurrentSerial, rec.PreviousSerial = "0b", rec.CurrentSerial
	rec2, err := e.cs.Put(ctx, rec)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), rec2.Revision)
	_, err = e.cs.Put(ctx, rec)
	require.ErrorIs(t, err, edgesecrets.ErrConflict, "a stale revision loses")

	equalRecords(t, rec2, get(t, e.cs, instance), "the winner is stored")
	_, err = e.cs.Get(ctx, other.Provider, other.InstanceID)
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "a lost Put stores nothing")
}

func testRecordRoundTrip(t *testing.T, e *env) {
	rec := newRecord(instance)
	rec.PreviousSerial = "09"
	rec.NotAfter = time.Date(2031, 4, 5, 6, 7, 8, 123_456_000, time.FixedZone("X", 3600))
	stored, err := e.cs.Put(t.Context(), rec)
	require.NoError(t, err)
	rec.Revision = 1
	equalRecords(t, rec, stored, "Put returns the record with its new revision")
	equalRecords(t, rec, get(t, e.cs, instance), "every field comes back")
}

func testTombstone(t *testing.T, e *env) {
	ctx := t.Context()
	rec, err := e.cs.Put(ctx, newRecord(instance))
	require.NoError(t, err)
	rec.Revoked, rec.RevokedAt, rec.UpdatedAt = true, t0.Add(time.Hour), t0.Add(time.Hour)
	tomb, err := e.cs.Put(ctx, rec)
	require.NoError(t, err)
	got := get(t, e.cs, instance)
	equalRecords(t, tomb, got, "a tombstone is kept")
	assert.True(t, got.Revoked)
}

func testDistinctKeys(t *testing.T, e *env) {
	ctx := t.Context()
	a := identity.Identity{Provider: "ab", Org: "org", Node: "n1", InstanceID: "c"}
	b := identity.Identity{Provider: "a", Org: "org", Node: "n2", InstanceID: "bc"}
	_, err := e.cs.Put(ctx, newRecord(a))
	require.NoError(t, err)
	_, err = e.cs.Put(ctx, newRecord(b))
	require.NoError(t, err, "instances whose provider and id concatenate alike are different keys")
	assert.Equal(t, "n1", get(t, e.cs, a).Instance.Node)
	assert.Equal(t, "n2", get(t, e.cs, b).Instance.Node)

	require.NoError(t, use(ctx, e.cs, a, nonce("shared"), t0))
	assert.NoError(t, use(ctx, e.cs, b, nonce("shared"), t0), "their nonces are apart too")
}

// oneWins runs fn on n goroutines at once and asserts exactly one
// succeeds and the others fail with kind.
func oneWins(t *testing.T, n int, kind error, fn func(i int) error) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		assert.ErrorIs(t, err, kind)
	}
	assert.Equal(t, 1, wins, "exactly one wins")
}

func testConcurrentPuts(t *testing.T, e *env) {
	base, err := e.cs.Put(t.Context(), newRecord(instance))
	require.NoError(t, err)
	oneWins(t, e.opts.Writers, edgesecrets.ErrConflict, func(i int) error {
		r := base
		r.CurrentSerial = fmt.Sprintf("%02x", i+16)
		_, err := e.cs.Put(t.Context(), r)
		return err
	})
	assert.Equal(t, uint64(2), get(t, e.cs, instance).Revision)
}

func testNonceSingleUse(t *testing.T, e *env) {
	ctx := t.Context()
	require.NoError(t, use(ctx, e.cs, instance, nonce("a"), t0))
	err := use(ctx, e.cs, instance, nonce("a"), t0.Add(time.Minute))
	assert.ErrorIs(t, err, identity.ErrReplayed, "a nonce is single-use")
	var ie *identity.Error
	if assert.ErrorAs(t, err, &ie) {
		assert.Equal(t, instance.InstanceID, ie.Instance.InstanceID, "the error names the instance")
	}
	assert.NotContains(t, err.Error(), nonce("a"), "the error does not quote the nonce")
	assert.NoError(t, use(ctx, e.cs, other, nonce("a"), t0), "nonces are per instance")
	assert.NoError(t, use(ctx, e.cs, instance, nonce("b"), t0), "another nonce of the same instance")
	assert.ErrorIs(t, use(ctx, e.cs, instance, nonce("b"), t0.Add(4*time.Minute)), identity.ErrReplayed,
		"within its window a nonce stays used")
}

// testNonceExpiry: past its expiry (and any allowance for the clocks of
// agbots sharing a store, well within 5 minutes) a nonce is forgotten, as
// later uses go: the Issuer refuses a proof that old anyway, and the store
// does not grow without bound.
func testNonceExpiry(t *testing.T, e *env) {
	ctx := t.Context()
	require.NoError(t, use(ctx, e.cs, instance, nonce("old"), t0))
	later := t0.Add(15 * time.Minute)
	require.NoError(t, use(ctx, e.cs, instance, nonce("later"), later))
	assert.NoError(t, use(ctx, e.cs, instance, nonce("old"), later), "an expired nonce is forgotten")
	assert.ErrorIs(t, use(ctx, e.cs, instance, nonce("old"), later), identity.ErrReplayed, "and single-use again")
}

func testConcurrentNonce(t *testing.T, e *env) {
	oneWins(t, e.opts.Writers, identity.ErrReplayed, func(int) error {
		return use(t.Context(), e.cs, instance, nonce("raced"), t0)
	})
}

func testContextCancel(t *testing.T, e *env) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := e.cs.Get(ctx, instance.Provider, instance.InstanceID)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = e.cs.Put(ctx, newRecord(instance))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, use(ctx, e.cs, instance, nonce("a"), t0), context.Canceled)
	_, err = e.cs.Get(t.Context(), instance.Provider, instance.InstanceID)
	assert.ErrorIs(t, err, edgesecrets.ErrNotFound, "a canceled Put stored nothing")
	assert.NoError(t, use(t.Context(), e.cs, instance, nonce("a"), t0), "a canceled UseNonce recorded nothing")
}

func testReopen(t *testing.T, e *env) {
	ctx := t.Context()
	first, err := e.cs.Put(ctx, newRecord(instance))
	require.NoError(t, err)
	rec := first
	rec.Revoked, rec.RevokedAt = true, t0.Add(time.Minute)
	rec, err = e.cs.Put(ctx, rec)
	require.NoError(t, err)
	require.NoError(t, use(ctx, e.cs, instance, nonce("a"), t0))

	cs, err := e.durable().Reopen(ctx, e.cs)
	require.NoError(t, err, "reopening")
	equalRecords(t, rec, get(t, cs, instance), "records survive a restart")
	assert.ErrorIs(t, use(ctx, cs, instance, nonce("a"), t0.Add(2*time.Minute)), identity.ErrReplayed,
		"used nonces survive a restart")
	_, err = cs.Put(ctx, first)
	assert.ErrorIs(t, err, edgesecrets.ErrConflict, "revisions survive a restart: a stale one loses")
	_, err = cs.Put(ctx, rec)
	assert.NoError(t, err, "revisions survive a restart: the current one wins")
}

func testClosed(t *testing.T, e *env) {
	ctx := t.Context()
	rec, err := e.cs.Put(ctx, newRecord(instance))
	require.NoError(t, err)
	require.NoError(t, e.durable().CloseStore(e.cs))
	_, err = e.cs.Get(ctx, instance.Provider, instance.InstanceID)
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "a closed store is unavailable")
	_, err = e.cs.Put(ctx, rec)
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	assert.ErrorIs(t, use(ctx, e.cs, instance, nonce("a"), t0), edgesecrets.ErrUnavailable)
}

// testSharedRecords: any agbot sharing the store verifies what another
// issued, and refreshes what another stored.
func testSharedRecords(t *testing.T, e *env) {
	ctx := t.Context()
	b := e.another(t)
	rec, err := e.cs.Put(ctx, newRecord(instance))
	require.NoError(t, err)
	equalRecords(t, rec, get(t, b, instance), "a record stored through one agbot is read through another")

	rec.CurrentSerial, rec.PreviousSerial = "0b", rec.CurrentSerial
	rec2, err := b.Put(ctx, rec)
	require.NoError(t, err, "another agbot updates it")
	_, err = e.cs.Put(ctx, rec)
	assert.ErrorIs(t, err, edgesecrets.ErrConflict, "compare-and-set holds across agbots")
	equalRecords(t, rec2, get(t, e.cs, instance))

	_, err = b.Put(ctx, newRecord(instance))
	assert.ErrorIs(t, err, edgesecrets.ErrConflict, "an instance registered through one agbot exists for all")
}

// testSharedNonce: a proof accepted through one agbot is accepted through
// no other.
func testSharedNonce(t *testing.T, e *env) {
	ctx := t.Context()
	b := e.another(t)
	require.NoError(t, use(ctx, e.cs, instance, nonce("a"), t0), "accepted once through the first agbot")
	assert.ErrorIs(t, use(ctx, b, instance, nonce("a"), t0), identity.ErrReplayed, "never again through another")
	require.NoError(t, use(ctx, b, instance, nonce("b"), t0), "accepted once through the second agbot")
	assert.ErrorIs(t, use(ctx, e.cs, instance, nonce("b"), t0), identity.ErrReplayed, "never again through the first")
}

// testSharedConcurrentNonce: the same proof presented to two agbots at
// once is accepted by exactly one.
func testSharedConcurrentNonce(t *testing.T, e *env) {
	stores := []identity.CertStore{e.cs, e.another(t)}
	oneWins(t, e.opts.Writers, identity.ErrReplayed, func(i int) error {
		return use(t.Context(), stores[i%2], instance, nonce("raced"), t0)
	})
}

func testSharedConcurrentPuts(t *testing.T, e *env) {
	stores := []identity.CertStore{e.cs, e.another(t)}
	base, err := e.cs.Put(t.Context(), newRecord(instance))
	require.NoError(t, err)
	oneWins(t, e.opts.Writers, edgesecrets.ErrConflict, func(i int) error {
		r := base
		r.CurrentSerial = fmt.Sprintf("%02x", i+16)
		_, err := stores[i%2].Put(t.Context(), r)
		return err
	})
}
