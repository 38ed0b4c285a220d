package identity_test

import (
	"context"
	"testing"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/agreement/identity/certstoretest"
)

// memoryHarness gives each case a new in-memory store.
type memoryHarness struct{}

func (memoryHarness) MakeStore(context.Context) (identity.CertStore, error) {
	return identity.NewMemoryCertStore(), nil
}

func (memoryHarness) Close() {}

func TestMemoryCertStoreConformance(t *testing.T) {
	certstoretest.Run(t, func(context.Context, *testing.T) (certstoretest.Harness, error) {
		return memoryHarness{}, nil
	}, certstoretest.Options{})
}
