package agentapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// testTokens gives instances a and b their tokens; no test changes it.
var testTokens = func() *agentapi.TokenTable {
	t := &agentapi.TokenTable{}
	for id, token := range map[string]string{"a": "token-a", "b": "token-b"} {
		if err := t.Set(id, token); err != nil {
			panic(err)
		}
	}
	return t
}()

// apiFixture is a store with instances a and b, a's password updated, and
// the API served over loopback.
type apiFixture struct {
	store  *agentapi.Store
	server *httptest.Server
}

func newAPIFixture(t *testing.T, opts agentapi.HandlerOptions) *apiFixture {
	t.Helper()
	s := openStore(t, agentapi.Options{})
	applyTwoServices(t, s)
	_, err := s.ApplyUpdate(context.Background(), secretsUpdate(t, agreement.ServiceSecrets{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"password": jsonSecret("user", "alice", "password", "rotated-A")}}))
	require.NoError(t, err)
	if opts.Authenticate == nil {
		opts.Authenticate = testTokens.Authenticate
	}
	h, err := agentapi.NewHandler(s, opts)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &apiFixture{store: s, server: srv}
}

type apiResponse struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request; user "" sends no credentials.
func (f *apiFixture) do(t *testing.T, method, path, user, token string, body io.Reader) apiResponse {
	t.Helper()
	req, err := http.NewRequest(method, f.server.URL+path, body)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, token)
	}
	resp, err := f.server.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return apiResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

func details(content string) string {
	return base64.StdEncoding.EncodeToString([]byte(content))
}

func TestHandlerStatusCodes(t *testing.T) {
	f := newAPIFixture(t, agentapi.HandlerOptions{MaxBodyBytes: 64})
	tests := []struct {
		name          string
		method, path  string
		user, token   string
		body          io.Reader
		status        int
		wantBody      string // exact JSON body for successes
		wantErr       string // part of the "error" sentence for failures
		allow, wwwAut string
	}{
		{name: "list updated", method: "GET", path: "/secrets", user: "a", token: "token-a", status: 200, wantBody: `["password"]`},
		{name: "list with nothing updated", method: "GET", path: "/secrets", user: "b", token: "token-b", status: 404, wantErr: "no secrets have been updated"},
		{name: "get secret", method: "GET", path: "/secrets/password", user: "a", token: "token-a", status: 200,
			wantBody: `{"password":{"details":"` + details(`{"password":"rotated-A","user":"alice"}`) + `"}}`},
		{name: "get raw secret", method: "GET", path: "/secrets/cert", user: "a", token: "token-a", status: 200,
			wantBody: `{"cert":{"details":"` + details("-----BEGIN CERT A-----") + `"}}`},
		{name: "get another service's secret", method: "GET", path: "/secrets/token", user: "a", token: "token-a", status: 400, wantErr: `"token" is not a secret of this service`},
		{name: "get unknown secret", method: "GET", path: "/secrets/nope", user: "a", token: "token-a", status: 400, wantErr: "is not a secret"},
		{name: "get empty name", method: "GET", path: "/secrets/", user: "a", token: "token-a", status: 400, wantErr: "empty segment"},
		{name: "get escaping name", method: "GET", path: "/secrets/..%2Fb%2Ftoken", user: "a", token: "token-a", status: 400, wantErr: "escaped slash"},
		{name: "get nested name", method: "GET", path: "/secrets/password/x", user: "a", token: "token-a", status: 400, wantErr: "is not a secret"},
		{name: "acknowledge", method: "POST", path: "/secrets/cert?received=true", user: "a", token: "token-a", status: 201},
		{name: "acknowledge another service's secret", method: "POST", path: "/secrets/token?received=true", user: "a", token: "token-a", status: 400, wantErr: "is not a secret"},
		{name: "acknowledge without received", method: "POST", path: "/secrets/cert", user: "a", token: "token-a", status: 400, wantErr: "received must be true"},
		{name: "acknowledge with received=false", method: "POST", path: "/secrets/cert?received=false", user: "a", token: "token-a", status: 400, wantErr: "received must be true"},
		{name: "acknowledge with two received", method: "POST", path: "/secrets/cert?received=true&received=true", user: "a", token: "token-a", status: 400, wantErr: "received must be true"},
		{name: "POST on the list", method: "POST", path: "/secrets", user: "a", token: "token-a", status: 405, allow: "GET", wantErr: "method POST is not allowed"},
		{name: "PUT on a secret", method: "PUT", path: "/secrets/cert", user: "a", token: "token-a", status: 405, allow: "GET, POST", wantErr: "method PUT is not allowed"},
		{name: "DELETE on a secret", method: "DELETE", path: "/secrets/cert", user: "a", token: "token-a", status: 405, allow: "GET, POST", wantErr: "not allowed"},
		{name: "no credentials", method: "GET", path: "/secrets", status: 401, wwwAut: `Basic realm="secrets", charset="UTF-8"`, wantErr: "missing or bad credentials"},
		{name: "wrong token", method: "GET", path: "/secrets", user: "a", token: "token-b", status: 401, wantErr: "missing or bad credentials"},
		{name: "token prefix", method: "GET", path: "/secrets", user: "a", token: "token-", status: 401, wantErr: "missing or bad credentials"},
		{name: "unknown instance", method: "GET", path: "/secrets", user: "zz", token: "token-a", status: 401, wantErr: "missing or bad credentials"},
		{name: "instance without a token", method: "GET", path: "/secrets", user: "empty", token: "", status: 401, wantErr: "missing or bad credentials"},
		{name: "no credentials on a wrong method", method: "DELETE", path: "/secrets/cert", status: 401, wantErr: "missing or bad credentials"},
		{name: "unknown path", method: "GET", path: "/other", user: "a", token: "token-a", status: 404, wantErr: "no such API path"},
		{name: "look-alike path", method: "GET", path: "/secretsX", user: "a", token: "token-a", status: 404, wantErr: "no such API path"},
		{name: "body over the limit", method: "POST", path: "/secrets/cert?received=true", user: "a", token: "token-a",
			body: strings.NewReader(strings.Repeat("x", 65)), status: 413, wantErr: "larger than 64 bytes"},
		{name: "chunked body over the limit", method: "POST", path: "/secrets/cert?received=true", user: "a", token: "token-a",
			body: io.LimitReader(neverEnding('x'), 1000), status: 413, wantErr: "larger than 64 bytes"},
		{name: "body within the limit", method: "POST", path: "/secrets/cert?received=true", user: "a", token: "token-a",
			body: strings.NewReader("{}"), status: 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.path, tt.user, tt.token, tt.body)
			require.Equal(t, tt.status, r.status, "body: %s", r.body)
			assert.Equal(t, tt.allow, r.header.Get("Allow"))
			if tt.wwwAut != "" {
				assert.Equal(t, tt.wwwAut, r.header.Get("WWW-Authenticate"))
			}
			switch {
			case tt.status == 201:
				assert.Empty(t, r.body)
			case tt.wantBody != "":
				assert.Equal(t, "application/json", r.header.Get("Content-Type"))
				assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
				assert.JSONEq(t, tt.wantBody, string(r.body))
			default:
				assert.Equal(t, "application/json", r.header.Get("Content-Type"))
				var e struct{ Error string }
				require.NoError(t, json.Unmarshal(r.body, &e), "error body is not JSON: %s", r.body)
				assert.Contains(t, e.Error, tt.wantErr)
			}
		})
	}
}

// neverEnding yields one byte forever; with an unknown length the client
// sends it chunked.
type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestHandlerTokenLookupUnavailable(t *testing.T) {
	f := newAPIFixture(t, agentapi.HandlerOptions{Authenticate: (&agentapi.TokenTable{}).Authenticate})
	r := f.do(t, "GET", "/secrets", "a", "token-a", nil)
	assert.Equal(t, http.StatusUnauthorized, r.status)
}

func TestServiceCannotReadAnotherInstance(t *testing.T) {
	f := newAPIFixture(t, agentapi.HandlerOptions{})
	attempts := []struct {
		name        string
		method      string
		path        string
		user, token string
		status      int
	}{
		{"own credentials, other's name", "GET", "/secrets/token", "a", "token-a", 400},
		{"own token, other's id", "GET", "/secrets/token", "b", "token-a", 401},
		{"traversal to the other's directory", "GET", "/secrets/..%2Fb%2Ftoken", "a", "token-a", 400},
		{"traversal with dots", "GET", "/secrets/%2E%2E%2Fb%2Ftoken", "a", "token-a", 400},
		{"acknowledge the other's name", "POST", "/secrets/token?received=true", "a", "token-a", 400},
	}
	for _, tt := range attempts {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.path, tt.user, tt.token, nil)
			assert.Equal(t, tt.status, r.status)
			assert.NotContains(t, string(r.body), "token-of-B")
			assert.NotContains(t, string(r.body), details("token-of-B"))
		})
	}
	// A link planted in a's directory, pointing at b's file: a name the
	// instance's metadata does not list is never served.
	require.NoError(t, os.Symlink(filepath.Join("..", "b", "token"), mountFile(t, f.store, "a", "link")))
	r := f.do(t, "GET", "/secrets/link", "a", "token-a", nil)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.NotContains(t, string(r.body), details("token-of-B"))

	// One of a's own files replaced by such a link is not followed either.
	cert := mountFile(t, f.store, "a", "cert")
	require.NoError(t, os.Remove(cert))
	require.NoError(t, os.Symlink(filepath.Join("..", "b", "token"), cert))
	r = f.do(t, "GET", "/secrets/cert", "a", "token-a", nil)
	assert.Equal(t, http.StatusInternalServerError, r.status)
	assert.NotContains(t, string(r.body), details("token-of-B"))

	// b itself can read it.
	r = f.do(t, "GET", "/secrets/token", "b", "token-b", nil)
	require.Equal(t, 200, r.status)
	assert.JSONEq(t, `{"token":{"details":"`+details("token-of-B")+`"}}`, string(r.body))
}

func TestPostWithoutGetClearsName(t *testing.T) {
	f := newAPIFixture(t, agentapi.HandlerOptions{})
	r := f.do(t, "POST", "/secrets/password?received=true", "a", "token-a", nil)
	require.Equal(t, http.StatusCreated, r.status)
	r = f.do(t, "GET", "/secrets", "a", "token-a", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	info, _ := f.store.Instance("a")
	assert.Equal(t, []string{"password"}, info.Acknowledged)
	// Acknowledging again, or a name that was never updated, is fine.
	assert.Equal(t, http.StatusCreated, f.do(t, "POST", "/secrets/password?received=true", "a", "token-a", nil).status)
	assert.Equal(t, http.StatusCreated, f.do(t, "POST", "/secrets/cert?received=true", "a", "token-a", nil).status)
}

func TestGetSecretsAfterServiceRestart(t *testing.T) {
	f := newAPIFixture(t, agentapi.HandlerOptions{})
	require.Equal(t, http.StatusOK, f.do(t, "GET", "/secrets", "a", "token-a", nil).status)
	require.NoError(t, f.store.ServiceRestarted(context.Background(), "a"))
	assert.Equal(t, http.StatusNotFound, f.do(t, "GET", "/secrets", "a", "token-a", nil).status)
	// The newest value is what the file (the mount) and the API hold.
	r := f.do(t, "GET", "/secrets/password", "a", "token-a", nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, string(r.body), details(`{"password":"rotated-A","user":"alice"}`))
}

func TestHandlerMountedUnderPrefix(t *testing.T) {
	s := openStore(t, agentapi.Options{})
	applyTwoServices(t, s)
	withPrefix, err := agentapi.NewHandler(s, agentapi.HandlerOptions{Authenticate: testTokens.Authenticate, Prefix: "/api/v1"})
	require.NoError(t, err)
	plain, err := agentapi.NewHandler(s, agentapi.HandlerOptions{Authenticate: testTokens.Authenticate})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", withPrefix)
	mux.Handle("/ess/", http.StripPrefix("/ess", plain))
	mux.HandleFunc("/hello", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := &apiFixture{store: s, server: srv}

	for _, p := range []string{"/api/v1/secrets/cert", "/ess/secrets/cert"} {
		r := f.do(t, "GET", p, "a", "token-a", nil)
		assert.Equal(t, http.StatusOK, r.status, p)
		assert.Contains(t, string(r.body), details("-----BEGIN CERT A-----"))
	}
	assert.Equal(t, http.StatusNotFound, f.do(t, "GET", "/api/v1/secrets", "a", "token-a", nil).status)
	assert.Equal(t, http.StatusNotFound, f.do(t, "GET", "/api/v1/other", "a", "token-a", nil).status)
	assert.Equal(t, "hello", string(f.do(t, "GET", "/hello", "", "", nil).body))

	for _, prefix := range []string{"api", "/api/"} {
		_, err := agentapi.NewHandler(s, agentapi.HandlerOptions{Authenticate: testTokens.Authenticate, Prefix: prefix})
		assert.Error(t, err, prefix)
	}
	_, err = agentapi.NewHandler(s, agentapi.HandlerOptions{})
	assert.ErrorContains(t, err, "Authenticate is nil")
}

// FuzzHandlerPath sends arbitrary methods, paths and queries, always as
// instance a, and checks the answer is one of the contract's, that errors are
// JSON, and that a 200 only ever carries one of a's own secrets.
func FuzzHandlerPath(f *testing.F) {
	for _, seed := range []struct{ method, path, query string }{
		{"GET", "/secrets", ""}, {"GET", "/secrets/password", ""}, {"GET", "/secrets/token", ""},
		{"POST", "/secrets/cert", "received=true"}, {"GET", "/secrets/../b/token", ""},
		{"GET", "/secrets/./cert", ""}, {"GET", "/secrets//cert", ""}, {"GET", "/secrets/cert\x00", ""},
		{"PATCH", "/secrets", "received=true"}, {"GET", "/", ""}, {"POST", "/secrets/password", "received=%74rue"},
	} {
		f.Add(seed.method, seed.path, seed.query)
	}
	s, err := agentapi.Open(context.Background(), agentapi.Options{Root: f.TempDir() + "/secrets"})
	require.NoError(f, err)
	defer s.Close()
	p, inst := twoServiceProposal()
	_, err = s.ApplyProposal(context.Background(), p, inst)
	require.NoError(f, err)
	h, err := agentapi.NewHandler(s, agentapi.HandlerOptions{Authenticate: testTokens.Authenticate})
	require.NoError(f, err)
	own := map[string]bool{"password": true, "cert": true}

	f.Fuzz(func(t *testing.T, method, path, query string) {
		req := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{}, Body: http.NoBody}
		req = req.WithContext(context.Background())
		req.SetBasicAuth("a", "token-a")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)

		body := w.Body.String()
		assert.NotContains(t, body, details("token-of-B"))
		switch w.Code {
		case 200:
			require.Equal(t, "GET", method)
			var m map[string]struct{ Details string }
			if path == "/secrets" {
				return
			}
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m), body)
			require.Len(t, m, 1)
			for name := range m {
				assert.True(t, own[name], "200 for %q", name)
				assert.Equal(t, "/secrets/"+name, path)
			}
		case 201:
			require.Equal(t, "POST", method)
			assert.True(t, own[strings.TrimPrefix(path, "/secrets/")])
		case 400, 404, 405, 413:
			var e struct{ Error string }
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e), body)
			assert.NotEmpty(t, e.Error)
		default:
			t.Fatalf("status %d outside the contract for %s %q", w.Code, method, path)
		}
	})
}
