package pgstate_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// hubFront is one address in front of the identity APIs of several
// agbots: Use picks the agbot that answers next, and the last POST is kept
// to be replayed.
type hubFront struct {
	mu       sync.Mutex
	to       http.Handler
	lastPath string
	lastBody []byte
}

func (f *hubFront) Use(h http.Handler) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.to = h
}

func (f *hubFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	to := f.to
	f.lastPath, f.lastBody = r.URL.Path, body
	f.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	to.ServeHTTP(w, r)
}

// replay sends the last POST again to h and returns the status and body.
func (f *hubFront) replay(t *testing.T, h http.Handler) (int, string) {
	f.mu.Lock()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, f.lastPath, bytes.NewReader(f.lastBody))
	f.mu.Unlock()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestIdentityAcrossAgbots: two agbots, each its own Open of one database
// and one hub CA. An agent registers through the first; the second, which
// never saw it, verifies it and renews its certificate; the renewal's
// request, replayed to either agbot, is refused: the nonce it carries was
// used once, through the second, and the first knows it.
func TestIdentityAcrossAgbots(t *testing.T) {
	db := pgtest.NewDatabase(t)
	ca, err := identity.NewCA(identity.CAOptions{})
	require.NoError(t, err)
	attest := func(_ context.Context, req identity.AttestationRequest) (time.Time, error) {
		return time.Now(), nil
	}
	agbot := func() (*identity.Issuer, http.Handler) {
		is, err := identity.NewIssuer(identity.IssuerOptions{Attest: attest, Signer: ca, Store: openCerts(t, db.URL)})
		require.NoError(t, err)
		return is, is.Handler(nil)
	}
	issuerA, apiA := agbot()
	issuerB, apiB := agbot()

	front := &hubFront{to: apiA}
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	_, signingKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	encryptionKey, err := hpke.MLKEM768X25519().GenerateKey()
	require.NoError(t, err)
	hub, err := identity.NewClient(identity.ClientOptions{BaseURL: srv.URL})
	require.NoError(t, err)
	agent, err := identity.NewAgent(identity.AgentOptions{
		Instance:   identity.Identity{Provider: "openhorizon.factory1", Org: "acme", Node: "node-1", InstanceID: "i-42"},
		SigningKey: signingKey, EncryptionKey: encryptionKey.PublicKey(), Hub: hub,
	})
	require.NoError(t, err)

	_, err = agent.Register(t.Context(), "document")
	require.NoError(t, err, "registered through agbot A")
	_, err = issuerB.Verifier().Verify(t.Context(), agent.CertificateChain())
	require.NoError(t, err, "agbot B verifies the agent registered through A")

	front.Use(apiB)
	_, err = agent.Renew(t.Context())
	require.NoError(t, err, "agbot B renews the certificate A issued")
	_, err = issuerA.Verifier().Verify(t.Context(), agent.CertificateChain())
	require.NoError(t, err, "agbot A verifies the certificate B issued")

	for name, api := range map[string]http.Handler{"A": apiA, "B": apiB} {
		status, body := front.replay(t, api)
		assert.Equal(t, http.StatusConflict, status, "the renewal B accepted, replayed to %s, is refused", name)
		assert.Contains(t, body, `"replayed"`, "as a replay (its nonce), replayed to %s", name)
	}
}
