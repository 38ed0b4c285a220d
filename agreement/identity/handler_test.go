package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adminToken is what the test's revoke hook accepts.
const adminToken = "Bearer admin-7c1e"

func authorizeAdmin(r *http.Request, id Identity) error {
	switch r.Header.Get("Authorization") {
	case "":
		return ErrUnauthenticated
	case adminToken:
		return nil
	}
	return errors.New("token not allowed to revoke " + id.String())
}

type server struct {
	*testHub
	srv    *httptest.Server
	client *Client
}

func newServer(t *testing.T, authorizeRevoke func(*http.Request, Identity) error) *server {
	t.Helper()
	h := newHub(t)
	srv := httptest.NewServer(h.Handler(authorizeRevoke))
	t.Cleanup(srv.Close)
	client, err := NewClient(ClientOptions{BaseURL: srv.URL})
	require.NoError(t, err)
	return &server{testHub: h, srv: srv, client: client}
}

func (s *server) do(t *testing.T, method, path string, body []byte, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, out
}

func TestHandlerRegisterRefreshRevoke(t *testing.T) {
	ctx := context.Background()
	s := newServer(t, authorizeAdmin)
	k := newAgentKeys(t)

	body, err := registerRequest(t, k, testID, "good", now()).Body()
	require.NoError(t, err)
	resp, raw := s.do(t, http.MethodPost, "/instance", body)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(raw))
	assert.Equal(t, testID.path(), resp.Header.Get("Location"))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	a, err := decodeResponseBody(bytes.NewReader(raw))
	require.NoError(t, err)
	assert.Equal(t, s.record(t, testID).CurrentSerial, a.Serial)

	b, err := s.client.refresh(ctx, testID, refreshRequest(t, k, testID, a, now()))
	require.NoError(t, err)
	assert.Equal(t, b.Serial, s.record(t, testID).CurrentSerial)
	assert.Equal(t, a.Serial, s.record(t, testID).PreviousSerial)

	admin, err := NewClient(ClientOptions{BaseURL: s.srv.URL, PrepareRequest: func(r *http.Request) error {
		r.Header.Set("Authorization", adminToken)
		return nil
	}})
	require.NoError(t, err)
	require.NoError(t, admin.Revoke(ctx, testID))
	assert.True(t, s.record(t, testID).Revoked)

	_, err = s.client.refresh(ctx, testID, refreshRequest(t, k, testID, b, now()))
	require.ErrorIs(t, err, ErrForbidden)
	require.ErrorIs(t, err, ErrRevoked, "the client maps the revoked reason back")
}

func TestHandlerUnknownSerialRevokesThen403(t *testing.T) {
	ctx := context.Background()
	s := newServer(t, nil)
	k := newAgentKeys(t)
	a, err := s.client.register(ctx, registerRequest(t, k, testID, "good", now()))
	require.NoError(t, err)
	b, err := s.client.refresh(ctx, testID, refreshRequest(t, k, testID, a, now()))
	require.NoError(t, err)
	c, err := s.client.refresh(ctx, testID, refreshRequest(t, k, testID, b, now()))
	require.NoError(t, err)

	body, err := json.Marshal(refreshRequest(t, k, testID, a, now())) // a: neither current (c) nor previous (b)
	require.NoError(t, err)
	resp, raw := s.do(t, http.MethodPost, testID.path(), body)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	var eb errorBody
	require.NoError(t, json.Unmarshal(raw, &eb))
	assert.Equal(t, reasonRevoked, eb.Reason)
	assert.Contains(t, eb.Error, "instance revoked")
	assert.True(t, s.record(t, testID).Revoked)

	body, err = json.Marshal(refreshRequest(t, k, testID, c, now()))
	require.NoError(t, err)
	resp, _ = s.do(t, http.MethodPost, testID.path(), body)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a later refresh with the current certificate is refused too")
}

func TestHandlerErrors(t *testing.T) {
	s := newServer(t, authorizeAdmin)
	k := newAgentKeys(t)
	registerBody := func(att Attestation) []byte {
		b, err := registerRequest(t, k, testID, att, now()).Body()
		require.NoError(t, err)
		return b
	}
	cases := []struct {
		name    string
		method  string
		path    string
		body    []byte
		header  []string
		status  int
		msg     string
		allow   string
		notInIt string
	}{
		{name: "GET /instance", method: http.MethodGet, path: "/instance", status: 405, allow: "POST", msg: "method GET not allowed"},
		{name: "PUT instance", method: http.MethodPut, path: testID.path(), status: 405, allow: "POST, DELETE"},
		{name: "unknown path", method: http.MethodPost, path: "/instances", status: 404, msg: "no such resource"},
		{name: "too few elements", method: http.MethodPost, path: "/instance/a/b/c", status: 404},
		{name: "too many elements", method: http.MethodDelete, path: "/instance/a/b/c/d/e", status: 404},
		{name: "bad element", method: http.MethodPost, path: "/instance/a/b%2Fx/c/d", status: 400, msg: "org has a character outside"},
		{name: "dot element", method: http.MethodDelete, path: "/instance/a/../c/d", status: 400, msg: `org ".." is not a name`},
		{name: "not JSON", method: http.MethodPost, path: "/instance", body: []byte("{"), status: 400, msg: "unexpected end of input"},
		{name: "unknown field", method: http.MethodPost, path: "/instance", body: []byte(`{"provider":"p","bogus":1}`), status: 400, msg: `unknown field "bogus"`},
		{name: "trailing data", method: http.MethodPost, path: "/instance", body: append(registerBody("good"), []byte(" {}")...), status: 400, msg: "trailing data"},
		{name: "body too large", method: http.MethodPost, path: "/instance", body: bytes.Repeat([]byte(" "), maxBodyBytes+1), status: 413},
		{name: "attestor refusal", method: http.MethodPost, path: "/instance", body: registerBody("forged"), status: 403, msg: "the attestor refused the attestation", notInIt: "ref-7f3a"},
		{name: "refresh unknown instance", method: http.MethodPost, path: testID.path(), body: []byte(`{}`), status: 400, msg: "missing"},
		{name: "revoke without credentials", method: http.MethodDelete, path: testID.path(), status: 401, msg: "not authenticated"},
		{name: "revoke with a weak token", method: http.MethodDelete, path: testID.path(), header: []string{"Authorization", "Bearer user"}, status: 403, msg: "may not revoke", notInIt: "token not allowed"},
		{name: "revoke unknown instance", method: http.MethodDelete, path: testID.path(), header: []string{"Authorization", adminToken}, status: 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, raw := s.do(t, tc.method, tc.path, tc.body, tc.header...)
			assert.Equal(t, tc.status, resp.StatusCode, string(raw))
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var eb errorBody
			require.NoError(t, json.Unmarshal(raw, &eb), string(raw))
			assert.Contains(t, eb.Error, tc.msg)
			if tc.allow != "" {
				assert.Equal(t, tc.allow, resp.Header.Get("Allow"))
			}
			if tc.notInIt != "" {
				assert.NotContains(t, string(raw), tc.notInIt, "plug-in error text stays at the hub")
			}
		})
	}
}

func TestHandlerRevokeDisabledByDefault(t *testing.T) {
	s := newServer(t, nil)
	k := newAgentKeys(t)
	s.register(t, k, testID)
	resp, raw := s.do(t, http.MethodDelete, testID.path(), nil, "Authorization", adminToken)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, string(raw), "revocation over HTTP is not enabled")
	assert.False(t, s.record(t, testID).Revoked)
}

func TestHandlerUnderPrefix(t *testing.T) {
	h := newHub(t)
	handler := h.Handler(nil)
	mux := http.NewServeMux()
	mux.Handle("/identity/", http.StripPrefix("/identity", handler))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client, err := NewClient(ClientOptions{BaseURL: srv.URL + "/identity/"})
	require.NoError(t, err)
	k := newAgentKeys(t)
	a, err := client.register(context.Background(), registerRequest(t, k, testID, "good", now()))
	require.NoError(t, err)
	_, err = client.refresh(context.Background(), testID, refreshRequest(t, k, testID, a, now()))
	require.NoError(t, err)

	body, err := registerRequest(t, k, testID, "good", now()).Body()
	require.NoError(t, err)
	resp, err := srv.Client().Post(srv.URL+"/identity/instance", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "/identity"+testID.path(), resp.Header.Get("Location"))
}

func TestClientErrorKinds(t *testing.T) {
	for status, kind := range map[int]error{
		400: edgesecrets.ErrInvalid, 401: ErrUnauthenticated, 403: ErrForbidden, 404: edgesecrets.ErrNotFound,
		409: edgesecrets.ErrConflict, 413: edgesecrets.ErrInvalid, 500: edgesecrets.ErrUnavailable, 503: edgesecrets.ErrUnavailable,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			io.WriteString(w, `{"error":"identity: refresh: computer says no"}`)
		}))
		client, err := NewClient(ClientOptions{BaseURL: srv.URL})
		require.NoError(t, err)
		_, err = client.refresh(context.Background(), testID, &refreshBody{})
		assert.Equal(t, kind, kindOf(err), "status %d", status)
		assert.Contains(t, err.Error(), "computer says no")
		srv.Close()
	}
}

func TestClientHubDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	client, err := NewClient(ClientOptions{BaseURL: url, HTTPClient: &http.Client{Timeout: 5 * time.Second}})
	require.NoError(t, err)
	_, err = client.register(context.Background(), &registerBody{})
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = client.register(ctx, &registerBody{})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, kindOf(err))
}

func TestNewClientNeedsURL(t *testing.T) {
	for _, u := range []string{"", "hub:8080", "ftp://hub", "/relative"} {
		_, err := NewClient(ClientOptions{BaseURL: u})
		assert.Error(t, err, u)
	}
}

func TestStatusOfContextErrors(t *testing.T) {
	assert.Equal(t, 503, statusOf(context.Canceled))
	assert.Equal(t, 500, statusOf(errors.New("?")))
	assert.True(t, strings.HasPrefix(publicMessage(errors.New("secret detail")), "identity: internal error"))
}
