package vault_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

func TestTLSWithCABundle(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{TLS: true})
	mount := srv.EnableKV(t, 2)
	pem, err := os.ReadFile(srv.CAFile)
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		setup   func(*vault.Config)
		wantErr string // "" = works
	}{
		{"caFile", func(c *vault.Config) { c.CAFile = srv.CAFile }, ""},
		{"caBundle inline", func(c *vault.Config) { c.CABundle = string(pem) }, ""},
		{"tlsServerName the certificate carries", func(c *vault.Config) { c.CAFile, c.TLSServerName = srv.CAFile, "localhost" }, ""},
		{"no CA", func(*vault.Config) {}, "cannot verify the TLS certificate of vault at " + srv.Addr + " (set caBundle or caFile"},
		{"wrong tlsServerName", func(c *vault.Config) { c.CAFile, c.TLSServerName = srv.CAFile, "vault.wrong.example" }, "vault.wrong.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rootConfig(srv, mount)
			tc.setup(&cfg)
			s, err := vault.New(t.Context(), cfg, vault.Options{})
			if tc.wantErr != "" {
				require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.NotContains(t, err.Error(), srv.RootToken)
				return
			}
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			put(t, s, "tls/secret", d("k", "v"), nil)
			got, err := s.Get(t.Context(), "tls/secret")
			require.NoError(t, err)
			assert.Equal(t, "v", string(got.Data["k"]))
		})
	}
}

func TestMissingCAFileIsInvalid(t *testing.T) {
	_, err := vault.New(t.Context(), vault.Config{Address: "https://127.0.0.1:1", CAFile: "/nonexistent/ca.pem",
		Auth: vault.Auth{Method: "token", Token: "t"}}, vault.Options{})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.Contains(t, err.Error(), "vault.caFile")
	assert.Contains(t, err.Error(), "/nonexistent/ca.pem")
}
