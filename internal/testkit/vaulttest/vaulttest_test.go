package vaulttest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/internal/testkit/ohtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
)

func TestMain(m *testing.M) { os.Exit(vaulttest.Main(m)) }

func TestSharedServerAnswersWithItsRootToken(t *testing.T) {
	srv := vaulttest.Shared(t)
	assert.True(t, strings.HasPrefix(srv.Addr, "http://127.0.0.1:"), "listens on loopback: %s", srv.Addr)
	assert.Same(t, srv, vaulttest.Shared(t), "one shared server per test binary")

	c := srv.Client(t)
	self, err := c.Auth().Token().LookupSelfWithContext(t.Context())
	require.NoError(t, err)
	policies, err := self.TokenPolicies()
	require.NoError(t, err)
	assert.Contains(t, policies, "root")

	mount := srv.EnableKV(t, 2)
	_, err = c.KVv2(mount).Put(t.Context(), "x", map[string]any{"k": "v"})
	require.NoError(t, err, "a fresh KV v2 mount takes writes")
	mount1 := srv.EnableKV(t, 1)
	assert.NotEqual(t, mount, mount1, "each EnableKV gets its own mount")
	require.NoError(t, c.KVv1(mount1).Put(t.Context(), "x", map[string]any{"k": "v"}))
}

func TestOutputRedactsRootTokenAndUnsealKey(t *testing.T) {
	srv := vaulttest.Shared(t)
	require.NotEmpty(t, srv.UnsealKey, "the dev unseal key was captured")
	out := srv.Output()
	assert.Contains(t, out, "Unseal Key: [redacted]")
	assert.NotContains(t, out, srv.RootToken)
	assert.NotContains(t, out, srv.UnsealKey)
}

func TestSealUnsealAndStop(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	c := srv.Client(t)

	srv.Seal(t)
	st, err := c.Sys().SealStatusWithContext(t.Context())
	require.NoError(t, err)
	assert.True(t, st.Sealed)

	srv.Unseal(t)
	h, err := c.Sys().HealthWithContext(t.Context())
	require.NoError(t, err)
	assert.False(t, h.Sealed, "unsealed with the captured dev unseal key")

	srv.Stop()
	assert.True(t, srv.Exited(), "Stop waits for the process to end")
	hc, err := srv.HTTPClient()
	require.NoError(t, err)
	_, err = hc.Get(srv.Addr + "/v1/sys/health")
	require.Error(t, err, "nothing listens after Stop")
	srv.Stop() // idempotent
}

func TestTLSServerNeedsItsCA(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{TLS: true})
	require.True(t, strings.HasPrefix(srv.Addr, "https://127.0.0.1:"))
	pem, err := os.ReadFile(srv.CAFile)
	require.NoError(t, err)
	assert.Contains(t, string(pem), "BEGIN CERTIFICATE")

	hc, err := srv.HTTPClient()
	require.NoError(t, err)
	resp, err := hc.Get(srv.Addr + "/v1/sys/health")
	require.NoError(t, err, "the CA bundle verifies the server")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	_, err = http.Get(srv.Addr + "/v1/sys/health")
	require.Error(t, err, "without the CA the certificate is not trusted")
}

func TestBinarySkipsOrFailsWithoutTheServer(t *testing.T) {
	t.Setenv(vaulttest.EnvBinary, "")
	testkit.CheckUnavailable(t, func(tb testing.TB) { vaulttest.Binary(tb) }, "scripts/devvault.sh")
}

// A plugin directory's binaries are in the catalog, with their SHA-256,
// ready to enable.
func TestPluginDirRegistersItsPlugins(t *testing.T) {
	dir := ohtest.PluginDir(t)
	srv := vaulttest.Start(t, vaulttest.Options{PluginDir: dir})
	b, err := os.ReadFile(filepath.Join(dir, ohtest.PluginBinary))
	require.NoError(t, err)
	sum := sha256.Sum256(b)

	c := srv.Client(t)
	p, err := c.Sys().GetPluginWithContext(t.Context(), &api.GetPluginInput{Name: ohtest.PluginBinary, Type: api.PluginTypeCredential})
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(sum[:]), p.SHA256)
	require.NoError(t, c.Sys().EnableAuthWithOptionsWithContext(t.Context(), "oh", &api.EnableAuthOptions{Type: ohtest.PluginBinary}),
		"the registered plugin runs")
}

func TestStartServerRefusesAMissingPluginDir(t *testing.T) {
	bin := vaulttest.Binary(t)
	_, err := vaulttest.StartServer(t.Context(), bin, t.TempDir(), vaulttest.Options{PluginDir: filepath.Join(t.TempDir(), "missing")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "plugin directory")
}
