//go:build unix

package vault_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// On a server of its own: seal it mid-test (reads fail with ErrUnavailable
// and the server's health, through the store's own client, says sealed),
// unseal it (reads work again), freeze it (ErrUnavailable at the caller's
// deadline), then kill it (ErrUnavailable at once).
func TestSealUnsealAndServerStop(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	mount := srv.EnableKV(t, 2)
	cfg := rootConfig(srv, mount)
	cfg.Timeout = "3s"
	s := open(t, cfg)
	ctx := t.Context()
	put(t, s, "app/db", d("password", "pw"), nil)
	var client *api.Client
	require.True(t, s.As(&client), "the store gives its vault/api client")
	health := func() *api.HealthResponse {
		h, err := client.Sys().HealthWithContext(ctx)
		require.NoError(t, err)
		return h
	}
	assert.False(t, health().Sealed)
	healthyAt := s.LastSuccess()
	require.False(t, healthyAt.IsZero())

	t.Run("sealed", func(t *testing.T) {
		srv.Seal(t)
		_, err := s.Get(ctx, "app/db")
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
		assert.Contains(t, err.Error(), "vault is sealed (HTTP 503)")
		assert.Contains(t, err.Error(), `get "app/db"`)
		assert.True(t, health().Sealed)
		assert.ErrorIs(t, s.CheckCredentials(ctx), edgesecrets.ErrUnavailable, "a sealed server cannot tell whether it accepts the token")
		assert.Equal(t, healthyAt, s.LastSuccess(), "neither the failed read nor the sealed check counts as an interaction")
	})

	t.Run("unsealed", func(t *testing.T) {
		srv.Unseal(t)
		got, err := s.Get(ctx, "app/db")
		require.NoError(t, err, "reads work again after unseal")
		assert.Equal(t, "pw", string(got.Data["password"]))
		assert.False(t, health().Sealed)
		require.NoError(t, s.CheckCredentials(ctx), "the token is accepted again")
	})

	t.Run("hanging", func(t *testing.T) {
		// A frozen process accepts connections but never answers. Each
		// attempt ends at the 3 s timeout; the caller's 5 s deadline ends
		// the call, retries included, with the store's ErrUnavailable.
		require.NoError(t, srv.Pause())
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := s.Get(callCtx, "app/db")
		elapsed := time.Since(start)
		require.NoError(t, srv.Resume())
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "the store's answer, not the context's")
		assert.Contains(t, err.Error(), "did not answer in time")
		assert.Less(t, elapsed, 5*time.Second+3*time.Second, "the caller's deadline ended the call")
		_, err = s.Get(ctx, "app/db")
		require.NoError(t, err, "works again once the server answers")
	})

	t.Run("stopped", func(t *testing.T) {
		srv.Stop()
		start := time.Now()
		_, err := s.Get(ctx, "app/db")
		elapsed := time.Since(start)
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
		assert.Contains(t, err.Error(), "cannot reach vault at "+srv.Addr)
		assert.Less(t, elapsed, 3*time.Second, "refused connections fail fast, retries included")
		err = s.CheckCredentials(ctx)
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable, "a stopped server cannot tell")
		assert.NotErrorIs(t, err, edgesecrets.ErrPermission)
	})
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	srv := vaulttest.Shared(t)
	s, err := vault.New(t.Context(), rootConfig(srv, srv.EnableKV(t, 2)), vault.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close twice")
	_, err = s.Get(t.Context(), "x")
	require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	assert.Contains(t, err.Error(), "store is closed")
	require.ErrorIs(t, s.CheckCredentials(t.Context()), edgesecrets.ErrUnavailable)
}
