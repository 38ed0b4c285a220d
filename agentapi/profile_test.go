package agentapi_test

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// The Open Horizon profile is checked against open-horizon/anax
// resource/secret_api.go at commit 2f3fa5a506d6565fa68858b7963450567ddda114;
// "anax L<n>" in the cases below cites its lines.

// essID is the ESS id anax gives every instance of a service: the service
// URL (container/container.go line 1310, CreateCredential(agreementId,
// serviceURL, ...)).
const essID = "myorg/com.example.hello"

// essCredentials are ESS credentials as anax's agent has it: instances of
// one service share the id and are told apart by their tokens
// (resource/authentication_manager.go Authenticate, secret_api.go
// FindMSSInstWithESSToken).
type essCredentials map[string]struct{ id, instance string } // token → id, instance

func (c essCredentials) Authenticate(_ context.Context, user, password string) (string, bool) {
	for token, cred := range c {
		if subtle.ConstantTimeCompare([]byte(password), []byte(token)) == 1 && user == cred.id {
			return cred.instance, true
		}
	}
	return "", false
}

var testESS = essCredentials{
	"token-hello":  {essID, "hello"},
	"token-hello2": {essID, "hello2"},
}

var refHello = agreement.ServiceRef{Org: "myorg", URL: "com.example.hello", Arch: "amd64", Version: "1.0.0", Container: "ibm.hello-secret"}
var refHello2 = agreement.ServiceRef{Org: "myorg", URL: "com.example.hello", Arch: "amd64", Version: "1.0.0", Container: "second"}

// newOHFixture serves the Open Horizon profile over a store with two
// instances of one service: hello (hw_who updated to "Everyone", and
// secrets of every other shape) and hello2 (its own hw_who, not updated).
func newOHFixture(t *testing.T, opts agentapi.HandlerOptions) *apiFixture {
	t.Helper()
	s := newOHStore(t)
	opts.OpenHorizon = true
	if opts.Authenticate == nil {
		opts.Authenticate = testESS.Authenticate
	}
	h, err := agentapi.NewHandler(s, opts)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &apiFixture{store: s, server: srv}
}

// newOHStore is newOHFixture's store.
func newOHStore(tb testing.TB) *agentapi.Store {
	tb.Helper()
	ctx := context.Background()
	s, err := agentapi.Open(ctx, agentapi.Options{Root: filepath.Join(tb.TempDir(), "secrets")})
	require.NoError(tb, err)
	tb.Cleanup(func() { s.Close() })
	p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{
		{Service: refHello, Secrets: map[string]agreement.SecretDetails{
			"hw_who": jsonSecret("key", "name", "value", "World"),
			"single": jsonSecret("password", "pw"),
			"multi":  jsonSecret("user", "alice", "password", "p<w"),
			"cert":   rawSecret([]byte("-----BEGIN CERT-----")),
			"binary": rawSecret([]byte{0xff, 0xfe}),
		}},
		{Service: refHello2, Secrets: map[string]agreement.SecretDetails{
			"hw_who": jsonSecret("key", "name", "value", "Second"),
		}},
	}}
	_, err = s.ApplyProposal(ctx, p, agentapi.Instances{refHello: {ID: "hello"}, refHello2: {ID: "hello2"}})
	require.NoError(tb, err)
	payload, err := json.Marshal(agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{Service: refHello,
		Secrets: map[string]agreement.SecretDetails{"hw_who": jsonSecret("key", "name", "value", "Everyone")}}}})
	require.NoError(tb, err)
	_, err = s.ApplyUpdate(ctx, agreement.Update{AgreementID: "ag-1", Kind: agreement.UpdateKindSecrets, Payload: payload})
	require.NoError(tb, err)
	return s
}

func TestOpenHorizonProfileRoutes(t *testing.T) {
	f := newOHFixture(t, agentapi.HandlerOptions{MaxBodyBytes: 64})
	const (
		hello, helloToken = essID, "token-hello"
	)
	tests := []struct {
		name         string
		method, path string
		user, token  string
		body         io.Reader
		status       int
		wantBody     string // exact body
		wantJSON     string // JSON body, compared as JSON
		allow        string
	}{
		// GET /api/v1/secrets: anax L108-147.
		{name: "list updated (L137-145, indented)", method: "GET", path: "/api/v1/secrets", user: hello, token: helloToken, status: 200, wantBody: "[\n  \"hw_who\"\n]"},
		{name: "list with nothing updated (L134-136, no body)", method: "GET", path: "/api/v1/secrets", user: essID, token: "token-hello2", status: 404},
		{name: "list with another method, before credentials (L112-115)", method: "POST", path: "/api/v1/secrets", status: 405, allow: "GET"},
		{name: "list without credentials (L123-127)", method: "GET", path: "/api/v1/secrets", status: 403, wantBody: "Unauthorized"},
		{name: "list with a wrong token", method: "GET", path: "/api/v1/secrets", user: hello, token: "token-hello-", status: 403, wantBody: "Unauthorized"},
		{name: "list with a known token under another id", method: "GET", path: "/api/v1/secrets", user: "myorg/other", token: helloToken, status: 403, wantBody: "Unauthorized"},

		// GET /api/v1/secrets/{name}: anax L303-330.
		{name: "get key/value (L314-327)", method: "GET", path: "/api/v1/secrets/hw_who", user: hello, token: helloToken, status: 200,
			wantBody: "{\n  \"key\": \"name\",\n  \"value\": \"Everyone\"\n}"},
		{name: "get another instance's same name: its own value", method: "GET", path: "/api/v1/secrets/hw_who", user: essID, token: "token-hello2", status: 200,
			wantJSON: `{"key":"name","value":"Second"}`},
		{name: "get a one-entry secret", method: "GET", path: "/api/v1/secrets/single", user: hello, token: helloToken, status: 200, wantJSON: `{"key":"password","value":"pw"}`},
		{name: "get a several-entry secret", method: "GET", path: "/api/v1/secrets/multi", user: hello, token: helloToken, status: 200,
			wantJSON: `{"key":"","value":"{\"password\":\"p<w\",\"user\":\"alice\"}"}`},
		{name: "get a raw secret", method: "GET", path: "/api/v1/secrets/cert", user: hello, token: helloToken, status: 200, wantJSON: `{"key":"","value":"-----BEGIN CERT-----"}`},
		{name: "get a binary raw secret", method: "GET", path: "/api/v1/secrets/binary", user: hello, token: helloToken, status: 500},
		{name: "get an unknown name (L311-312)", method: "GET", path: "/api/v1/secrets/nope", user: hello, token: helloToken, status: 404, wantBody: "Secret not found.\n"},
		{name: "get an escaping name: a non-canonical path (handler.go)", method: "GET", path: "/api/v1/secrets/..", user: hello, token: helloToken, status: 400, wantBody: "the request path has a \"..\" segment\n"},
		{name: "get without credentials, before the name (L162-168)", method: "GET", path: "/api/v1/secrets/", status: 403, wantBody: "Unauthorized"},
		{name: "get an empty name (L186-191)", method: "GET", path: "/api/v1/secrets/", user: hello, token: helloToken, status: 400},
		{name: "get a nested name (L335-338)", method: "GET", path: "/api/v1/secrets/hw_who/x", user: hello, token: helloToken, status: 400},
		{name: "another method, after credentials (L332-333)", method: "PUT", path: "/api/v1/secrets/hw_who", user: hello, token: helloToken, status: 405, allow: "GET, POST"},
		{name: "another method without credentials", method: "DELETE", path: "/api/v1/secrets/hw_who", status: 403, wantBody: "Unauthorized"},

		// POST /api/v1/secrets/{name}?received=true: anax L233-262.
		{name: "acknowledge (L252-259)", method: "POST", path: "/api/v1/secrets/cert?received=true", user: hello, token: helloToken, status: 201},
		{name: "acknowledge, received=1 (strconv.ParseBool, L239)", method: "POST", path: "/api/v1/secrets/cert?received=1", user: hello, token: helloToken, status: 201},
		{name: "received=false (L239-242)", method: "POST", path: "/api/v1/secrets/cert?received=false", user: hello, token: helloToken, status: 400},
		{name: "received not a bool (L239-242)", method: "POST", path: "/api/v1/secrets/cert?received=yes", user: hello, token: helloToken, status: 400},
		{name: "received missing: 400, where anax answers 200 and records nothing (L237)", method: "POST", path: "/api/v1/secrets/cert", user: hello, token: helloToken, status: 400},
		{name: "acknowledge an unknown name (L249-250)", method: "POST", path: "/api/v1/secrets/nope?received=true", user: hello, token: helloToken, status: 404, wantBody: "Secret not found.\n"},

		// Outside the API.
		{name: "the design route is not served", method: "GET", path: "/secrets", user: hello, token: helloToken, status: 404},
		{name: "look-alike path", method: "GET", path: "/api/v1/secretsX", user: hello, token: helloToken, status: 404},
		{name: "body over the limit", method: "POST", path: "/api/v1/secrets/cert?received=true", user: hello, token: helloToken,
			body: strings.NewReader(strings.Repeat("x", 65)), status: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.path, tt.user, tt.token, tt.body)
			require.Equal(t, tt.status, r.status, "body: %s", r.body)
			assert.Equal(t, tt.allow, r.header.Get("Allow"))
			if tt.status != 201 {
				assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
			}
			switch {
			case tt.wantBody != "":
				assert.Equal(t, tt.wantBody, string(r.body))
			case tt.wantJSON != "":
				assert.JSONEq(t, tt.wantJSON, string(r.body))
			case tt.status == 201 || tt.status == 405 || tt.path == "/api/v1/secrets" && tt.status == 404:
				assert.Empty(t, r.body)
			default:
				assert.NotEmpty(t, r.body, "errors say what was wrong")
			}
			if tt.status == 200 {
				assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			}
			assert.NotContains(t, string(r.body), "token-")
		})
	}
}

// The service's cycle of helloSecretWorld (open-horizon/examples
// edge/services/helloSecretWorld/service.sh lines 79-102): list, read,
// acknowledge; then the list is empty.
func TestOpenHorizonProfileAcknowledgeClearsTheList(t *testing.T) {
	f := newOHFixture(t, agentapi.HandlerOptions{})
	r := f.do(t, "GET", "/api/v1/secrets", essID, "token-hello", nil)
	require.Equal(t, 200, r.status)
	var names []string
	require.NoError(t, json.Unmarshal(r.body, &names))
	for _, n := range names {
		require.Equal(t, 200, f.do(t, "GET", "/api/v1/secrets/"+url.PathEscape(n), essID, "token-hello", nil).status)
		require.Equal(t, 201, f.do(t, "POST", "/api/v1/secrets/"+url.PathEscape(n)+"?received=true", essID, "token-hello", nil).status)
	}
	assert.Equal(t, 404, f.do(t, "GET", "/api/v1/secrets", essID, "token-hello", nil).status)
	info, _ := f.store.Instance("hello")
	assert.Equal(t, []string{"hw_who"}, info.Acknowledged)
}

// Both profiles can serve one store side by side, and the Open Horizon
// profile works with instance-id tokens and a prefix too.
func TestProfilesSideBySide(t *testing.T) {
	s := openStore(t, agentapi.Options{})
	applyTwoServices(t, s)
	design, err := agentapi.NewHandler(s, agentapi.HandlerOptions{Authenticate: testTokens.Authenticate})
	require.NoError(t, err)
	oh, err := agentapi.NewHandler(s, agentapi.HandlerOptions{OpenHorizon: true, Authenticate: testTokens.Authenticate, Prefix: "/ess"})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/secrets", design)
	mux.Handle("/secrets/", design)
	mux.Handle("/ess/", oh)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f := &apiFixture{store: s, server: srv}

	r := f.do(t, "GET", "/secrets/cert", "a", "token-a", nil)
	require.Equal(t, 200, r.status)
	assert.JSONEq(t, `{"cert":{"details":"`+details("-----BEGIN CERT A-----")+`"}}`, string(r.body))
	r = f.do(t, "GET", "/ess/api/v1/secrets/cert", "a", "token-a", nil)
	require.Equal(t, 200, r.status)
	assert.JSONEq(t, `{"key":"","value":"-----BEGIN CERT A-----"}`, string(r.body))
	// The same failures, each profile's status.
	assert.Equal(t, 401, f.do(t, "GET", "/secrets/cert", "a", "wrong", nil).status)
	assert.Equal(t, 403, f.do(t, "GET", "/ess/api/v1/secrets/cert", "a", "wrong", nil).status)
	assert.Equal(t, 400, f.do(t, "GET", "/secrets/token", "a", "token-a", nil).status)
	assert.Equal(t, 404, f.do(t, "GET", "/ess/api/v1/secrets/token", "a", "token-a", nil).status)
}

// FuzzOpenHorizonPath sends arbitrary methods, paths and queries as
// instance hello and checks that every answer is one of the profile's, and
// that a 200 only ever carries one of hello's own secrets.
func FuzzOpenHorizonPath(f *testing.F) {
	for _, seed := range []struct{ method, path, query string }{
		{"GET", "/api/v1/secrets", ""}, {"GET", "/api/v1/secrets/hw_who", ""}, {"POST", "/api/v1/secrets/hw_who", "received=true"},
		{"GET", "/api/v1/secrets/../b", ""}, {"GET", "/api/v1/secrets//x", ""}, {"POST", "/api/v1/secrets/x", "received=T"},
		{"PATCH", "/api/v1/secrets", ""}, {"GET", "/", ""}, {"GET", "/api/v1/secrets/multi", ""},
	} {
		f.Add(seed.method, seed.path, seed.query)
	}
	h, err := agentapi.NewHandler(newOHStore(f), agentapi.HandlerOptions{OpenHorizon: true, Authenticate: testESS.Authenticate})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, method, path, query string) {
		req := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{}, Body: http.NoBody}
		req = req.WithContext(context.Background())
		req.SetBasicAuth(essID, "token-hello")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		assert.NotContains(t, w.Body.String(), "Second", "hello2's value")
		switch w.Code {
		case 200:
			require.Equal(t, "GET", method)
			if path == "/api/v1/secrets" {
				return
			}
			var d struct{ Key, Value string }
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &d))
		case 201:
			require.Equal(t, "POST", method)
		case 400, 403, 404, 405, 413, 500:
		default:
			t.Fatalf("status %d outside the profile for %s %q", w.Code, method, path)
		}
	})
}

// A secret written the Open Horizon way ({"key","value"}) and delivered in
// a format whose file holds the value only is answered with the key it was
// delivered with, as anax answers the key/value it received whatever the
// file format (persistence/secrets.go line 46, resource/secrets_manager.go
// lines 428-435, secret_api.go lines 300-311): after the proposal, after an
// update that changes only the key, and after the store is reopened. The
// file holds the value alone.
func TestOpenHorizonProfileAnswersTheDeliveredKey(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "secrets")
	oh := func(format, key, value string) agreement.SecretDetails {
		return agreement.SecretDetails{Format: format, Data: edgesecrets.Data{"key": []byte(key), "value": []byte(value)}}
	}
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root})
	require.NoError(t, err)
	_, err = s.ApplyProposal(ctx, agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{Service: refHello,
		Secrets: map[string]agreement.SecretDetails{
			"value_only": oh(agreement.FormatValueOnly, "api-user", "v-s3cr3t"),
			"raw":        oh(agreement.FormatRaw, "cert-name", "r-s3cr3t"),
			"json":       oh(agreement.FormatJSON, "j-name", "j-s3cr3t"),
			"one_key":    {Format: agreement.FormatRaw, Data: edgesecrets.Data{"password": []byte("p-s3cr3t")}},
			"json_value": oh(agreement.FormatValueOnly, "k", `{"a":"b"}`),
		}}}}, agentapi.Instances{refHello: {ID: "hello"}})
	require.NoError(t, err)

	get := func(t *testing.T, s *agentapi.Store, name string) string {
		t.Helper()
		h, err := agentapi.NewHandler(s, agentapi.HandlerOptions{OpenHorizon: true, Authenticate: testESS.Authenticate})
		require.NoError(t, err)
		srv := httptest.NewServer(h)
		defer srv.Close()
		r := (&apiFixture{store: s, server: srv}).do(t, "GET", "/api/v1/secrets/"+name, essID, "token-hello", nil)
		require.Equal(t, 200, r.status, "body: %s", r.body)
		return string(r.body)
	}
	want := map[string]string{
		"value_only": `{"key":"api-user","value":"v-s3cr3t"}`,
		"raw":        `{"key":"cert-name","value":"r-s3cr3t"}`,
		"json":       `{"key":"j-name","value":"j-s3cr3t"}`,
		"one_key":    `{"key":"password","value":"p-s3cr3t"}`,
		"json_value": `{"key":"k","value":"{\"a\":\"b\"}"}`, // the file's content as it is, not parsed
	}
	check := func(t *testing.T, s *agentapi.Store, when string) {
		for name, body := range want {
			assert.JSONEq(t, body, get(t, s, name), "%s %s", when, name)
		}
	}
	check(t, s, "after the proposal:")
	assert.Equal(t, "v-s3cr3t", string(mustRead(t, mountFile(t, s, "hello", "value_only"))), "the file holds the value only")

	// The key alone changes: the file stays, the answer follows.
	_, err = s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refHello,
		Secrets: map[string]agreement.SecretDetails{"value_only": oh(agreement.FormatValueOnly, "api-user-2", "v-s3cr3t")}}))
	require.NoError(t, err)
	want["value_only"] = `{"key":"api-user-2","value":"v-s3cr3t"}`
	check(t, s, "after a key-only update:")
	require.NoError(t, s.Close())

	s, err = agentapi.Open(ctx, agentapi.Options{Root: root})
	require.NoError(t, err)
	defer s.Close()
	check(t, s, "after reopening:")

	// The key is kept in the agent's metadata, not beside the value.
	files, err := filepath.Glob(filepath.Join(mountFile(t, s, "hello", "value_only"), "..", "*"))
	require.NoError(t, err)
	for _, f := range files {
		assert.NotContains(t, string(mustRead(t, f)), "api-user-2", "file %s", f)
	}
}
