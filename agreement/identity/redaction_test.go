package identity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyForms returns the ways a private key could show up in output.
func keyForms(t *testing.T, key ed25519.PrivateKey) []string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	seed := key.Seed()
	return []string{
		fmt.Sprint(string([]byte(seed))), fmt.Sprintf("%x", seed), fmt.Sprintf("%X", seed), hex.EncodeToString(key),
		base64.StdEncoding.EncodeToString(seed)[:40], base64.StdEncoding.EncodeToString(key)[:40], base64.StdEncoding.EncodeToString(der)[:40],
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))[30:80],
		strings.Trim(fmt.Sprint(string([]byte(seed[:8]))), "[]"),
	}
}

const attestationCanary = "ATTEST-CANARY-5d1f"

func assertClean(t *testing.T, out string, forbidden []string) {
	t.Helper()
	for _, f := range forbidden {
		require.NotContains(t, out, f)
	}
}

func TestFmtNeverPrintsKeysOrAttestation(t *testing.T) {
	h := newHub(t)
	k := newAgentKeys(t)
	ca := h.signer.(*memoryCA)
	caKey := ca.key.Signer.(ed25519.PrivateKey)
	forbidden := append(append(keyForms(t, k.sign), keyForms(t, caKey)...), attestationCanary)

	opts := AgentOptions{Instance: testID, SigningKey: k.sign, EncryptionKey: k.enc.PublicKey(), Issuer: h.Issuer}
	agent, err := NewAgent(opts)
	require.NoError(t, err)
	req := &registerBody{Provider: "p", Attestation: attestationCanary, CSR: "c"}
	var out bytes.Buffer
	values := []any{agent, opts, &opts, ca, CAOptions{Key: caKey, Certificate: ca.cert}, Attestation(attestationCanary), req, *req, h.Issuer}
	// Printing the structs by value skips their Format methods; the keys
	// sit behind pointers, so only addresses show.
	fmt.Fprintf(&out, "%+v %+v\n", *ca, struct{ A *Agent }{agent})
	for _, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			fmt.Fprintf(&out, verb+"\n", v)
		}
	}
	for _, h := range []slog.Handler{slog.NewJSONHandler(&out, nil), slog.NewTextHandler(&out, nil)} {
		logger := slog.New(h)
		for _, v := range values {
			logger.Info("value", "v", v)
		}
		// Inside a struct, the JSON handler marshals: MarshalJSON redacts.
		logger.Info("nested", "v", struct {
			Opts AgentOptions
			CA   CAOptions
			Req  registerBody
			Att  Attestation
		}{opts, CAOptions{Key: caKey}, *req, req.Attestation})
	}
	for _, v := range values {
		if b, err := json.Marshal(v); err == nil {
			out.Write(b)
		}
	}
	assertClean(t, out.String(), forbidden)
	body, err := req.Body()
	require.NoError(t, err)
	assert.Contains(t, string(body), attestationCanary, "only the request body carries the attestation")
	assert.Contains(t, out.String(), "[redacted]")
	assert.Contains(t, out.String(), testID.String(), "the useful part is printed")
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogsAndErrorsNeverCarrySecrets runs register, refresh, a failed
// refresh, the unknown-serial revocation, bad requests and an admin revoke
// with every logger at debug level, and greps everything logged and every
// error returned.
func TestLogsAndErrorsNeverCarrySecrets(t *testing.T) {
	synctest.Test(t, testLogsAndErrorsNeverCarrySecrets)
}

func testLogsAndErrorsNeverCarrySecrets(t *testing.T) {
	ctx := context.Background()
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHub(t, func(o *IssuerOptions) {
		o.Logger = logger
		o.Attest = func(_ context.Context, req AttestationRequest) (time.Time, error) {
			if string(req.Attestation) != attestationCanary {
				return time.Time{}, fmt.Errorf("unknown document")
			}
			return t0, nil
		}
	})
	handler := h.Handler(authorizeAdmin)
	client, err := NewClient(ClientOptions{BaseURL: "http://hub.test", HTTPClient: &http.Client{Transport: handlerTransport{handler}}})
	require.NoError(t, err)

	k := newAgentKeys(t)
	f := testFiles(t)
	agent, err := NewAgent(AgentOptions{Instance: testID, SigningKey: k.sign, EncryptionKey: k.enc.PublicKey(), Hub: client,
		KeyFile: f.keyPath, CertFile: f.certPath, Logger: logger})
	require.NoError(t, err)
	ca := h.signer.(*memoryCA)
	forbidden := append(append(keyForms(t, k.sign), keyForms(t, ca.key.Signer.(ed25519.PrivateKey))...), attestationCanary)

	var errs []error
	record := func(_ any, err error) { errs = append(errs, err) }
	first, err := agent.Register(ctx, attestationCanary)
	require.NoError(t, err)
	record(agent.Register(ctx, Attestation(attestationCanary+"-forged")))
	record(client.register(ctx, &registerBody{Provider: "p", Org: "o", Node: "n", Attestation: attestationCanary, CSR: "not a csr"}))
	// Renew twice, then present the superseded first certificate: revocation.
	for range 2 {
		_, err = agent.Renew(ctx)
		require.NoError(t, err)
	}
	req, err := newRefreshBody(k.sign, testID, first, []byte(k.csr(t, testID)), now(), 0)
	require.NoError(t, err)
	record(client.refresh(ctx, testID, req))
	errs = append(errs, client.Revoke(ctx, testID)) // no credentials: 401

	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	time.Sleep(24 * time.Hour)
	errs = append(errs, agent.Run(runCtx))

	var all strings.Builder
	all.WriteString(logs.String())
	for _, e := range errs {
		require.Error(t, e)
		fmt.Fprintf(&all, "%v\n%+v\n%#v\n", e, e, e)
	}
	assert.Contains(t, all.String(), "identity: certificate issued", "the flow did log")
	assert.Contains(t, all.String(), "refresh with an unknown serial")
	assertClean(t, all.String(), forbidden)
}
