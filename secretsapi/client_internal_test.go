package secretsapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The client is tested here against a scripted agbot that records what it
// is asked; client_test.go tests it against the real handler, and
// against anax's answers.

// answer is one scripted response.
type answer struct {
	status int
	body   string
}

// scriptedAgbot answers each request with the next scripted answer (the
// last one repeats) and records the method, escaped path and credentials.
type scriptedAgbot struct {
	mu       sync.Mutex
	answers  []answer
	requests []string // "<method> <escaped path> <authorization>"
	prefer   []string // the Prefer header of each request
}

func (s *scriptedAgbot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.EscapedPath()+" "+r.Header.Get("Authorization"))
	s.prefer = append(s.prefer, r.Header.Get("Prefer"))
	a := s.answers[min(len(s.requests), len(s.answers))-1]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	w.Write([]byte(a.body))
}

func (s *scriptedAgbot) asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// newScripted serves the answers and returns a client with opts (Org,
// MaxAttempts) pointed at prefix on it.
func newScripted(t *testing.T, prefix string, opts ClientOptions, answers ...answer) (*Client, *scriptedAgbot) {
	t.Helper()
	agbot := &scriptedAgbot{answers: answers}
	srv := httptest.NewServer(agbot)
	t.Cleanup(srv.Close)
	opts.HTTPClient = srv.Client()
	opts.Authorize = func(r *http.Request) { r.SetBasicAuth("myorg/alice", "pw") }
	if opts.RetryDelay == 0 {
		opts.RetryDelay = time.Millisecond
	}
	c, err := NewClient(srv.URL+prefix, opts)
	require.NoError(t, err)
	return c, agbot
}

func mustName(t *testing.T, s string) binding.VaultSecretName {
	t.Helper()
	n, err := binding.ParseVaultSecretName(s)
	require.NoError(t, err)
	return n
}

const basicAlice = "Basic bXlvcmcvYWxpY2U6cHc=" // myorg/alice:pw

// The request each route sends: the design's GET, and Open Horizon's LIST
// as hzn sends it (anax cli/secrets_manager/secrets_manager.go lines 100-113,
// "org/<org>/secrets/<name>" with cliutils.AgbotList; never a GET, which
// would read the value: agreementbot/secure_api.go lines 1398-1405).
func TestClientRoutes(t *testing.T) {
	tests := []struct {
		name, org, prefix, secret string
		answer                    answer
		want                      string
		exists                    bool
	}{
		{"design route, exists", "", "", "db/password", answer{200, `{"exists":true}`}, "GET /secrets/db/password " + basicAlice, true},
		{"design route, missing", "", "", "db", answer{404, `{"exists":false}`}, "GET /secrets/db " + basicAlice, false},
		{"design route under a prefix, escaped", "", "/edge-agbot/", "user/alice/a b?#%", answer{200, `{"exists":true}`}, "GET /edge-agbot/secrets/user/alice/a%20b%3F%23%25 " + basicAlice, true},
		{"Open Horizon route, exists (secure_api.go L1406-1413, L2301)", "myorg", "", "db/password", answer{200, "{\"exists\":true}\n"}, "LIST /org/myorg/secrets/db/password " + basicAlice, true},
		{"Open Horizon route, missing: still 200 (secure_api.go L2303-2308)", "myorg", "", "hw-secret-name", answer{200, "{\"exists\":false}\n"}, "LIST /org/myorg/secrets/hw-secret-name " + basicAlice, false},
		{"Open Horizon route, user+node scope (secure_api.go L198, L2072)", "myorg", "/api", "user/alice/node/n1/cert", answer{200, `{"exists":true}`}, "LIST /api/org/myorg/secrets/user/alice/node/n1/cert " + basicAlice, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, agbot := newScripted(t, tt.prefix, ClientOptions{Org: tt.org}, tt.answer)
			got, err := c.SecretExists(context.Background(), mustName(t, tt.secret))
			require.NoError(t, err)
			assert.Equal(t, tt.exists, got)
			assert.Equal(t, []string{tt.want}, agbot.asked())
		})
	}
}

// With a deadline, each request says how long the caller waits (Prefer:
// wait, RFC 7240), and 503s are retried only while the deadline leaves
// room for another attempt after the pause; the 503 is the answer then.
func TestClientBoundByTheDeadline(t *testing.T) {
	c, agbot := newScripted(t, "", ClientOptions{MaxAttempts: 100, RetryDelay: 300 * time.Millisecond}, answer{503, `{"code":"store_unavailable"}`})
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.SecretExists(ctx, mustName(t, "db"))
	require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2500*time.Millisecond)
	asked := len(agbot.asked())
	assert.GreaterOrEqual(t, asked, 2, "retried while time was left")
	assert.Less(t, asked, 100, "not every attempt")
	agbot.mu.Lock()
	assert.Equal(t, "wait=2", agbot.prefer[0], "the first request may wait 2 whole seconds")
	agbot.mu.Unlock()

	c, agbot = newScripted(t, "", ClientOptions{MaxAttempts: 2}, answer{200, `{"exists":true}`})
	_, err = c.SecretExists(t.Context(), mustName(t, "db"))
	require.NoError(t, err)
	agbot.mu.Lock()
	assert.Equal(t, []string{""}, agbot.prefer, "no deadline, no preference")
	agbot.mu.Unlock()
}

func TestClientMapsAnswers(t *testing.T) {
	// anax's error bodies are JSON strings (agreementbot/api.go writeResponse).
	const denied = `"Permission denied, user \"alice\" cannot list secret \"user/bob/x\" in organization \"myorg\""`
	tests := []struct {
		name      string
		org       string
		answers   []answer
		attempts  int
		want      bool
		wantErr   error
		wantMsg   string
		wantCalls int
	}{
		{"400 is ErrInvalid", "", []answer{{400, `{"error":"bad","code":"invalid_name"}`}}, 0, false, edgesecrets.ErrInvalid, "invalid_name", 1},
		{"400 with anax's sentence", "myorg", []answer{{400, `"Incorrect secret name provided"`}}, 0, false, edgesecrets.ErrInvalid, `"Incorrect secret name provided"`, 1},
		{"401 is ErrPermission", "", []answer{{401, `{"error":"x","code":"unauthorized"}`}}, 0, false, edgesecrets.ErrPermission, "401", 1},
		{"403 is ErrPermission, anax's sentence kept", "myorg", []answer{{403, denied}}, 0, false, edgesecrets.ErrPermission, "cannot list secret", 1},
		{"503 retried until it answers", "myorg", []answer{{503, `"The secrets provider is not ready."`}, {503, `"x"`}, {200, `{"exists":true}`}}, 3, true, nil, "", 3},
		{"503 retried until the attempts run out", "", []answer{{503, `{"error":"x","code":"no_store"}`}}, 3, false, edgesecrets.ErrUnavailable, "503 (no_store) 3 times", 3},
		{"503 store_forbidden is not retried", "", []answer{{503, `{"error":"x","code":"store_forbidden"}`}}, 4, false, edgesecrets.ErrPermission, "refused the agbot", 1},
		{"500 is ErrUnavailable", "", []answer{{500, `{"error":"x","code":"internal"}`}}, 0, false, edgesecrets.ErrUnavailable, "500 (internal)", 1},
		{"405 (an agbot without the route) is ErrUnavailable", "myorg", []answer{{405, ``}}, 0, false, edgesecrets.ErrUnavailable, "405 (no explanation)", 1},
		{"404 without a result: not the API", "", []answer{{404, `404 page not found`}}, 0, false, edgesecrets.ErrUnavailable, "set ClientOptions.Org", 1},
		{"200 without a result: not the API", "myorg", []answer{{200, `["a"]`}}, 0, false, edgesecrets.ErrUnavailable, "without an existence result", 1},
		{"a long sentence is cut", "myorg", []answer{{403, `"` + strings.Repeat("x", 500) + `"`}}, 0, false, edgesecrets.ErrPermission, strings.Repeat("x", 200) + `..."`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, agbot := newScripted(t, "", ClientOptions{Org: tt.org, MaxAttempts: tt.attempts}, tt.answers...)
			got, err := c.SecretExists(context.Background(), mustName(t, "db"))
			assert.Len(t, agbot.asked(), tt.wantCalls)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
			assert.NotContains(t, err.Error(), "pw")
		})
	}
}

func TestClientRetryWaitEndsWithTheContext(t *testing.T) {
	c, _ := newScripted(t, "", ClientOptions{MaxAttempts: 100, RetryDelay: time.Hour}, answer{503, `{"code":"store_unavailable"}`})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err := c.SecretExists(ctx, mustName(t, "db"))
	assert.ErrorIs(t, err, context.Canceled)
}

func TestClientNetworkFailure(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	c, err := NewClient(srv.URL, ClientOptions{})
	require.NoError(t, err)
	_, err = c.SecretExists(context.Background(), mustName(t, "db"))
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable)
}

// GET /health in anax's shape (apicommon/status.go Info, HealthTimestamps;
// agreementbot/api.go lines 678-700), and the earlier edgesecrets shape.
func TestClientHealth(t *testing.T) {
	tests := []struct {
		name, body string
		want       Health
	}{
		{"anax's shape", `{"configuration":{"exchange_api":"https://hub/edge-exchange/v1/","required_minimum_exchange_version":"2.90.1","preferred_exchange_version":"2.110.1","mms_api":"","architecture":"amd64","horizon_version":"2.31.0"},"liveHealth":{"lastDBHeartbeat":1700000001,"lastVaultInteraction":1700000000}}`,
			Health{Configuration: &HealthConfiguration{ExchangeAPI: "https://hub/edge-exchange/v1/", MinExchVersion: "2.90.1", PrefExchVersion: "2.110.1", Arch: "amd64", HorizonVersion: "2.31.0"},
				LiveHealth: &LiveHealth{LastDBHeartbeat: 1700000001, LastVaultInteraction: 1700000000}}},
		{"never talked to the store", `{"configuration":{},"liveHealth":{"lastDBHeartbeat":0,"lastVaultInteraction":0}}`,
			Health{Configuration: &HealthConfiguration{}, LiveHealth: &LiveHealth{}}},
		{"the earlier edgesecrets shape", `{"lastVaultInteraction":1700000000}`, Health{LiveHealth: &LiveHealth{LastVaultInteraction: 1700000000}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, agbot := newScripted(t, "/agbot", ClientOptions{}, answer{200, tt.body})
			h, err := c.Health(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.want, h)
			assert.Equal(t, []string{"GET /agbot/health " + basicAlice}, agbot.asked())
		})
	}
	c, _ := newScripted(t, "", ClientOptions{}, answer{503, `"x"`})
	_, err := c.Health(context.Background())
	assert.ErrorContains(t, err, "answered 503")
	c, _ = newScripted(t, "", ClientOptions{}, answer{200, `{"liveHealth":"s3cr3t"}`})
	_, err = c.Health(context.Background())
	assert.ErrorContains(t, err, "agbot health")
	assert.NotContains(t, err.Error(), "s3cr3t")
}

func TestNewClientChecksOptions(t *testing.T) {
	_, err := NewClient("https://user:pw@agbot/", ClientOptions{})
	assert.ErrorContains(t, err, "credentials")
	assert.NotContains(t, err.Error(), "pw")
	_, err = NewClient("ftp://agbot/", ClientOptions{})
	assert.ErrorContains(t, err, "http:// or https://")
	_, err = NewClient("https://agbot/", ClientOptions{Org: "a/b"})
	assert.ErrorContains(t, err, "ClientOptions.Org")
	c, err := NewClient("https://agbot:8083/api/", ClientOptions{Org: "myorg"})
	require.NoError(t, err)
	assert.Equal(t, defaultMaxAttempts, c.opts.MaxAttempts)
	assert.Equal(t, defaultRetryDelay, c.opts.RetryDelay)
}

// FuzzHealthDecode: Health decodes any JSON object without panicking and
// encodes back to anax's shape.
func FuzzHealthDecode(f *testing.F) {
	for _, s := range []string{`{"configuration":{},"liveHealth":{"lastDBHeartbeat":1,"lastVaultInteraction":2}}`, `{"lastVaultInteraction":3}`, `{}`, `{"liveHealth":null,"lastVaultInteraction":-1}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var h Health
		if json.Unmarshal([]byte(s), &h) != nil {
			return
		}
		b, err := json.Marshal(h)
		require.NoError(t, err)
		var back Health
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, h, back)
	})
}

// FuzzClientAnswer: whatever an agbot answers, the client returns a result
// only for an existence body, and its errors carry a secretstore kind.
func FuzzClientAnswer(f *testing.F) {
	for _, a := range []answer{{200, `{"exists":true}`}, {404, `{"exists":false}`}, {400, `"bad"`}, {503, `{"code":"store_forbidden"}`}, {302, ``}, {200, `{"exists":null}`}} {
		f.Add(a.status, a.body)
	}
	f.Fuzz(func(t *testing.T, status int, body string) {
		if status < 200 || status > 599 {
			return
		}
		c, _ := newScripted(t, "", ClientOptions{Org: "myorg", MaxAttempts: 2}, answer{status, body})
		_, err := c.SecretExists(context.Background(), mustName(t, "db"))
		if err == nil {
			assert.Contains(t, []int{200, 404}, status)
			return
		}
		assert.NotNil(t, edgesecrets.KindOf(err), "%v", err)
	})
}
