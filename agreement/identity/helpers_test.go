package identity

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// t0 is when the bubble of a synctest.Test starts: midnight UTC at the
// start of 2000.
var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// now is the current time in UTC without a monotonic reading, so that it
// compares equal to the same instant read back from a certificate or a
// record. In a synctest bubble it is the bubble's time, which moves only
// when every goroutine of the bubble waits (time.Sleep in the test).
func now() time.Time { return time.Now().UTC().Round(0) }

// handlerTransport serves requests with h in the calling goroutine: an
// HTTP round trip without a network, usable in a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (tr handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	tr.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// inMemoryClient returns a Client of the identity API of is that needs no
// network.
func inMemoryClient(t testing.TB, is *Issuer) *Client {
	t.Helper()
	c, err := NewClient(ClientOptions{BaseURL: "http://hub.test", HTTPClient: &http.Client{Transport: handlerTransport{is.Handler(nil)}}})
	require.NoError(t, err)
	return c
}

var testID = Identity{Provider: "openhorizon.factory1", Org: "acme", Node: "node-1", InstanceID: "i-0123456789"}

// agentKeys are an agent's keys as the agreement package will hand them over.
type agentKeys struct {
	sign ed25519.PrivateKey
	enc  hpke.PrivateKey
}

func newAgentKeys(t testing.TB) agentKeys {
	t.Helper()
	_, sign, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	enc, err := hpke.MLKEM768X25519().GenerateKey()
	require.NoError(t, err)
	return agentKeys{sign: sign, enc: enc}
}

func (k agentKeys) csr(t testing.TB, id Identity) string {
	t.Helper()
	pemBytes, err := newCSR(k.sign, id, k.enc.PublicKey())
	require.NoError(t, err)
	return string(pemBytes)
}

// testHub is an Issuer whose attestor accepts documents that say "good"
// and dates them with attestedAt (default: now).
type testHub struct {
	*Issuer
	store      CertStore
	attestedAt func() time.Time
	attested   []AttestationRequest
	mu         sync.Mutex
}

type hubOption func(*IssuerOptions)

func newHub(t testing.TB, opts ...hubOption) *testHub {
	t.Helper()
	h := &testHub{attestedAt: now}
	o := IssuerOptions{
		Attest: func(_ context.Context, req AttestationRequest) (time.Time, error) {
			h.mu.Lock()
			h.attested = append(h.attested, req)
			h.mu.Unlock()
			if string(req.Attestation) != "good" {
				return time.Time{}, errDocumentRejected
			}
			return h.attestedAt(), nil
		},
		Store: NewMemoryCertStore(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	h.store = o.Store
	is, err := NewIssuer(o)
	require.NoError(t, err)
	h.Issuer = is
	return h
}

// errDocumentRejected is the attestor's own error: the hub logs it but
// never sends it to the caller.
var errDocumentRejected = errors.New("provider rejected document ref-7f3a")

func (h *testHub) register(t testing.TB, k agentKeys, id Identity) *responseBody {
	t.Helper()
	resp, err := h.Issuer.register(context.Background(), registerRequest(t, k, id, "good", now()))
	require.NoError(t, err)
	return resp
}

// registerRequest builds a registration for id with attestation att and a
// fresh proof by k made at now.
func registerRequest(t testing.TB, k agentKeys, id Identity, att Attestation, now time.Time) *registerBody {
	t.Helper()
	req, err := newRegisterBody(k.sign, id, []byte(k.csr(t, id)), att, now, 0)
	require.NoError(t, err)
	return req
}

// resign gives r, changed by a test, a fresh proof by key made at now.
func resign(t testing.TB, key crypto.Signer, r *registerBody, now time.Time) {
	t.Helper()
	csrDER, _ := decodeSinglePEM([]byte(r.CSR), pemTypeCSR)
	p, err := newProof(key, now, func(p requestProof) []byte {
		c := *r
		c.requestProof = p
		return registerProofMessage(&c, csrDER)
	})
	require.NoError(t, err)
	r.requestProof = p
}

// record returns id's record, its times as now returns them.
func (h *testHub) record(t testing.TB, id Identity) Record {
	t.Helper()
	rec, err := h.store.Get(context.Background(), id.Provider, id.InstanceID)
	require.NoError(t, err)
	for _, tm := range []*time.Time{&rec.NotAfter, &rec.RevokedAt, &rec.UpdatedAt} {
		*tm = tm.UTC().Round(0)
	}
	return rec
}

// refreshRequest builds a refresh for id proven with the certificate in
// resp and key k, asking for a new certificate for the same keys.
func refreshRequest(t testing.TB, k agentKeys, id Identity, resp *responseBody, now time.Time) *refreshBody {
	t.Helper()
	cert := leafOf(t, resp)
	req, err := newRefreshBody(k.sign, id, cert, []byte(k.csr(t, id)), now, 0)
	require.NoError(t, err)
	return req
}

func leafOf(t testing.TB, resp *responseBody) *x509.Certificate {
	t.Helper()
	certs, err := parseCertificatesPEM([]byte(resp.Certificate))
	require.NoError(t, err)
	require.Len(t, certs, 1)
	return certs[0]
}

// rawCSR builds a CSR from parts, for requests newCSR refuses to make.
type rawCSR struct {
	signer  crypto.Signer
	subject pkix.Name
	uris    []string
	san     *pkix.Extension // overrides uris when set
	enc     hpke.PublicKey
	noEnc   bool
	extra   []pkix.Extension
}

func (r rawCSR) pem(t testing.TB) string {
	t.Helper()
	var exts []pkix.Extension
	if r.san != nil {
		exts = append(exts, *r.san)
	} else {
		exts = append(exts, sanOf(t, r.uris...))
	}
	if !r.noEnc {
		ext, err := marshalEncryptionKey(r.enc)
		require.NoError(t, err)
		exts = append(exts, ext)
	}
	exts = append(exts, r.extra...)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: r.subject, ExtraExtensions: exts}, r.signer)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: pemTypeCSR, Bytes: der}))
}

// sanOf encodes URI SANs as given, canonical or not.
func sanOf(t testing.TB, uris ...string) pkix.Extension {
	t.Helper()
	var names []asn1.RawValue
	for _, u := range uris {
		names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(u)})
	}
	der, err := asn1.Marshal(names)
	require.NoError(t, err)
	return pkix.Extension{Id: oidSubjectAltName, Value: der}
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	der, err := asn1.Marshal(v)
	require.NoError(t, err)
	return der
}
