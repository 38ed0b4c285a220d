// Package anaxhub runs the agbot half of Open Horizon's anax in a test: anax's
// own secure API (agreementbot.NewSecureAPIListener), unmodified, with an
// anax config file, a bolt agbot database and any secrets plugin, behind a
// loopback proxy that records every request's method, path and HTTP status;
// and the real hzn CLI against it. It is for the anax module's tests only.
package anaxhub

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/open-horizon/anax/agreementbot"
	"github.com/open-horizon/anax/agreementbot/persistence/bolt"
	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/open-horizon/anax/config"
)

// startTimeout bounds how long the secure API may take to accept
// connections after it is started.
const startTimeout = 30 * time.Second

// Options configure one agbot.
type Options struct {
	// Name tells agbots apart in messages ("vault", "edgesecrets").
	Name string
	// Secrets is the plugin the secure API uses; StartAgbot calls its
	// Initialize with the agbot's config. Nil takes the plugin from anax's
	// registry as anax's main does (secrets.InitSecrets: the one
	// registered under SecretsProvider, "vault" when empty). Registered
	// plugins are process-wide singletons: one agbot per plugin at a time.
	// Either way Login follows, as anax's agbot does before it serves.
	Secrets secrets.AgbotSecrets
	// ExchangeURL is the exchange's base URL (a trailing "/" is added
	// when missing: anax appends "orgs/..." to it).
	ExchangeURL string
	// VaultURL is AgreementBot.Vault.VaultURL.
	VaultURL string
	// ExchangeID is the agbot's own exchange id, "org/id".
	ExchangeID string
	// ExchangeToken is the agbot's exchange token.
	ExchangeToken string
	// SecretsProvider and SecretsProviderConfig are the patched anax's
	// AgreementBot fields of the same names; empty leaves them out of
	// the config file.
	SecretsProvider       string
	SecretsProviderConfig string
}

// Request is one request the agbot answered, as its proxy saw it.
type Request struct {
	Method string
	// Path is the request's escaped path, query included.
	Path   string
	Status int
}

// Agbot is a running secure API.
type Agbot struct {
	// URL is what hzn's HZN_AGBOT_URL is set to: the recording proxy.
	URL string
	// Config is the config anax read from the agbot's config file.
	Config *config.HorizonConfig
	// ConfigFile is that file's path.
	ConfigFile string
	// Secrets is the plugin, initialized and logged in.
	Secrets secrets.AgbotSecrets

	mu   sync.Mutex
	reqs []Request
}

// StartAgbot writes an anax config file, reads it with anax's config.Read,
// opens a bolt agbot database in a test directory, initializes and logs in
// opts.Secrets, starts anax's secure API on a free loopback port and waits
// until it accepts connections. The secure API cannot be stopped (anax
// serves it until the process ends); the proxy in front of it and the
// database are closed when t ends.
func StartAgbot(t testing.TB, opts Options) *Agbot {
	t.Helper()
	quietGlog(t)
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		t.Fatalf("anaxhub: %v", err)
	}
	file, err := writeConfig(dir, port, opts)
	if err != nil {
		t.Fatalf("anaxhub: %v", err)
	}
	cfg, err := config.Read(file)
	if err != nil {
		t.Fatalf("anaxhub: anax config.Read: %v", err)
	}

	db := &bolt.AgbotBoltDB{}
	if err := db.Initialize(cfg); err != nil {
		t.Fatalf("anaxhub: bolt agbot database: %v", err)
	}
	t.Cleanup(db.Close)

	if opts.Secrets == nil {
		if opts.Secrets, err = secrets.InitSecrets(cfg); err != nil {
			t.Fatalf("anaxhub: %s: anax secrets.InitSecrets: %v", opts.Name, err)
		}
	} else if err := opts.Secrets.Initialize(cfg); err != nil {
		t.Fatalf("anaxhub: %s plugin Initialize: %v", opts.Name, err)
	}
	if err := opts.Secrets.Login(); err != nil {
		t.Fatalf("anaxhub: %s plugin Login: %v", opts.Name, err)
	}
	if !opts.Secrets.IsReady() {
		t.Fatalf("anaxhub: %s plugin is not ready after Login", opts.Name)
	}
	t.Cleanup(opts.Secrets.Close)

	agreementbot.NewSecureAPIListener("AgBot Secure API "+opts.Name, cfg, db, opts.Secrets)
	target := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitListening(t.Context(), target); err != nil {
		t.Fatalf("anaxhub: %s secure API: %v", opts.Name, err)
	}

	a := &Agbot{Config: cfg, ConfigFile: file, Secrets: opts.Secrets}
	a.URL = a.startProxy(t, target)
	return a
}

// Requests returns the requests answered so far, oldest first.
func (a *Agbot) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.reqs...)
}

// Mark returns the number of requests answered so far, for RequestsSince.
func (a *Agbot) Mark() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs)
}

// RequestsSince returns the requests answered after Mark returned mark.
func (a *Agbot) RequestsSince(mark int) []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.reqs[mark:]...)
}

func (a *Agbot) startProxy(t testing.TB, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("anaxhub: %v", err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	rp.Transport = tr
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(rec, r)
		a.mu.Lock()
		a.reqs = append(a.reqs, Request{Method: r.Method, Path: r.URL.RequestURI(), Status: rec.status})
		a.mu.Unlock()
	}))
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	return srv.URL
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// agbotConfig is the part of anax's config file an agbot's secure API
// reads, spelled as anax's config.HorizonConfig decodes it.
type agbotConfig struct {
	AgreementBot map[string]any `json:"AgreementBot"`
}

func writeConfig(dir string, port int, opts Options) (string, error) {
	exURL := opts.ExchangeURL
	if exURL != "" && exURL[len(exURL)-1] != '/' {
		exURL += "/"
	}
	ab := map[string]any{
		"DBPath":              filepath.Join(dir, "db"),
		"ExchangeURL":         exURL,
		"ExchangeId":          opts.ExchangeID,
		"ExchangeToken":       opts.ExchangeToken,
		"SecureAPIListenHost": "127.0.0.1",
		"SecureAPIListenPort": strconv.Itoa(port),
		"Vault":               map[string]string{"VaultURL": opts.VaultURL},
	}
	if opts.SecretsProvider != "" {
		ab["SecretsProvider"] = opts.SecretsProvider
	}
	if opts.SecretsProviderConfig != "" {
		ab["SecretsProviderConfig"] = opts.SecretsProviderConfig
	}
	b, err := json.MarshalIndent(agbotConfig{AgreementBot: ab}, "", "  ")
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, "anax.config.json")
	// The file holds the agbot's exchange token: owner only.
	return file, os.WriteFile(file, b, 0o600)
}

var glogOnce sync.Once

// quietGlog sends anax's glog output to stderr (kept by go test for
// failing packages) instead of log files in the machine's temp directory.
func quietGlog(t testing.TB) {
	glogOnce.Do(func() {
		if f := flag.Lookup("logtostderr"); f != nil {
			if err := f.Value.Set("true"); err != nil {
				t.Fatalf("anaxhub: glog flag: %v", err)
			}
		}
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }() // only its port was wanted
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitListening(ctx context.Context, target string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodOptions, target+"/org/probe/secrets", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close() // only reachability matters
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not listening at %s after %v: %w", target, startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
