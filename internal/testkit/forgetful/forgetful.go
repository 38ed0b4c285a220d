// Package forgetful holds CertStore, an identity.CertStore the agbot's and
// the agent's tests make lose its records. It is not for use outside the
// module's tests.
package forgetful

import (
	"context"
	"sync"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// CertStore is an identity.CertStore that a test can make lose every
// record at once, as a hub whose records were lost: Forget swaps the
// records for an empty identity.NewMemoryCertStore. The zero value is not
// usable; call New.
type CertStore struct {
	mu    sync.Mutex
	inner identity.CertStore
}

// New returns a CertStore over an empty memory store.
func New() *CertStore { return &CertStore{inner: identity.NewMemoryCertStore()} }

// Forget loses every record and nonce.
func (f *CertStore) Forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inner = identity.NewMemoryCertStore()
}

func (f *CertStore) current() identity.CertStore {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inner
}

// Get implements identity.CertStore.
func (f *CertStore) Get(ctx context.Context, provider, instanceID string) (identity.Record, error) {
	return f.current().Get(ctx, provider, instanceID)
}

// Put implements identity.CertStore.
func (f *CertStore) Put(ctx context.Context, rec identity.Record) (identity.Record, error) {
	return f.current().Put(ctx, rec)
}

// UseNonce implements identity.CertStore.
func (f *CertStore) UseNonce(ctx context.Context, u identity.NonceUse) error {
	return f.current().UseNonce(ctx, u)
}
