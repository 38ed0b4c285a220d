package binding

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// errNoStore is the cause reported when no store is configured.
var errNoStore = errors.New("no secret store is configured")

// storeChecker is the ExistenceChecker NewStoreChecker returns.
type storeChecker struct {
	store *secretstore.Store
	org   string
}

// NewStoreChecker returns the ExistenceChecker of an agbot that holds the
// store: it looks org's vault secrets up under "<org>/" in store with Stat,
// so no value is read for existence. It is also a KeyChecker: SecretKeys
// reads the secret and keeps only its key names (the values are wiped). A missing secret is (false, nil); other store errors
// are returned with their secretstore kind. A nil store is allowed and
// makes every check fail with edgesecrets.ErrUnavailable (the hub has no
// vault). org must be a single safe path element. The checker is safe for
// concurrent use.
func NewStoreChecker(store *secretstore.Store, org string) (KeyChecker, error) {
	if err := safename.Check(org); err != nil {
		return nil, fmt.Errorf("binding: organisation %s", err)
	}
	return &storeChecker{store: store, org: org}, nil
}

// SecretExists implements ExistenceChecker.
func (c *storeChecker) SecretExists(ctx context.Context, name VaultSecretName) (bool, error) {
	path, err := name.StorePath(c.org)
	if err != nil {
		return false, &secretstore.Error{Op: "stat", Name: name.String(), Kind: edgesecrets.ErrInvalid, Err: err}
	}
	if c.store == nil {
		return false, &secretstore.Error{Op: "stat", Name: path, Kind: edgesecrets.ErrUnavailable, Err: errNoStore}
	}
	_, err = c.store.Stat(ctx, path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, edgesecrets.ErrNotFound):
		return false, nil
	}
	return false, err
}

// SecretKeys implements KeyChecker.
func (c *storeChecker) SecretKeys(ctx context.Context, name VaultSecretName) ([]string, error) {
	path, err := name.StorePath(c.org)
	if err != nil {
		return nil, &secretstore.Error{Op: "get", Name: name.String(), Kind: edgesecrets.ErrInvalid, Err: err}
	}
	if c.store == nil {
		return nil, &secretstore.Error{Op: "get", Name: path, Kind: edgesecrets.ErrUnavailable, Err: errNoStore}
	}
	s, err := c.store.Get(ctx, path)
	if err != nil {
		return nil, err
	}
	s.Data.Wipe()
	return s.Data.Keys(), nil
}
