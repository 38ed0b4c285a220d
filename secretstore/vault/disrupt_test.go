//go:build unix

package vault_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// On a server of its own: seal it mid-test (reads fail with ErrUnavailable
// and health says sealed), unseal it (reads work again), then kill it
// (ErrUnavailable within the configured timeout, health unreachable).
func TestSealUnsealAndServerStop(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	mount := srv.EnableKV(t, 2)
	cfg := rootConfig(srv, mount)
	cfg.Timeout = vault.Duration(3 * time.Second)
	s := open(t, cfg)
	mon := secretstore.NewMonitor(s)
	ctx := t.Context()
	put(t, mon, "app/db", d("password", "pw"), nil)

	h, err := s.CheckHealth(ctx, mon)
	require.NoError(t, err)
	assert.Equal(t, vault.Unsealed, h.State)
	assert.NotEmpty(t, h.Version)
	assert.True(t, h.Serving())
	healthyAt := mon.LastSuccess()
	require.False(t, healthyAt.IsZero(), "a healthy check counts as an interaction")

	t.Run("sealed", func(t *testing.T) {
		srv.Seal(t)
		_, err := mon.Get(ctx, "app/db")
		require.ErrorIs(t, err, secretstore.ErrUnavailable)
		assert.Contains(t, err.Error(), "vault is sealed (HTTP 503)")
		assert.Contains(t, err.Error(), `get "app/db"`)

		h, err := s.CheckHealth(ctx, mon)
		require.NoError(t, err, "sealed is a state, not a transport error")
		assert.Equal(t, vault.Sealed, h.State)
		assert.False(t, h.Serving())
		assert.ErrorIs(t, mon.CheckCredentials(ctx), secretstore.ErrUnavailable, "a sealed server cannot tell whether it accepts the token")
		assert.Equal(t, healthyAt, mon.LastSuccess(), "neither the failed read nor the sealed checks count as an interaction")
		assert.EqualValues(t, 2, mon.Stats()[vault.OpHealth].Calls)
		assert.EqualValues(t, 1, mon.Stats()[vault.OpHealth].Errors)
	})

	t.Run("unsealed", func(t *testing.T) {
		srv.Unseal(t)
		got, err := mon.Get(ctx, "app/db")
		require.NoError(t, err, "reads work again after unseal")
		assert.Equal(t, "pw", string(got.Data["password"]))
		h, err := s.Health(ctx)
		require.NoError(t, err)
		assert.Equal(t, vault.Unsealed, h.State)
		require.NoError(t, mon.CheckCredentials(ctx), "the token is accepted again")
	})

	t.Run("hanging", func(t *testing.T) {
		// A frozen process accepts connections but never answers.
		require.NoError(t, srv.Pause())
		// The caller's own deadline is far beyond the store's timeout; it
		// only keeps a regression from hanging the test.
		callCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		start := time.Now()
		_, err := mon.Get(callCtx, "app/db")
		elapsed := time.Since(start)
		require.NoError(t, srv.Resume())
		require.ErrorIs(t, err, secretstore.ErrUnavailable)
		assert.Contains(t, err.Error(), "did not answer in time")
		assert.Less(t, elapsed, 3*time.Second+5*time.Second, "the timeout ended the call")
		_, err = mon.Get(ctx, "app/db")
		require.NoError(t, err, "works again once the server answers")
	})

	t.Run("stopped", func(t *testing.T) {
		srv.Stop()
		callCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		start := time.Now()
		_, err := mon.Get(callCtx, "app/db")
		elapsed := time.Since(start)
		require.ErrorIs(t, err, secretstore.ErrUnavailable)
		assert.Contains(t, err.Error(), "cannot reach vault at "+srv.Addr)
		// The timeout (3 s) bounds the call including its retries; allow
		// generous slack for a loaded machine but not a hang.
		assert.Less(t, elapsed, 3*time.Second+5*time.Second, "no hang past the timeout")

		h, err := s.CheckHealth(ctx, mon)
		require.ErrorIs(t, err, secretstore.ErrUnavailable)
		assert.Equal(t, vault.Unreachable, h.State)
		err = s.CheckCredentials(ctx)
		require.ErrorIs(t, err, secretstore.ErrUnavailable, "a stopped server cannot tell")
		assert.NotErrorIs(t, err, secretstore.ErrPermission)
	})
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	srv := vaulttest.Shared(t)
	s, err := vault.New(t.Context(), rootConfig(srv, srv.EnableKV(t, 2)), fastRetries)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close twice")
	_, err = s.Get(t.Context(), "x")
	require.ErrorIs(t, err, secretstore.ErrUnavailable)
	assert.Contains(t, err.Error(), "store is closed")
	require.ErrorIs(t, s.CheckCredentials(t.Context()), secretstore.ErrUnavailable)
}
