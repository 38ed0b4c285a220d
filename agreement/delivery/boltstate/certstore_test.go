package boltstate_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

var instance = identity.Identity{Provider: "openhorizon.factory1", Org: "org", Node: "node-1", InstanceID: "i-0123"}

func TestCertStoreCompareAndSet(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	st, cs := openFile(t, path)

	_, err := cs.Get(ctx, instance.Provider, instance.InstanceID)
	require.ErrorIs(t, err, secretstore.ErrNotFound)

	notAfter := time.Date(2031, 1, 2, 3, 4, 5, 6, time.UTC)
	rec, err := cs.Put(ctx, identity.Record{Instance: instance, CurrentSerial: "0a", NotAfter: notAfter})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), rec.Revision)

	_, err = cs.Put(ctx, identity.Record{Instance: instance, CurrentSerial: "ff"})
	require.ErrorIs(t, err, secretstore.ErrConflict, "revision 0 means create; the record exists")

	rec.CurrentSerial, rec.PreviousSerial = "0b", "0a"
	rec2, err := cs.Put(ctx, rec)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), rec2.Revision)
	_, err = cs.Put(ctx, rec)
	require.ErrorIs(t, err, secretstore.ErrConflict, "a stale revision loses")

	other := identity.Identity{Provider: instance.Provider + "i", Org: "org", Node: "node-2", InstanceID: "-0123"}
	_, err = cs.Put(ctx, identity.Record{Instance: other, CurrentSerial: "01"})
	require.NoError(t, err, "instances whose provider and id concatenate alike are different keys")

	require.NoError(t, st.Close())
	st, cs = openFile(t, path)
	got, err := cs.Get(ctx, instance.Provider, instance.InstanceID)
	require.NoError(t, err)
	assert.Equal(t, rec2, got, "identity records survive a reopen, times to the nanosecond")

	rec2.Revoked, rec2.RevokedAt = true, notAfter.Add(-time.Hour)
	tomb, err := cs.Put(ctx, rec2)
	require.NoError(t, err)
	got, err = cs.Get(ctx, instance.Provider, instance.InstanceID)
	require.NoError(t, err)
	assert.Equal(t, tomb, got, "a tombstone is kept")
	require.NoError(t, boltstate.Check(ctx, st))

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = cs.Get(canceled, instance.Provider, instance.InstanceID)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = cs.Put(canceled, got)
	assert.ErrorIs(t, err, context.Canceled)

	require.NoError(t, st.Close())
	_, err = cs.Get(ctx, instance.Provider, instance.InstanceID)
	assert.ErrorIs(t, err, secretstore.ErrUnavailable, "a closed state is unavailable")
	_, err = cs.Put(ctx, got)
	assert.ErrorIs(t, err, secretstore.ErrUnavailable)
}

func TestCertStoreConcurrentPutsOneWins(t *testing.T) {
	_, cs := openFile(t, filepath.Join(t.TempDir(), "state.db"))
	base, err := cs.Put(t.Context(), identity.Record{Instance: instance, CurrentSerial: "01"})
	require.NoError(t, err)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := base
			r.CurrentSerial = string(rune('a' + i))
			_, errs[i] = cs.Put(t.Context(), r)
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		assert.ErrorIs(t, err, secretstore.ErrConflict)
	}
	assert.Equal(t, 1, wins, "exactly one refresh of a revision wins")
}

func TestCertStoreUseNonce(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	st, cs := openFile(t, path)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	use := func(inst identity.Identity, nonce string, at time.Time) error {
		return cs.UseNonce(ctx, identity.NonceUse{Provider: inst.Provider, InstanceID: inst.InstanceID,
			Nonce: []byte(nonce), Expires: at.Add(5 * time.Minute), Now: at})
	}
	other := identity.Identity{Provider: instance.Provider, InstanceID: "i-other"}

	require.NoError(t, use(instance, "nonce-0123456789", now))
	assert.ErrorIs(t, use(instance, "nonce-0123456789", now.Add(time.Minute)), identity.ErrReplayed, "a nonce is single-use")
	assert.NoError(t, use(other, "nonce-0123456789", now), "nonces are per instance")
	assert.NoError(t, use(instance, "nonce-9876543210", now), "another nonce of the same instance")

	require.NoError(t, st.Close())
	st, cs = openFile(t, path)
	assert.ErrorIs(t, use(instance, "nonce-0123456789", now.Add(2*time.Minute)), identity.ErrReplayed, "used nonces survive a reopen")

	// Past its expiry a nonce is dropped by a later use: the Issuer refuses
	// a proof that old anyway, and the file does not grow without bound.
	later := now.Add(10 * time.Minute)
	require.NoError(t, use(instance, "nonce-later-000000", later))
	assert.NoError(t, use(instance, "nonce-0123456789", later), "an expired nonce is forgotten")
	require.NoError(t, boltstate.Check(ctx, st))

	// Of concurrent uses of one nonce exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = use(instance, "nonce-raced-0000", later) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			assert.ErrorIs(t, err, identity.ErrReplayed)
		}
	}
	assert.Equal(t, 1, won)
}
