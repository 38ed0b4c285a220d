package storereader_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// newStore wraps d (a fresh test driver when nil) in a Store that does not
// retry.
func newStore(t testing.TB, d driver.Store) *secretstore.Store {
	t.Helper()
	if d == nil {
		d = testkit.NewDriver()
	}
	s, err := secretstore.New(d, secretstore.Options{MaxAttempts: 1})
	require.NoError(t, err)
	return s
}

// put writes {"v": value} to name.
func put(t testing.TB, s *secretstore.Store, name, value string) {
	t.Helper()
	_, err := s.Put(context.Background(), &secretstore.Secret{Name: name, Data: edgesecrets.Data{"v": []byte(value)}}, secretstore.PutOptions{})
	require.NoError(t, err)
}
