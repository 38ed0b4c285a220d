package vault_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

func TestMain(m *testing.M) { os.Exit(vaulttest.Main(m)) }

// recorder is an http.RoundTripper that counts the requests a store sends:
// writes (the methods that change state), logins and token renewals. It
// also remembers the token of the last request so a test can revoke it.
type recorder struct {
	next http.RoundTripper

	writes    atomic.Int64
	logins    atomic.Int64
	renewals  atomic.Int64
	requests  atomic.Int64
	lastToken atomic.Value // string

	mu      sync.Mutex
	keep    bool          // record headers and paths
	headers []http.Header // of every request, when keep
	paths   []string      // "METHOD /v1/path" of every request, when keep
}

func (r *recorder) wrap(next http.RoundTripper) http.RoundTripper {
	r.next = next
	return r
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.requests.Add(1)
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		r.writes.Add(1)
	}
	switch {
	case strings.HasSuffix(req.URL.Path, "/login"):
		r.logins.Add(1)
	case strings.HasSuffix(req.URL.Path, "/auth/token/renew-self"):
		r.renewals.Add(1)
	}
	if tok := req.Header.Get("X-Vault-Token"); tok != "" {
		r.lastToken.Store(tok)
	}
	r.mu.Lock()
	if r.keep {
		r.headers = append(r.headers, req.Header.Clone())
		r.paths = append(r.paths, req.Method+" "+req.URL.Path)
	}
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

// takePaths returns the recorded paths and forgets them.
func (r *recorder) takePaths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.paths
	r.paths = nil
	return p
}

func (r *recorder) token() string {
	s, _ := r.lastToken.Load().(string)
	return s
}

// unique returns a fresh path segment, so tests sharing a server and mount
// never see each other's secrets.
var uniqueN atomic.Int64

func unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, uniqueN.Add(1))
}

// rootConfig is a config for srv's mount using its root token.
func rootConfig(srv *vaulttest.Server, mount string) vault.Config {
	return vault.Config{
		Address: srv.Addr,
		Mount:   mount,
		Auth:    vault.Auth{Method: "token", Token: edgesecrets.Sensitive(srv.RootToken)},
	}
}

// open opens a store, with the options given or none, and closes it when
// t ends.
func open(t testing.TB, cfg vault.Config, opts ...vault.Options) *secretstore.Store {
	t.Helper()
	var o vault.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	s, err := vault.New(t.Context(), cfg, o)
	require.NoError(t, err, "opening the vault store")
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func d(kv ...string) edgesecrets.Data {
	out := edgesecrets.Data{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = []byte(kv[i+1])
	}
	return out
}

func put(t testing.TB, s *secretstore.Store, name string, data edgesecrets.Data, labels map[string]string) {
	t.Helper()
	_, err := s.Put(t.Context(), &secretstore.Secret{Name: name, Data: data, Labels: labels}, secretstore.PutOptions{})
	require.NoError(t, err, "put %q", name)
}
