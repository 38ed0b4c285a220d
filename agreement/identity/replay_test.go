package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wiretap is an HTTP front for a Handler that keeps the body of every
// request, as an attacker on the path (or a logging proxy) would.
type wiretap struct {
	next   http.Handler
	mu     sync.Mutex
	bodies map[string][][]byte // by path
}

func (w *wiretap) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	w.bodies[r.URL.Path] = append(w.bodies[r.URL.Path], b)
	w.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(b))
	w.next.ServeHTTP(rw, r)
}

func (w *wiretap) last(t *testing.T, path string) []byte {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NotEmpty(t, w.bodies[path], "no request to %s captured", path)
	return w.bodies[path][len(w.bodies[path])-1]
}

// A registration and a refresh captured on the wire and replayed byte for
// byte within the proof window are refused with their own error kind and
// change nothing: the real agent's certificate keeps verifying and the
// agent keeps renewing (issue 18: a replay used to replace the record,
// after which the agent's next renewal got the instance revoked).
func TestReplayedRequestsAreRefusedAndChangeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHub(t)
		tap := &wiretap{next: h.Handler(nil), bodies: map[string][][]byte{}}
		client, err := NewClient(ClientOptions{BaseURL: "http://hub.test", HTTPClient: &http.Client{Transport: handlerTransport{tap}}})
		require.NoError(t, err)
		// post sends body again, as the attacker on the path would.
		post := func(path string, body []byte) *http.Response {
			rec := httptest.NewRecorder()
			tap.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
			return rec.Result()
		}
		k := newAgentKeys(t)
		agent := newTestAgent(t, client, k, nil)

		replay := func(t *testing.T, path string, body []byte) {
			t.Helper()
			before := h.record(t, testID)
			resp := post(path, body)
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusConflict, resp.StatusCode, string(raw))
			var eb errorBody
			require.NoError(t, json.Unmarshal(raw, &eb))
			assert.Equal(t, reasonReplayed, eb.Reason)
			assert.Contains(t, eb.Error, "this request was already used once")
			assert.Equal(t, before, h.record(t, testID), "a replayed request changes nothing")
			_, err = h.Verifier().Verify(ctx, agent.CertificateChain())
			require.NoError(t, err, "the real agent's certificate still verifies")
		}

		// Registration, replayed a minute later: within both the proof window
		// and the attestation's freshness window.
		_, err = agent.Register(ctx, "good")
		require.NoError(t, err)
		registration := tap.last(t, "/instance")
		time.Sleep(time.Minute)
		replay(t, "/instance", registration)

		// Refresh, replayed a minute later: its serial is now the previous one,
		// which a fresh proof may present, but this proof is spent.
		_, err = agent.Renew(ctx)
		require.NoError(t, err)
		refresh := tap.last(t, testID.path())
		time.Sleep(time.Minute)
		replay(t, testID.path(), refresh)
		replay(t, "/instance", registration) // the registration stays spent

		// The real agent keeps working: it renews (twice, so the replayed
		// request's serial would now be unknown) and is never revoked.
		for range 2 {
			time.Sleep(time.Minute)
			_, err = agent.Renew(ctx)
			require.NoError(t, err)
		}
		replay(t, testID.path(), refresh)
		assert.False(t, h.record(t, testID).Revoked)

		// Once outside the proof window a replay is refused for its age.
		time.Sleep(10 * time.Minute)
		resp := post(testID.path(), refresh)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		_, err = agent.Renew(ctx)
		require.NoError(t, err)
	})
}

// Over the Go API too, a replay is ErrReplayed and only that kind; of
// concurrent uses of one request exactly one wins.
func TestReplayedRequestKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHub(t)
		k := newAgentKeys(t)
		reg := registerRequest(t, k, testID, "good", now())
		a, err := h.Issuer.register(ctx, reg)
		require.NoError(t, err)
		_, err = h.Issuer.register(ctx, reg)
		require.ErrorIs(t, err, ErrReplayed)
		assert.Equal(t, ErrReplayed, kindOf(err))
		assert.Equal(t, http.StatusConflict, statusOf(err))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, opRegister, e.Op)

		req := refreshRequest(t, k, testID, a, now())
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = h.refresh(ctx, testID, req) })
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
				continue
			}
			assert.Equal(t, ErrReplayed, kindOf(err), "%v", err)
		}
		assert.Equal(t, 1, wins)
		rec := h.record(t, testID)
		assert.Equal(t, a.Serial, rec.PreviousSerial)
		assert.False(t, rec.Revoked)
	})
}

// A refused request (attestation refused, bad proof) spends no nonce, so
// nothing an unattested caller sends fills the store.
func TestRefusedRegistrationSpendsNoNonce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := NewMemoryCertStore().(*memoryCertStore)
		h := newHub(t, func(o *IssuerOptions) { o.Store = store })
		k := newAgentKeys(t)
		for range 3 {
			_, err := h.Issuer.register(ctx, registerRequest(t, k, testID, "forged", now()))
			require.ErrorIs(t, err, ErrForbidden)
		}
		assert.Empty(t, store.nonces)
		h.register(t, k, testID)
		assert.Len(t, store.nonces, 1)
	})
}

func TestClientMapsReplayedReason(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"error":"identity: refresh: replayed request","reason":"replayed"}`)
	}))
	defer srv.Close()
	client, err := NewClient(ClientOptions{BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = client.refresh(context.Background(), testID, &refreshBody{})
	assert.Equal(t, ErrReplayed, kindOf(err))
	assert.ErrorIs(t, err, edgesecrets.ErrConflict, "a replay is also the module kind it refines")
}

func TestMemoryCertStoreNonces(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryCertStore().(*memoryCertStore)
	use := func(instance, nonce string, expires, now time.Time) error {
		return s.UseNonce(ctx, NonceUse{Provider: "p", InstanceID: instance, Nonce: []byte(nonce), Expires: expires, Now: now})
	}
	require.NoError(t, use("i-1", "nonce-a", t0.Add(time.Minute), t0))
	assert.ErrorIs(t, use("i-1", "nonce-a", t0.Add(time.Minute), t0), ErrReplayed)
	require.NoError(t, use("i-2", "nonce-a", t0.Add(time.Minute), t0), "nonces are per instance")
	require.NoError(t, use("i-1", "nonce-b", t0.Add(time.Minute), t0))

	// Expired nonces are dropped once the table grows; live ones stay.
	for i := range 100 {
		require.NoError(t, use("i-3", string(rune('A'+i)), t0.Add(time.Hour), t0.Add(2*time.Minute)))
	}
	assert.NoError(t, use("i-1", "nonce-a", t0.Add(time.Hour), t0.Add(2*time.Minute)), "expired and forgotten")
	assert.ErrorIs(t, use("i-3", "A", t0.Add(time.Hour), t0.Add(2*time.Minute)), ErrReplayed)
	assert.LessOrEqual(t, len(s.nonces), 103)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, s.UseNonce(canceled, NonceUse{Nonce: []byte("x")}), context.Canceled)
}
