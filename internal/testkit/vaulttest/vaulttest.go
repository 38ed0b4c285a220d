// Package vaulttest starts real Vault dev servers for tests: the binary that
// scripts/devvault.sh builds from internal/devvault, found through the
// EDGESECRETS_VAULT_BIN environment variable.
//
// A server listens on 127.0.0.1 at a free port, with a random root token it
// knows, and is stopped by PID when the test (or, for the shared server, the
// test binary) ends. Its output is kept out of the test log unless the test
// fails, and even then the root token and unseal key are redacted.
//
// Without the binary, tests skip with a message saying how to get it; in CI
// (CI=true) they fail instead.
//
// Use Shared for ordinary tests (one server per test binary, each test on a
// mount of its own from EnableKV) and Start for tests that seal, stop or
// reconfigure their server.
package vaulttest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// EnvBinary names the environment variable holding the Vault binary's path.
const EnvBinary = "EDGESECRETS_VAULT_BIN"

// HowToGetBinary tells a developer how to make the Vault tests run.
const HowToGetBinary = "run `bash scripts/test.sh`, or `export " + EnvBinary + "=$(scripts/devvault.sh)` then go test"

// startTimeout bounds how long a dev server may take to answer its health
// endpoint. Generous: a loaded 2-core machine is slow to start Vault.
const startTimeout = 2 * time.Minute

// Options select how a server starts.
type Options struct {
	// TLS starts the server with -dev-tls: HTTPS with a generated CA whose
	// bundle is at Server.CAFile.
	TLS bool
	// PluginDir starts the server with -dev-plugin-dir: the directory of
	// external plugin binaries, each registered in the plugin catalog
	// under its file name with its SHA-256 (what `vault plugin register`
	// does), ready for `vault auth enable <name>` or `vault secrets enable
	// <name>`. Plugins run with the server's environment, which then holds
	// VAULT_ADDR (and VAULT_CACERT for TLS) naming the server itself, so a
	// plugin's own vault/api client (vault-exchange-auth's) reaches it.
	PluginDir string
}

// Server is a running Vault dev server.
type Server struct {
	// Addr is the server's URL, http:// or https://127.0.0.1:<port>.
	Addr string
	// RootToken is the dev server's root token. Never log it.
	RootToken string
	// UnsealKey is the single unseal key (base64) the dev server printed.
	UnsealKey string
	// CAFile is the PEM CA bundle of a TLS server, empty otherwise.
	CAFile string

	proc   *testkit.Process
	out    *testkit.TailBuffer
	mounts atomic.Int64
}

// Binary returns the Vault binary's path. Without one it skips the test, or
// fails it when CI is set.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := binary()
	if err != nil {
		unavailable(t, err)
	}
	return bin
}

func binary() (string, error) {
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		return "", fmt.Errorf("%s is not set", EnvBinary)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("%s: %w", EnvBinary, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s=%s is not an executable file", EnvBinary, bin)
	}
	return bin, nil
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	testkit.Unavailable(t, fmt.Sprintf("vaulttest: no Vault server binary: %v; to run the Vault tests, %s", err, HowToGetBinary))
}

// Start starts a dedicated dev server and stops it when t ends. On test
// failure the server's output (with secrets redacted) is logged.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	s, err := StartServer(t.Context(), bin, dir, opts)
	if err != nil {
		t.Fatalf("vaulttest: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("vaulttest: output of the Vault server at %s:\n%s", s.Addr, s.Output())
		}
	})
	return s
}

// StartServer starts a dev server from bin, keeping its files (the TLS
// bundle) in dir, and waits until it answers. The caller must Stop it. It
// retries with another port if the chosen one was taken meanwhile.
func StartServer(ctx context.Context, bin, dir string, opts Options) (*Server, error) {
	return testkit.RetryPortTaken(func() (*Server, error) { return startOnce(ctx, bin, dir, opts) })
}

var unsealKeyLine = regexp.MustCompile(`(?m)^Unseal Key: (\S+)\s*$`)

func startOnce(ctx context.Context, bin, dir string, opts Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{"server", "-dev", "-dev-no-store-token", "-dev-listen-address=" + listen}
	s := &Server{Addr: "http://" + listen, RootToken: token, out: &testkit.TailBuffer{Max: 1 << 20}}
	if opts.TLS {
		certDir := filepath.Join(dir, "tls-"+strconv.Itoa(port))
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return nil, err
		}
		args = append(args, "-dev-tls", "-dev-tls-cert-dir="+certDir)
		s.Addr = "https://" + listen
		s.CAFile = filepath.Join(certDir, "vault-ca.pem")
	}
	env := append(cleanEnv(), "VAULT_DEV_ROOT_TOKEN_ID="+token)
	if opts.PluginDir != "" {
		pdir, err := pluginDir(opts.PluginDir)
		if err != nil {
			return nil, err
		}
		args = append(args, "-dev-plugin-dir="+pdir)
		env = append(env, "VAULT_ADDR="+s.Addr)
		if s.CAFile != "" {
			env = append(env, "VAULT_CACERT="+s.CAFile)
		}
	}
	cmd := exec.Command(bin, args...)
	// The token goes through the environment, not the command line (ps).
	cmd.Env = env
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	cmd.Dir = dir
	if s.proc, err = testkit.StartProcess(cmd); err != nil {
		return nil, err
	}

	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, testkit.NotReady("vault dev server", err, s.Output())
	}
	return s, nil
}

// waitReady polls /v1/sys/health until the server is unsealed and has
// printed its unseal key.
func (s *Server) waitReady(ctx context.Context) error {
	return s.proc.WaitReady(ctx, startTimeout, 50*time.Millisecond, func(ctx context.Context) error {
		if s.CAFile != "" {
			if _, err := os.Stat(s.CAFile); err != nil {
				return err
			}
		}
		if err := s.healthy(ctx); err != nil {
			return err
		}
		m := unsealKeyLine.FindStringSubmatch(s.out.String())
		if m == nil {
			return errors.New("unseal key not printed yet")
		}
		s.UnsealKey = m[1]
		return nil
	})
}

func (s *Server) healthy(ctx context.Context) error {
	hc, err := s.HTTPClient()
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Addr+"/v1/sys/health", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close() // only the status is read
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: HTTP %d", resp.StatusCode)
	}
	return nil
}

// HTTPClient returns a plain HTTP client that trusts the server (its CA for
// a TLS server).
func (s *Server) HTTPClient() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", s.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// Stop kills the server process by PID and waits for it to exit. It is safe
// to call more than once.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Kill()
	}
}

// Exited reports whether the server process has ended.
func (s *Server) Exited() bool { return !s.proc.Running() }

// Output returns the server's output so far (its last MiB), with the root
// token and unseal key redacted.
func (s *Server) Output() string {
	out := s.out.String()
	for _, secret := range []string{s.RootToken, s.UnsealKey} {
		if secret != "" {
			out = strings.ReplaceAll(out, secret, "[redacted]")
		}
	}
	return out
}

// Client returns a vault/api client for the server authenticated with the
// root token, ignoring VAULT_* environment variables.
func (s *Server) Client(t testing.TB) *api.Client {
	t.Helper()
	c, err := s.NewClient()
	if err != nil {
		t.Fatalf("vaulttest: %v", err)
	}
	return c
}

// NewClient is Client for code without a testing.TB (TestMain, benchmarks'
// setup helpers).
func (s *Server) NewClient() (*api.Client, error) {
	hc, err := s.HTTPClient()
	if err != nil {
		return nil, err
	}
	hc.Timeout = 0
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c, err := api.NewClient(&api.Config{Address: s.Addr, HttpClient: hc, Timeout: 30 * time.Second, MaxRetries: 2})
	if err != nil {
		return nil, err
	}
	c.SetToken(s.RootToken)
	c.ClearNamespace()
	return c, nil
}

// pluginDir checks a plugin directory and returns its absolute path, which
// Vault wants.
func pluginDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("plugin directory: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("plugin directory: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("plugin directory %s is not a directory", abs)
	}
	return abs, nil
}

// EnableKV mounts a fresh KV secrets engine of the given version (1 or 2)
// at a path unique to this server and returns the path. Tests sharing a
// server each use their own mount. The mount is removed when t ends.
func (s *Server) EnableKV(t testing.TB, version int) string {
	t.Helper()
	mount := fmt.Sprintf("kv%d-%d", version, s.mounts.Add(1))
	s.EnableKVAt(t, mount, version)
	return mount
}

// EnableKVAt mounts a KV secrets engine of the given version (1 or 2) at
// mount, waits until it takes writes, and removes it when t ends.
func (s *Server) EnableKVAt(t testing.TB, mount string, version int) {
	t.Helper()
	c := s.Client(t)
	err := c.Sys().MountWithContext(t.Context(), mount, &api.MountInput{
		Type:    "kv",
		Options: map[string]string{"version": strconv.Itoa(version)},
	})
	if err != nil {
		t.Fatalf("vaulttest: enabling KV v%d at %s: %v", version, mount, err)
	}
	t.Cleanup(func() {
		if !s.Exited() {
			_ = c.Sys().Unmount(mount)
		}
	})
	if version == 2 {
		// A new KV v2 mount upgrades its storage in the background; writes
		// fail until it is done, so wait for its config to be readable.
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := c.Logical().ReadWithContext(t.Context(), mount+"/config")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("vaulttest: KV v2 mount %s not ready: %v", mount, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Seal seals the server with the root token.
func (s *Server) Seal(t testing.TB) {
	t.Helper()
	if err := s.Client(t).Sys().SealWithContext(t.Context()); err != nil {
		t.Fatalf("vaulttest: sealing: %v", err)
	}
}

// Unseal unseals the server with its dev unseal key and waits until it
// answers as active.
func (s *Server) Unseal(t testing.TB) {
	t.Helper()
	c := s.Client(t)
	st, err := c.Sys().UnsealWithContext(t.Context(), s.UnsealKey)
	if err != nil {
		t.Fatalf("vaulttest: unsealing: %v", err)
	}
	if st.Sealed {
		t.Fatalf("vaulttest: still sealed after the unseal key (progress %d/%d)", st.Progress, st.T)
	}
	deadline := time.Now().Add(time.Minute)
	for s.healthy(t.Context()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("vaulttest: server not active after unseal")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shared is the one server per test binary that Shared hands out.
var shared struct {
	once sync.Once
	srv  *Server
	dir  string
	err  error
	used atomic.Bool
}

// Shared returns the test binary's shared dev server, starting it on first
// use. Call Main from TestMain so it is stopped when the tests end. Tests
// sharing it must not seal or stop it, and should work on their own mount
// (EnableKV). On test failure the server's output is logged.
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	shared.once.Do(func() {
		shared.used.Store(true)
		shared.dir, shared.err = os.MkdirTemp("", "vaulttest-")
		if shared.err != nil {
			return
		}
		shared.srv, shared.err = StartServer(context.Background(), bin, shared.dir, Options{})
	})
	if shared.err != nil {
		t.Fatalf("vaulttest: shared server: %v", shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("vaulttest: output of the shared Vault server at %s:\n%s", shared.srv.Addr, shared.srv.Output())
		}
	})
	return shared.srv
}

// Main runs the tests and then stops the shared server, if one was started.
// Use it as
//
//	func TestMain(m *testing.M) { os.Exit(vaulttest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if shared.used.Load() {
		if shared.srv != nil {
			shared.srv.Stop()
		}
		if shared.dir != "" {
			_ = os.RemoveAll(shared.dir)
		}
	}
	return code
}

// freePort returns a loopback port that is free, and whose successor (the
// dev server's cluster port) is free too.
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1)))
		// A port whose listener did not close is not free.
		cerr := l.Close()
		if err == nil {
			cerr = errors.Join(cerr, l2.Close())
		}
		if err == nil && cerr == nil {
			return port, nil
		}
	}
	return 0, errors.New("no free pair of loopback ports")
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "root-" + hex.EncodeToString(b), nil
}

// cleanEnv is the environment without VAULT_* variables, so a developer's
// own Vault settings do not leak into the dev server.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VAULT_") {
			env = append(env, kv)
		}
	}
	return env
}
