// Package forgetful holds Forgetful, the identity.CertStore the agbot's and
// the agent's tests make lose its records. It is not for use outside the
// module's tests.
package forgetful

import (
	"context"
	"sync"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// Forgetful is an identity.CertStore that a test can make lose every
// record at once, as a hub whose records were lost: Forget swaps the
// records for an empty identity.NewMemoryCertStore. The zero value is not
// usable; call NewForgetful.
type Forgetful struct {
	mu    sync.Mutex
	inner identity.CertStore
}

// NewForgetful returns a Forgetful over an empty memory store.
func NewForgetful() *Forgetful { return &Forgetful{inner: identity.NewMemoryCertStore()} }

// Forget loses every record and nonce.
func (f *Forgetful) Forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inner = identity.NewMemoryCertStore()
}

func (f *Forgetful) store() identity.CertStore {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inner
}

// Get implements identity.CertStore.
func (f *Forgetful) Get(ctx context.Context, provider, instanceID string) (identity.Record, error) {
	return f.store().Get(ctx, provider, instanceID)
}

// Put implements identity.CertStore.
func (f *Forgetful) Put(ctx context.Context, rec identity.Record) (identity.Record, error) {
	return f.store().Put(ctx, rec)
}

// UseNonce implements identity.CertStore.
func (f *Forgetful) UseNonce(ctx context.Context, u identity.NonceUse) error {
	return f.store().UseNonce(ctx, u)
}
