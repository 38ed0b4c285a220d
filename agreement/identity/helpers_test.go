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
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeClock is a Clock whose time moves only when the test says so.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	d  time.Duration
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), d: d, ch: ch})
	return ch
}

// Advance moves time by d and fires the waiters that are due.
func (c *fakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves time to t and fires the waiters that are due.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// waiter waits until something is waiting on the clock and returns the
// earliest waiter.
func (c *fakeClock) waiter(t *testing.T) fakeWaiter {
	t.Helper()
	var w fakeWaiter
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.waiters) == 0 {
			return false
		}
		sort.Slice(c.waiters, func(i, j int) bool { return c.waiters[i].at.Before(c.waiters[j].at) })
		w = c.waiters[0]
		return true
	}, 10*time.Second, time.Millisecond, "nothing waits on the clock")
	return w
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
	pemBytes, err := NewCSR(k.sign, id, k.enc.PublicKey())
	require.NoError(t, err)
	return string(pemBytes)
}

// hub is an Issuer on a fake clock whose attestor accepts documents that
// say "good" and dates them with attestedAt (default: now).
type hub struct {
	*Issuer
	clock      *fakeClock
	store      CertStore
	attestedAt func() time.Time
	attested   []AttestationRequest
	mu         sync.Mutex
}

type hubOption func(*IssuerOptions)

func newHub(t testing.TB, opts ...hubOption) *hub {
	t.Helper()
	h := &hub{clock: newFakeClock()}
	h.attestedAt = h.clock.Now
	o := IssuerOptions{
		Attestor: AttestorFunc(func(_ context.Context, req AttestationRequest) (Confirmation, error) {
			h.mu.Lock()
			h.attested = append(h.attested, req)
			h.mu.Unlock()
			if string(req.Attestation) != "good" {
				return Confirmation{}, errDocumentRejected
			}
			return Confirmation{IssuedAt: h.attestedAt()}, nil
		}),
		Clock: h.clock,
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

func (h *hub) register(t testing.TB, k agentKeys, id Identity) *IdentityResponse {
	t.Helper()
	resp, err := h.Register(context.Background(), registerRequest(t, k, id, "good", h.clock.Now()))
	require.NoError(t, err)
	return resp
}

// registerRequest builds a registration for id with attestation att and a
// fresh proof by k made at now.
func registerRequest(t testing.TB, k agentKeys, id Identity, att Attestation, now time.Time) *RegisterRequest {
	t.Helper()
	req, err := NewRegisterRequest(k.sign, id, []byte(k.csr(t, id)), att, now, 0)
	require.NoError(t, err)
	return req
}

// resign gives r, changed by a test, a fresh proof by key made at now.
func resign(t testing.TB, key crypto.Signer, r *RegisterRequest, now time.Time) {
	t.Helper()
	csrDER, _ := decodeSinglePEM([]byte(r.CSR), pemTypeCSR)
	p, err := newProof(key, now, func(p RequestProof) []byte {
		c := *r
		c.RequestProof = p
		return registerProofMessage(&c, csrDER)
	})
	require.NoError(t, err)
	r.RequestProof = p
}

func (h *hub) record(t testing.TB, id Identity) Record {
	t.Helper()
	rec, err := h.store.Get(context.Background(), id.Provider, id.InstanceID)
	require.NoError(t, err)
	return rec
}

// refreshRequest builds a refresh for id proven with the certificate in
// resp and key k, asking for a new certificate for the same keys.
func refreshRequest(t testing.TB, k agentKeys, id Identity, resp *IdentityResponse, now time.Time) *RefreshRequest {
	t.Helper()
	cert := leafOf(t, resp)
	req, err := NewRefreshRequest(k.sign, id, cert, []byte(k.csr(t, id)), now, 0)
	require.NoError(t, err)
	return req
}

func leafOf(t testing.TB, resp *IdentityResponse) *x509.Certificate {
	t.Helper()
	certs, err := ParseCertificatesPEM([]byte(resp.Certificate))
	require.NoError(t, err)
	require.Len(t, certs, 1)
	return certs[0]
}

// rawCSR builds a CSR from parts, for requests NewCSR refuses to make.
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
