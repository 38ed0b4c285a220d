// Package ohtest starts an Open Horizon management hub's secret parts for
// tests: a stub exchange (Exchange) on loopback, and a real Vault dev
// server (internal/testkit/vaulttest) with Open Horizon's Vault auth plugin,
// vault-exchange-auth, registered, enabled at auth/openhorizon and
// configured against the stub exchange, and a KV v2 mount "openhorizon",
// as Open Horizon's deployments have them (anax's test/gov/vault_bootstrap.sh).
//
// An exchange user, agbot or node added to the hub logs in to Vault with
// POST /v1/auth/openhorizon/login {"id": "org/id", "token": "..."}, and gets
// the plugin's ACL policy: an agbot reads and lists everything under
// openhorizon/; an org admin writes its org's secrets and its own
// user/<name>/ ones; a user reads its org's and writes its own.
//
// The plugin binary comes from scripts/devvaultauth.sh through the
// EDGESECRETS_VAULT_AUTH_PLUGIN_DIR environment variable, the Vault server
// from scripts/devvault.sh through EDGESECRETS_VAULT_BIN. Without either,
// Start skips the test with a message saying how to get them; under CI=true
// it fails it.
package ohtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
)

// EnvPluginDir names the environment variable holding the directory of the
// vault-exchange-auth plugin binary.
const EnvPluginDir = "EDGESECRETS_VAULT_AUTH_PLUGIN_DIR"

// HowToGetPlugin tells a developer how to make the tests that need the
// plugin run.
const HowToGetPlugin = "run `bash scripts/test.sh`, or `export " + EnvPluginDir + "=$(scripts/devvaultauth.sh)` then go test"

// Names as Open Horizon's deployments have them.
const (
	// PluginBinary is the plugin's file name in the plugin directory.
	PluginBinary = "hznvaultauth"
	// PluginName is the plugin's name in Vault's catalog.
	PluginName = "openhorizon-exchange"
	// AuthMount is where the auth method is enabled: auth/openhorizon.
	AuthMount = "openhorizon"
	// KVMount is the KV v2 mount holding Open Horizon's secrets.
	KVMount = "openhorizon"
	// AgbotPolicy is the policy the plugin gives agbots: read and list
	// under openhorizon/.
	AgbotPolicy = "openhorizon-agbot"
)

// Options select how a hub starts.
type Options struct {
	// AgbotRenewal is the period of the tokens the plugin gives agbots,
	// its config "renewal", in whole seconds; zero means the plugin's
	// default, 300s. A short one makes token renewal happen within a test.
	AgbotRenewal time.Duration
}

// Hub is a running stub exchange and Vault server wired together. The
// exchange's methods (AddUser, AddAgbot, AddNode, Requests) are the hub's.
type Hub struct {
	*Exchange
	// ExchangeURL is the exchange's API root (Exchange.URL), without a
	// trailing slash.
	ExchangeURL string
	// VaultAddr is the Vault server's URL, http://127.0.0.1:<port>.
	VaultAddr string
	// RootToken is the Vault server's root token, for a test's own calls.
	// Never log it.
	RootToken string
	// Vault is the Vault dev server.
	Vault *vaulttest.Server
}

// PluginDir returns the plugin directory. Without one it skips the test,
// or fails it when CI is set.
func PluginDir(t testing.TB) string {
	t.Helper()
	dir, err := pluginDir()
	if err != nil {
		testkit.Unavailable(t, fmt.Sprintf("ohtest: no vault-exchange-auth plugin: %v; to run the Open Horizon tests, %s", err, HowToGetPlugin))
	}
	return dir
}

func pluginDir() (string, error) {
	dir := os.Getenv(EnvPluginDir)
	if dir == "" {
		return "", fmt.Errorf("%s is not set", EnvPluginDir)
	}
	bin := filepath.Join(dir, PluginBinary)
	fi, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("%s: %w", EnvPluginDir, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", bin)
	}
	return dir, nil
}

// Start starts a stub exchange and a dedicated Vault dev server with the
// plugin, and stops both when t ends. It needs both binaries: see the
// package documentation.
func Start(t testing.TB, opts Options) *Hub {
	t.Helper()
	dir := PluginDir(t)
	vaulttest.Binary(t)
	if opts.AgbotRenewal < 0 || opts.AgbotRenewal%time.Second != 0 {
		t.Fatalf("ohtest: AgbotRenewal %v is not a whole number of seconds", opts.AgbotRenewal)
	}
	ex := StartExchange(t)
	srv := vaulttest.Start(t, vaulttest.Options{PluginDir: dir})
	h := &Hub{Exchange: ex, ExchangeURL: ex.URL, VaultAddr: srv.Addr, RootToken: srv.RootToken, Vault: srv}
	if err := h.bootstrap(t, filepath.Join(dir, PluginBinary), opts); err != nil {
		t.Fatalf("ohtest: setting up auth/%s: %v", AuthMount, err)
	}
	srv.EnableKVAt(t, KVMount, 2)
	return h
}

// bootstrap registers, enables and configures the plugin as anax's
// test/gov/vault_bootstrap.sh does.
func (h *Hub) bootstrap(t testing.TB, bin string, opts Options) error {
	ctx := t.Context()
	sum, err := fileSHA256(bin)
	if err != nil {
		return err
	}
	c := h.Vault.Client(t)
	if err := c.Sys().RegisterPluginWithContext(ctx, &api.RegisterPluginInput{
		Name: PluginName, Type: api.PluginTypeCredential, Command: PluginBinary, SHA256: sum,
	}); err != nil {
		return fmt.Errorf("registering the plugin: %w", err)
	}
	if err := c.Sys().EnableAuthWithOptionsWithContext(ctx, AuthMount, &api.EnableAuthOptions{Type: PluginName}); err != nil {
		return fmt.Errorf("enabling the plugin: %w", err)
	}
	cfg := map[string]any{"url": h.ExchangeURL, "token": h.RootToken, "apiurl": h.VaultAddr}
	if opts.AgbotRenewal > 0 {
		cfg["renewal"] = int(opts.AgbotRenewal / time.Second)
	}
	if _, err := c.Logical().WriteWithContext(ctx, "auth/"+AuthMount+"/config", cfg); err != nil {
		return fmt.Errorf("configuring the plugin: %w", err)
	}
	return nil
}

// VaultClient returns a vault/api client for the hub's Vault with the root
// token.
func (h *Hub) VaultClient(t testing.TB) *api.Client {
	t.Helper()
	return h.Vault.Client(t)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	hash := sha256.New()
	if _, err := io.Copy(hash, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(hash.Sum(nil)), nil
}
