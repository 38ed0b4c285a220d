//go:build unix

package secretsapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// An existence request through the agbot's API (Client, the
// handler, the Vault store) answers 503 within the bound its caller sets
// with a context deadline, whether Vault answers "sealed" at once or does
// not answer at all: the store's retries, the handler and the client's
// retries share that one bound.
func TestExistenceAnswers503WithinTheCallersBound(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	store, err := vault.New(t.Context(), vault.Config{
		Address: srv.Addr, Mount: srv.EnableKV(t, 2),
		Auth: vault.Auth{Method: "token", Token: edgesecrets.Sensitive(srv.RootToken)},
	}, vault.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	_, err = store.Put(t.Context(), &secretstore.Secret{Name: "myorg/db", Data: edgesecrets.Data{"k": []byte("v")}}, secretstore.PutOptions{})
	require.NoError(t, err)

	h, err := secretsapi.NewHandler(secretsapi.Options{Store: store, Authenticate: authenticate})
	require.NoError(t, err)
	api := httptest.NewServer(h)
	t.Cleanup(api.Close)
	for _, org := range []string{"", "myorg"} {
		c, err := secretsapi.NewClient(api.URL, secretsapi.ClientOptions{Org: org,
			Authorize: func(r *http.Request) { r.SetBasicAuth("myorg/alice", "alice-pw") }})
		require.NoError(t, err)
		exists, err := c.SecretExists(t.Context(), name(t, "db"))
		require.NoError(t, err)
		require.True(t, exists)
	}

	check := func(t *testing.T, bound time.Duration) {
		for _, org := range []string{"", "myorg"} {
			// The client's defaults: 4 attempts 500ms apart.
			c, err := secretsapi.NewClient(api.URL, secretsapi.ClientOptions{Org: org,
				Authorize: func(r *http.Request) { r.SetBasicAuth("myorg/alice", "alice-pw") }})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), bound)
			start := time.Now()
			_, err = c.SecretExists(ctx, name(t, "db"))
			elapsed := time.Since(start)
			cancel()
			require.ErrorIs(t, err, edgesecrets.ErrUnavailable, "org %q", org)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "an answer, not the caller's deadline")
			assert.ErrorContains(t, err, "503")
			assert.Less(t, elapsed, bound, "within the bound")
		}
	}
	t.Run("sealed", func(t *testing.T) {
		srv.Seal(t)
		defer srv.Unseal(t)
		for _, bound := range []time.Duration{1500 * time.Millisecond, 3 * time.Second} {
			check(t, bound)
		}
	})
	t.Run("not answering", func(t *testing.T) {
		require.NoError(t, srv.Pause())
		defer func() { require.NoError(t, srv.Resume()) }()
		check(t, 3*time.Second)
	})
}
