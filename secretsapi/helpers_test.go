package secretsapi_test

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// The secrets every fixture's store starts with: store path → value. Each
// is stored as anax's agbot stores a secret, {"key": "name", "value": <value>}.
var fixtureSecrets = map[string]string{
	"myorg/hw-secret-name":            "World",
	"myorg/db/password":               "org-value",
	"myorg/node/n1/cert":              "node-value",
	"myorg/user/alice/token":          "alice-value",
	"myorg/user/alice/node/n1/key":    "alice-node-value",
	"myorg/user/bob/token":            "bob-value",
	"myorg/user/bob/node/n1/key":      "bob-node-value",
	"otherorg/db/password":            "otherorg-value",
	"myorg/user/admin/own":            "admin-value",
	"myorg/user/alice/deep/a/b/c/d/e": "alice-deep-value",
}

// account is one caller the test hook knows.
type account struct {
	password string
	caller   secretsapi.Caller
}

// accounts: Basic "<org>/<id>" → password and caller. A bearer token is
// accepted for alice with anax's headers.
var accounts = map[string]account{
	"myorg/admin":    {"admin-pw", secretsapi.Caller{Org: "myorg", ID: "admin", Role: secretsapi.RoleAdmin}},
	"myorg/alice":    {"alice-pw", secretsapi.Caller{Org: "myorg", ID: "alice", Role: secretsapi.RoleUser}},
	"myorg/bob":      {"bob-pw", secretsapi.Caller{Org: "myorg", ID: "bob", Role: secretsapi.RoleUser}},
	"myorg/n1":       {"node-pw", secretsapi.Caller{Org: "myorg", ID: "n1", Role: secretsapi.RoleNode}},
	"otherorg/carol": {"carol-pw", secretsapi.Caller{Org: "otherorg", ID: "carol", Role: secretsapi.RoleAdmin}},
}

const aliceBearer = "bearer-token-of-alice"

// authenticate is the test hook, standing in for the exchange.
func authenticate(_ context.Context, c secretsapi.Credentials) (secretsapi.Caller, error) {
	if c.Bearer {
		if c.Org == "myorg" && c.User == "alice" && subtle.ConstantTimeCompare([]byte(c.Secret), []byte(aliceBearer)) == 1 {
			return accounts["myorg/alice"].caller, nil
		}
		return secretsapi.Caller{}, errors.New("bad token " + string(c.Secret))
	}
	a, ok := accounts[c.Org+"/"+c.User]
	if !ok || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(a.password)) != 1 {
		return secretsapi.Caller{}, errors.New("bad password " + string(c.Secret))
	}
	return a.caller, nil
}

// fixture is a handler over a recording store, served over loopback.
type fixture struct {
	store  *mock.Store
	server *httptest.Server
	logs   *logtest.Buffer
}

func newFixture(t *testing.T, opts secretsapi.Options) *fixture {
	t.Helper()
	inner := memory.New()
	for name, value := range fixtureSecrets {
		_, err := inner.Put(context.Background(), &secretstore.Secret{Name: name, Data: ohData("name", value),
			Labels: map[string]string{"owner": "test"}}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	store := mock.NewStore(inner)
	log, logs := logtest.NewLogger()
	if opts.Store == nil {
		opts.Store = store.Store
	}
	if opts.Authenticate == nil {
		opts.Authenticate = authenticate
	}
	opts.Logger = log
	h, err := secretsapi.NewHandler(opts)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{store: store, server: srv, logs: logs}
}

// newBareFixture serves a handler over no store at all.
func newBareFixture(t *testing.T) *fixture {
	t.Helper()
	log, logs := logtest.NewLogger()
	h, err := secretsapi.NewHandler(secretsapi.Options{Authenticate: authenticate, Logger: log})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{store: mock.NewStore(nil), server: srv, logs: logs}
}

// fmtAll prints v with every fmt verb and slog handler.
func fmtAll(v any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %+v %#v %s %q %x", v, v, v, v, v, v)
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "v", v)
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "v", v)
	return b.String()
}

func ohData(key, value string) edgesecrets.Data {
	return edgesecrets.Data{"key": []byte(key), "value": []byte(value)}
}

type response struct {
	status int
	header http.Header
	body   string
}

// as is who sends a request: "" sends no credentials; "bearer" sends
// alice's token with anax's headers; else Basic "<org>/<id>" and its
// password.
func (f *fixture) do(t *testing.T, method, path, as, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.server.URL+path, rd)
	require.NoError(t, err)
	switch as {
	case "":
	case "bearer":
		req.Header.Set("Authorization", "Bearer "+aliceBearer)
		req.Header.Set("X-Organization", "myorg")
		req.Header.Set("X-UserId", "alice")
	default:
		req.SetBasicAuth(as, accounts[as].password)
	}
	resp, err := f.server.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// value reads a secret's value straight from the store.
func (f *fixture) value(t *testing.T, name string) (string, bool) {
	t.Helper()
	s, err := f.store.Inner.Get(context.Background(), name)
	if errors.Is(err, edgesecrets.ErrNotFound) {
		return "", false
	}
	require.NoError(t, err)
	return string(s.Data["value"]), true
}
