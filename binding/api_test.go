package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

const (
	testUser     = "alice"
	testPassword = "alice-password-never-logged"
)

// basicAuth is the test authentication hook: alice in testOrg.
func basicAuth(r *http.Request) (Caller, error) {
	user, pw, ok := r.BasicAuth()
	if !ok || user != testUser || pw != testPassword {
		return Caller{}, errors.New("bad credentials " + pw)
	}
	return Caller{Org: testOrg, Name: user}, nil
}

// flakyStore fails the first failures Stat calls with ErrUnavailable.
type flakyStore struct {
	*faultStore
	failures atomic.Int64
}

func (f *flakyStore) Stat(ctx context.Context, name string) (secretstore.Metadata, error) {
	if f.failures.Add(-1) >= 0 {
		f.stats.Add(1)
		return secretstore.Metadata{}, secretstore.NewError(secretstore.OpStat, name, secretstore.ErrUnavailable, nil)
	}
	return f.faultStore.Stat(ctx, name)
}

type apiFixture struct {
	srv    *httptest.Server
	logs   *syncBuffer
	client *Client
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newAPI(t *testing.T, store secretstore.Store, hopts HandlerOptions, copts ClientOptions) *apiFixture {
	t.Helper()
	logs := &syncBuffer{}
	hopts.Store = store
	if hopts.Authenticate == nil {
		hopts.Authenticate = basicAuth
	}
	hopts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := NewHandler(hopts)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if copts.Authorize == nil {
		copts.Authorize = func(r *http.Request) { r.SetBasicAuth(testUser, testPassword) }
	}
	if copts.RetryDelay == 0 {
		copts.RetryDelay = time.Millisecond
	}
	copts.HTTPClient = srv.Client()
	copts.Logger = hopts.Logger
	c, err := NewClient(srv.URL, copts)
	require.NoError(t, err)
	return &apiFixture{srv: srv, logs: logs, client: c}
}

func mustName(t *testing.T, s string) VaultSecretName {
	t.Helper()
	n, err := ParseVaultSecretName(s)
	require.NoError(t, err)
	return n
}

func TestAPIHandlerAndClient(t *testing.T) {
	store := newStore(t, testOrg+"/db", testOrg+"/user/alice/node/n1/cert", "otherorg/secret")
	api := newAPI(t, store, HandlerOptions{}, ClientOptions{})
	ctx := context.Background()

	cases := []struct {
		name    string
		secret  string
		want    bool
		wantErr error
	}{
		{"org secret exists", "db", true, nil},
		{"user+node secret exists", "user/alice/node/n1/cert", true, nil},
		{"missing secret", "nope", false, nil},
		{"another org's secret is not visible", "secret", false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := api.client.SecretExists(ctx, mustName(t, c.secret))
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}

	// The raw wire answers are exactly the design's.
	for path, want := range map[string]struct {
		status int
		body   string
	}{
		"/secrets/db":                       {200, `{"exists":true}`},
		"/secrets/nope":                     {404, `{"exists":false}`},
		"/secrets/user%2Falice%2Fnode/n1/x": {404, `{"exists":false}`},
		"/secrets/user/alice":               {400, `{"code":"invalid_name"}`},
		"/secrets/openhorizon/myorg/db":     {400, `{"code":"invalid_name"}`},
		"/secrets/":                         {400, `{"code":"invalid_name"}`},
		"/health":                           {200, `{"lastVaultInteraction":0}`},
		"/nothing":                          {404, `{"code":"not_found"}`},
	} {
		req, err := http.NewRequest(http.MethodGet, api.srv.URL+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth(testUser, testPassword)
		resp, err := api.srv.Client().Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, want.status, resp.StatusCode, path)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), path)
		if strings.Contains(want.body, "code") {
			var e APIError
			require.NoError(t, json.Unmarshal(body, &e), path)
			assert.JSONEq(t, want.body, `{"code":"`+e.Code+`"}`, path)
			assert.NotEmpty(t, e.Error, path)
		} else if path != "/health" {
			assert.JSONEq(t, want.body, string(body), path)
		}
	}

	assert.Zero(t, store.gets.Load(), "existence is checked with Stat only")
	assert.Contains(t, api.logs.String(), "vaultSecret=db", "names are logged")
	assert.NotContains(t, api.logs.String(), testPassword)
	assert.NotContains(t, api.logs.String(), "s3cr3t")
}

func TestAPIClientMapsErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("400 is ErrInvalid", func(t *testing.T) {
		api := newAPI(t, newStore(t), HandlerOptions{}, ClientOptions{})
		// The client parses names first, so send one the store refuses: too long with the org.
		_, err := api.client.SecretExists(ctx, VaultSecretName{Secret: strings.Repeat("x", secretstore.MaxNameLength-2)})
		assert.ErrorIs(t, err, secretstore.ErrInvalid)
	})
	t.Run("401 is ErrPermission, and the hook's error is neither sent nor logged", func(t *testing.T) {
		api := newAPI(t, newStore(t, testOrg+"/db"), HandlerOptions{}, ClientOptions{Authorize: func(r *http.Request) { r.SetBasicAuth(testUser, "wrong-password") }})
		_, err := api.client.SecretExists(ctx, mustName(t, "db"))
		assert.ErrorIs(t, err, secretstore.ErrPermission)
		assert.NotContains(t, err.Error(), "wrong-password")
		assert.NotContains(t, api.logs.String(), "wrong-password")
		assert.Contains(t, api.logs.String(), "refused")
	})
	t.Run("401 when the hook gives no valid org", func(t *testing.T) {
		api := newAPI(t, newStore(t), HandlerOptions{Authenticate: func(*http.Request) (Caller, error) { return Caller{Org: "a/b"}, nil }}, ClientOptions{})
		_, err := api.client.SecretExists(ctx, mustName(t, "db"))
		assert.ErrorIs(t, err, secretstore.ErrPermission)
	})
	t.Run("503 without a store, after retrying", func(t *testing.T) {
		api := newAPI(t, nil, HandlerOptions{}, ClientOptions{MaxAttempts: 3})
		_, err := api.client.SecretExists(ctx, mustName(t, "db"))
		assert.ErrorIs(t, err, secretstore.ErrUnavailable)
		assert.ErrorContains(t, err, "503 (no_store) 3 times")
	})
	t.Run("503 store unavailable, retried until it answers", func(t *testing.T) {
		flaky := &flakyStore{faultStore: newStore(t, testOrg+"/db")}
		flaky.failures.Store(2)
		api := newAPI(t, flaky, HandlerOptions{}, ClientOptions{MaxAttempts: 3})
		got, err := api.client.SecretExists(ctx, mustName(t, "db"))
		require.NoError(t, err)
		assert.True(t, got)
		assert.Equal(t, int64(3), flaky.stats.Load(), "two 503s, then the answer")
		assert.Contains(t, api.logs.String(), "retrying")
	})
	t.Run("503 store unavailable, retries exhausted", func(t *testing.T) {
		flaky := &flakyStore{faultStore: newStore(t, testOrg+"/db")}
		flaky.failures.Store(10)
		api := newAPI(t, flaky, HandlerOptions{}, ClientOptions{MaxAttempts: 4})
		_, err := api.client.SecretExists(ctx, mustName(t, "db"))
		assert.ErrorIs(t, err, secretstore.ErrUnavailable)
		assert.Equal(t, int64(4), flaky.stats.Load())
	})
	t.Run("503 store forbidden is ErrPermission without retry", func(t *testing.T) {
		store := newStore(t, testOrg+"/db")
		store.statErr = secretstore.ErrPermission
		api := newAPI(t, store, HandlerOptions{}, ClientOptions{MaxAttempts: 4})
		_, err := api.client.SecretExists(ctx, mustName(t, "db"))
		assert.ErrorIs(t, err, secretstore.ErrPermission)
		assert.Equal(t, int64(1), store.stats.Load())
	})
	t.Run("500 on an unexpected store error is ErrUnavailable", func(t *testing.T) {
		store := newStore(t)
		store.statErr = errors.New("weird")
		api := newAPI(t, store, HandlerOptions{}, ClientOptions{})
		_, err := api.client.SecretExists(ctx, mustName(t, "db"))
		assert.ErrorIs(t, err, secretstore.ErrUnavailable)
		assert.ErrorContains(t, err, "500 (internal)")
	})
	t.Run("retry wait ends with the context", func(t *testing.T) {
		api := newAPI(t, nil, HandlerOptions{}, ClientOptions{MaxAttempts: 100, RetryDelay: time.Hour})
		cctx, cancel := context.WithCancel(ctx)
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		_, err := api.client.SecretExists(cctx, mustName(t, "db"))
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("a URL that is not the agbot API", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(srv.Close)
		c, err := NewClient(srv.URL, ClientOptions{HTTPClient: srv.Client()})
		require.NoError(t, err)
		_, err = c.SecretExists(ctx, mustName(t, "db"))
		assert.ErrorIs(t, err, secretstore.ErrUnavailable)
		assert.ErrorContains(t, err, "check the agbot URL")
	})
	t.Run("network failure is ErrUnavailable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		c, err := NewClient(srv.URL, ClientOptions{})
		require.NoError(t, err)
		_, err = c.SecretExists(ctx, mustName(t, "db"))
		assert.ErrorIs(t, err, secretstore.ErrUnavailable)
	})
}

func TestAPIMethodNotAllowed(t *testing.T) {
	api := newAPI(t, newStore(t), HandlerOptions{}, ClientOptions{})
	for _, path := range []string{"/secrets/db", "/health"} {
		resp, err := api.srv.Client().Post(api.srv.URL+path, "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		var e APIError
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		assert.Equal(t, APIErrMethod, e.Code)
		assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	}
}

func TestAPIHealth(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	mon := secretstore.NewMonitor(newStore(t, testOrg+"/db"), secretstore.WithMonitorClock(func() time.Time { return now }))
	api := newAPI(t, mon, HandlerOptions{}, ClientOptions{})
	ctx := context.Background()

	h, err := api.client.Health(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(0), h.LastVaultInteraction, "0 before any interaction")
	assert.True(t, h.LastVaultInteractionTime().IsZero())

	_, err = api.client.SecretExists(ctx, mustName(t, "missing")) // an answer, even "not found", counts
	require.NoError(t, err)
	h, err = api.client.Health(ctx)
	require.NoError(t, err)
	assert.Equal(t, now.Unix(), h.LastVaultInteraction)
	assert.Equal(t, now, h.LastVaultInteractionTime())

	custom := newAPI(t, nil, HandlerOptions{LastVaultInteraction: func() time.Time { return now.Add(time.Minute) }}, ClientOptions{})
	h, err = custom.client.Health(ctx)
	require.NoError(t, err)
	assert.Equal(t, now.Add(time.Minute).Unix(), h.LastVaultInteraction)
}

func TestNewHandlerNeedsAuthentication(t *testing.T) {
	_, err := NewHandler(HandlerOptions{})
	assert.ErrorContains(t, err, "Authenticate")
}

func TestNewClientChecksURL(t *testing.T) {
	_, err := NewClient("https://user:pw@agbot/", ClientOptions{})
	assert.ErrorContains(t, err, "credentials")
	assert.NotContains(t, err.Error(), "pw")
	c, err := NewClient("https://agbot:8083/api/", ClientOptions{})
	require.NoError(t, err)
	assert.Equal(t, DefaultMaxAttempts, c.opts.MaxAttempts)
	assert.Equal(t, DefaultRetryDelay, c.opts.RetryDelay)
}

func TestClientURLWithPrefixAndEscaping(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.URL.EscapedPath())
		writeJSON(w, http.StatusOK, Existence{Exists: true})
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL+"/edge-agbot/", ClientOptions{HTTPClient: srv.Client()})
	require.NoError(t, err)
	_, err = c.SecretExists(context.Background(), mustName(t, "user/alice/a b?#%"))
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"/edge-agbot/secrets/user/alice/a%20b%3F%23%25"}, got)
}

func TestHubClient(t *testing.T) {
	store := newStore(t, testOrg+"/db")
	h, err := NewHandler(HandlerOptions{Store: store, Authenticate: basicAuth})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/edge-agbot/", http.StripPrefix("/edge-agbot", h))
	var srvURL string
	mux.HandleFunc("GET /edge-exchange/v1/hubapis", func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := r.BasicAuth(); !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		writeJSON(w, http.StatusOK, HubURLs{Exchange: srvURL + "/edge-exchange/v1", AgreementBot: srvURL + "/edge-agbot/"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	srvURL = srv.URL

	opts := ClientOptions{HTTPClient: srv.Client(), Authorize: func(r *http.Request) { r.SetBasicAuth(testUser, testPassword) }}
	c, err := NewClientFromHub(context.Background(), srv.URL+"/edge-exchange/v1/hubapis", opts)
	require.NoError(t, err)
	ok, err := c.SecretExists(context.Background(), mustName(t, "db"))
	require.NoError(t, err)
	assert.True(t, ok)

	_, err = FetchHubURLs(context.Background(), srv.URL+"/edge-exchange/v1/hubapis", ClientOptions{HTTPClient: srv.Client()})
	assert.ErrorContains(t, err, "status 401")
	_, err = FetchHubURLs(context.Background(), "ftp://x", opts)
	assert.Error(t, err)
}
