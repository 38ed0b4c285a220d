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
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/agreement/identity/certstoretest"
)

// certHarness gives each case a file of its own; a store is the CertStore
// Open returns with the file's State.
type certHarness struct {
	path string

	mu     sync.Mutex
	states map[identity.CertStore]state.Backend
}

func (h *certHarness) MakeStore(context.Context) (identity.CertStore, error) {
	st, cs, err := boltstate.Open(h.path, boltstate.Options{})
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
	st := h.states[cs]
	h.mu.Unlock()
	// Every case that closes checks the file's structure and indexes.
	if err := boltstate.Check(context.Background(), st); err != nil {
		return err
	}
	return st.Close()
}

func (h *certHarness) Reopen(ctx context.Context, cs identity.CertStore) (identity.CertStore, error) {
	if err := h.CloseStore(cs); err != nil {
		return nil, err
	}
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
	certstoretest.Run(t, func(_ context.Context, t *testing.T) (certstoretest.Harness, error) {
		return &certHarness{path: filepath.Join(t.TempDir(), "state.db"), states: map[identity.CertStore]state.Backend{}}, nil
	}, certstoretest.Options{Durable: true})
}

var instance = identity.Identity{Provider: "openhorizon.factory1", Org: "org", Node: "node-1", InstanceID: "i-0123"}

// TestCertStoreKeepsNanoseconds: the file keeps a record's times exactly,
// beyond the microsecond every CertStore keeps, and stays consistent
// through identity writes and nonce expiry.
func TestCertStoreKeepsNanoseconds(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	st, cs := openFile(t, path)
	notAfter := time.Date(2031, 1, 2, 3, 4, 5, 6, time.UTC)
	rec, err := cs.Put(ctx, identity.Record{Instance: instance, CurrentSerial: "0a", NotAfter: notAfter, UpdatedAt: notAfter.Add(-7)})
	require.NoError(t, err)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{now, now.Add(10 * time.Minute)} {
		require.NoError(t, cs.UseNonce(ctx, identity.NonceUse{Provider: instance.Provider, InstanceID: instance.InstanceID,
			Nonce: []byte{byte(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, Expires: at.Add(5 * time.Minute), Now: at}))
	}
	require.NoError(t, boltstate.Check(ctx, st))
	require.NoError(t, st.Close())

	_, cs = openFile(t, path)
	got, err := cs.Get(ctx, instance.Provider, instance.InstanceID)
	require.NoError(t, err)
	assert.Equal(t, rec, got, "times to the nanosecond")
}
