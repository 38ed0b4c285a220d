package pgstate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/agreement/identity/certstoretest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// certHarness gives each case a schema of its own in one database; every
// store it opens is one Open, as one agbot.
type certHarness struct {
	db     *pgtest.Database
	schema string

	mu     sync.Mutex
	states map[identity.CertStore]state.Backend
}

func certHarnessMaker(db *pgtest.Database) certstoretest.HarnessMaker {
	var cases atomic.Int64
	return func(context.Context, *testing.T) (certstoretest.Harness, error) {
		return &certHarness{db: db, schema: fmt.Sprintf("certs_%d", cases.Add(1)), states: map[identity.CertStore]state.Backend{}}, nil
	}
}

func (h *certHarness) MakeStore(ctx context.Context) (identity.CertStore, error) {
	st, cs, err := pgstate.Open(ctx, pgstate.Options{URL: h.db.URL, Schema: h.schema})
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.states[cs] = st
	return cs, nil
}

func (h *certHarness) CloseStore(cs identity.CertStore) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.states[cs].Close()
}

func (h *certHarness) Reopen(ctx context.Context, cs identity.CertStore) (identity.CertStore, error) {
	if err := h.CloseStore(cs); err != nil {
		return nil, err
	}
	return h.MakeStore(ctx)
}

func (h *certHarness) OpenAnother(ctx context.Context, _ identity.CertStore) (identity.CertStore, error) {
	return h.MakeStore(ctx)
}

func (h *certHarness) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, st := range h.states {
		_ = st.Close()
	}
}

func TestCertStoreConformance(t *testing.T) {
	certstoretest.Run(t, certHarnessMaker(pgtest.NewDatabase(t)), certstoretest.Options{Durable: true, Shared: true})
}

// openCerts opens the State on url as one agbot, closed when t ends, and
// returns its CertStore.
func openCerts(t *testing.T, url string) identity.CertStore {
	t.Helper()
	st, cs, err := pgstate.Open(t.Context(), pgstate.Options{URL: url})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return cs
}

// TestNoncesPruned: nonces that left their window (and the allowance for
// the agbots' clocks) are deleted as later uses go, at most 64 a use, so
// the table holds about one window's nonces, not every nonce ever used.
func TestNoncesPruned(t *testing.T) {
	db := pgtest.NewDatabase(t)
	cs := openCerts(t, db.URL)
	ctx := t.Context()
	count := func() int {
		var n int
		require.NoError(t, db.Pool(t).QueryRow(ctx, "SELECT count(*) FROM edgesecrets_delivery.nonces").Scan(&n))
		return n
	}
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	use := func(i int, now time.Time) error {
		return cs.UseNonce(ctx, identity.NonceUse{Provider: "p", InstanceID: fmt.Sprintf("i-%d", i%7),
			Nonce: fmt.Appendf(nil, "nonce-%016d", i), Expires: now.Add(5 * time.Minute), Now: now})
	}
	const old = 150
	for i := range old {
		require.NoError(t, use(i, t0))
	}
	require.Equal(t, old, count())

	later := t0.Add(5*time.Minute + 30*time.Second)
	require.NoError(t, use(old, later))
	assert.Equal(t, old+1, count(), "a nonce is kept for a minute past its expiry: another agbot's clock may be behind")

	later = t0.Add(7 * time.Minute)
	for i := range 3 {
		require.NoError(t, use(old+1+i, later))
	}
	assert.Equal(t, 1+3, count(), "three uses delete up to 3×64 expired nonces, leaving those in their window")
}

// TestCertStoreRecordAcrossAgbots: an instance registered through one
// agbot is verified through another, which never saw it: the record is in
// the shared database.
func TestCertStoreRecordAcrossAgbots(t *testing.T) {
	db := pgtest.NewDatabase(t)
	a, b := openCerts(t, db.URL), openCerts(t, db.URL)
	id := identity.Identity{Provider: "openhorizon.factory1", Org: "org", Node: "node-1", InstanceID: "i-1"}
	rec, err := a.Put(t.Context(), identity.Record{Instance: id, CurrentSerial: "0a", NotAfter: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	got, err := b.Get(t.Context(), id.Provider, id.InstanceID)
	require.NoError(t, err)
	assert.Equal(t, rec, got)
}

// TestCertStoreBadText: a name PostgreSQL text cannot hold is refused
// with an error naming what was wrong, and nothing is stored.
func TestCertStoreBadText(t *testing.T) {
	cs := openCerts(t, pgtest.NewDatabase(t).URL)
	ctx := t.Context()
	for _, c := range []struct {
		name string
		call func() error
		says string
	}{
		{"Get", func() error { return second(cs.Get(ctx, "p", "i-\x00")) }, "instance id"},
		{"Put", func() error {
			return second(cs.Put(ctx, identity.Record{Instance: identity.Identity{Provider: "p", Org: "o", Node: "n\xff", InstanceID: "i"}}))
		}, "node"},
		{"PutSerial", func() error {
			return second(cs.Put(ctx, identity.Record{Instance: identity.Identity{Provider: "p", Org: "o", Node: "n", InstanceID: "i"}, CurrentSerial: "\x00"}))
		}, "current serial"},
		{"UseNonce", func() error {
			return cs.UseNonce(ctx, identity.NonceUse{Provider: "p\x00", InstanceID: "i", Nonce: []byte("n"), Expires: time.Now(), Now: time.Now()})
		}, "provider"},
		{"UseNonceEmpty", func() error {
			return cs.UseNonce(ctx, identity.NonceUse{Provider: "p", InstanceID: "i", Expires: time.Now(), Now: time.Now()})
		}, "needs a nonce"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), c.says)
		})
	}
	_, err := cs.Get(ctx, "p", "i")
	assert.ErrorIs(t, err, edgesecrets.ErrNotFound)
}
