package identity

import (
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hpke"
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingStore is a CertStore whose writes (or reads) fail on demand.
type failingStore struct {
	CertStore
	putErr, getErr error
}

func (s *failingStore) Get(ctx context.Context, provider, instanceID string) (Record, error) {
	if s.getErr != nil {
		return Record{}, s.getErr
	}
	return s.CertStore.Get(ctx, provider, instanceID)
}

func (s *failingStore) Put(ctx context.Context, rec Record) (Record, error) {
	if s.putErr != nil {
		return Record{}, s.putErr
	}
	return s.CertStore.Put(ctx, rec)
}

var errDiskFull = errors.New("disk full at /var/lib/hub")

func TestRegisterIssuesCertificateAndRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub(t)
		k := newAgentKeys(t)
		resp := h.register(t, k, testID)

		assert.Equal(t, testID, resp.Identity)
		leaf := leafOf(t, resp)
		got, err := inspectCertificate(leaf)
		require.NoError(t, err)
		assert.Equal(t, testID, got.Identity)
		assert.True(t, got.SigningKey.Equal(k.sign.Public()))
		assert.True(t, sameEncryptionKey(got.EncryptionKey, k.enc.PublicKey()))
		assert.Equal(t, resp.Serial, got.Serial)
		assert.Equal(t, now().Add(24*time.Hour), leaf.NotAfter, "default lifetime is the policy maximum")
		assert.Equal(t, []string{testID.nodeURI(), testID.instanceURI()}, []string{leaf.URIs[0].String(), leaf.URIs[1].String()})

		rec := h.record(t, testID)
		assert.Equal(t, Record{Instance: testID, CurrentSerial: resp.Serial, NotAfter: leaf.NotAfter, UpdatedAt: now(), Revision: 1}, rec)

		require.Len(t, h.attested, 1)
		assert.Equal(t, testID, h.attested[0].Instance)
		assert.Equal(t, Attestation("good"), h.attested[0].Attestation)
	})
}

func TestRegisterCapsLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub(t, func(o *IssuerOptions) { o.MaxLifetime = time.Hour })
		k := newAgentKeys(t)
		for _, tc := range []struct {
			asked int64
			want  time.Duration
		}{{0, time.Hour}, {600, 10 * time.Minute}, {7200, time.Hour}, {1 << 62, time.Hour}} {
			req := registerRequest(t, k, testID, "good", now())
			req.LifetimeSeconds = tc.asked
			resign(t, k.sign, req, now())
			resp, err := h.Issuer.register(context.Background(), req)
			require.NoError(t, err)
			assert.Equal(t, now().Add(tc.want), leafOf(t, resp).NotAfter, "asked %d s", tc.asked)
		}
	})
}

// TestRegisterRefusals: one failure per case; none leaves a record behind.
func TestRegisterRefusals(t *testing.T) {
	k := newAgentKeys(t)
	good := func(t *testing.T, h *testHub) *registerBody {
		return registerRequest(t, k, testID, "good", now())
	}
	raw := func(mut func(*rawCSR)) func(t *testing.T, r *registerBody) {
		return func(t *testing.T, r *registerBody) {
			c := rawCSR{signer: k.sign, subject: pkix.Name{CommonName: testID.Node}, uris: []string{testID.nodeURI(), testID.instanceURI()}, enc: k.enc.PublicKey()}
			mut(&c)
			r.CSR = c.pem(t)
		}
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p256, err := hpke.DHKEM(ecdh.P256()).GenerateKey()
	require.NoError(t, err)

	cases := []struct {
		name    string
		hubOpts []hubOption
		setup   func(t *testing.T, h *testHub)
		mutate  func(t *testing.T, r *registerBody)
		// keepProof: the proof is not made again after mutate.
		keepProof bool
		kind      error
		msg       string
	}{
		{name: "bad CSR signature", kind: edgesecrets.ErrInvalid, msg: "CSR signature does not verify",
			mutate: func(t *testing.T, r *registerBody) {
				block, _ := pem.Decode([]byte(r.CSR))
				block.Bytes[len(block.Bytes)-1] ^= 0xff // last byte of the signature
				r.CSR = string(pem.EncodeToMemory(block))
			}},
		{name: "wrong CN", kind: edgesecrets.ErrInvalid, msg: `subject CN "node-2" is not the node id "node-1"`,
			mutate: raw(func(c *rawCSR) { c.subject.CommonName = "node-2" })},
		{name: "extra subject attribute", kind: edgesecrets.ErrInvalid, msg: "subject must be exactly CN=<node id>",
			mutate: raw(func(c *rawCSR) { c.subject.Organization = []string{"acme"} })},
		{name: "two instance ids", kind: edgesecrets.ErrInvalid, msg: "2 instance-id SAN URIs",
			mutate: raw(func(c *rawCSR) { c.uris = append(c.uris, "edgesecrets://instanceid/openhorizon.factory1/i-other") })},
		{name: "no instance id", kind: edgesecrets.ErrInvalid, msg: "0 instance-id SAN URIs",
			mutate: raw(func(c *rawCSR) { c.uris = c.uris[:1] })},
		{name: "two node URIs", kind: edgesecrets.ErrInvalid, msg: "2 node SAN URIs",
			mutate: raw(func(c *rawCSR) { c.uris = append(c.uris, "edgesecrets://node/acme/node-1") })},
		{name: "foreign URI scheme", kind: edgesecrets.ErrInvalid, msg: `SAN URI with scheme "spiffe"`,
			mutate: raw(func(c *rawCSR) { c.uris = append(c.uris, "spiffe://acme/node-1") })},
		{name: "unknown edgesecrets URI kind", kind: edgesecrets.ErrInvalid, msg: "unknown SAN URI kind edgesecrets://pod/",
			mutate: raw(func(c *rawCSR) { c.uris = append(c.uris, "edgesecrets://pod/acme/x") })},
		{name: "non-canonical URI", kind: edgesecrets.ErrInvalid, msg: "is not of the form",
			mutate: raw(func(c *rawCSR) { c.uris[0] = "edgesecrets://node/acme/node-1?x=1" })},
		{name: "DNS SAN", kind: edgesecrets.ErrInvalid, msg: "only URI names are allowed",
			mutate: raw(func(c *rawCSR) {
				der, _ := asn1.Marshal([]asn1.RawValue{
					{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(testID.nodeURI())},
					{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(testID.instanceURI())},
					{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte("node-1.example.com")},
				})
				c.san = &pkix.Extension{Id: oidSubjectAltName, Value: der}
			})},
		{name: "ECDSA key", kind: edgesecrets.ErrInvalid, msg: "only Ed25519 keys are allowed",
			mutate: raw(func(c *rawCSR) { c.signer = ecKey })},
		{name: "no HPKE key", kind: edgesecrets.ErrInvalid, msg: "no HPKE public key extension",
			mutate: raw(func(c *rawCSR) { c.noEnc = true })},
		{name: "unknown extension", kind: edgesecrets.ErrInvalid, msg: "extension 1.2.3.4 is not allowed",
			mutate: raw(func(c *rawCSR) {
				c.extra = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 2, 3, 4}, Value: []byte{5, 0}}}
			})},
		{name: "KEM not allowed by policy", kind: edgesecrets.ErrInvalid, msg: "HPKE KEM 0x0010 is not allowed",
			mutate: raw(func(c *rawCSR) { c.enc = p256.PublicKey() })},
		{name: "claimed node differs from CSR", kind: ErrForbidden, msg: `request claims provider "openhorizon.factory1" org "acme" node "node-9"`,
			mutate: func(t *testing.T, r *registerBody) { r.Node = "node-9" }},
		{name: "missing attestation", kind: edgesecrets.ErrInvalid, msg: `missing ["attestation"]`,
			mutate: func(t *testing.T, r *registerBody) { r.Attestation = "" }},
		{name: "stale attestation", kind: ErrForbidden, msg: "older than the 10m0s freshness window",
			setup: func(t *testing.T, h *testHub) {
				h.attestedAt = func() time.Time { return now().Add(-11 * time.Minute) }
			}},
		{name: "attestation from the future", kind: ErrForbidden, msg: "is in the future",
			setup: func(t *testing.T, h *testHub) {
				h.attestedAt = func() time.Time { return now().Add(2 * time.Minute) }
			}},
		{name: "attestor gives no time", kind: ErrForbidden, msg: "did not say when",
			setup: func(t *testing.T, h *testHub) { h.attestedAt = func() time.Time { return time.Time{} } }},
		{name: "attestor refusal", kind: ErrForbidden, msg: "the attestor refused the attestation",
			mutate: func(t *testing.T, r *registerBody) { r.Attestation = "forged" }},
		{name: "proof signed by another key", kind: ErrUnauthenticated, msg: "register proof signature does not verify with the CSR's key", keepProof: true,
			mutate: func(t *testing.T, r *registerBody) { resign(t, newAgentKeys(t).sign, r, t0) }},
		{name: "attestation changed after signing", kind: ErrUnauthenticated, msg: "register proof signature does not verify", keepProof: true,
			mutate: func(t *testing.T, r *registerBody) { r.Attestation = "good " }},
		{name: "nonce changed after signing", kind: ErrUnauthenticated, msg: "register proof signature does not verify", keepProof: true,
			mutate: func(t *testing.T, r *registerBody) { r.Nonce[0] ^= 1 }},
		{name: "stale proof", kind: ErrUnauthenticated, msg: "register proof signed at 1999-12-31T23:54:00Z is outside the 5m0s window", keepProof: true,
			mutate: func(t *testing.T, r *registerBody) { resign(t, k.sign, r, t0.Add(-6*time.Minute)) }},
		{name: "short nonce", kind: edgesecrets.ErrInvalid, msg: "nonce is 8 bytes, want 16 to 64", keepProof: true,
			mutate: func(t *testing.T, r *registerBody) { r.Nonce = r.Nonce[:8] }},
		{name: "no proof", kind: edgesecrets.ErrInvalid, msg: `missing ["nonce" "signedAt" "signature"]`, keepProof: true,
			mutate: func(t *testing.T, r *registerBody) { r.requestProof = requestProof{} }},
		{name: "record-store failure blocks issuing", kind: edgesecrets.ErrUnavailable, msg: "record store failed",
			hubOpts: []hubOption{func(o *IssuerOptions) { o.Store = &failingStore{CertStore: NewMemoryCertStore(), putErr: errDiskFull} }}},
		{name: "record-store read failure", kind: edgesecrets.ErrUnavailable, msg: "record store failed",
			hubOpts: []hubOption{func(o *IssuerOptions) { o.Store = &failingStore{CertStore: NewMemoryCertStore(), getErr: errDiskFull} }}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHub(t, tc.hubOpts...)
				if tc.setup != nil {
					tc.setup(t, h)
				}
				req := good(t, h)
				if tc.mutate != nil {
					tc.mutate(t, req)
					if !tc.keepProof {
						resign(t, k.sign, req, now())
					}
				}
				resp, err := h.Issuer.register(context.Background(), req)
				require.Error(t, err)
				assert.Nil(t, resp, "no certificate on failure")
				assert.Equal(t, tc.kind, kindOf(err), "%v", err)
				assert.Contains(t, err.Error(), tc.msg)
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, opRegister, e.Op)
				store := h.store
				if fs, ok := store.(*failingStore); ok {
					store = fs.CertStore
				}
				_, getErr := store.Get(context.Background(), testID.Provider, testID.InstanceID)
				assert.ErrorIs(t, getErr, edgesecrets.ErrNotFound, "a refused registration leaves no record")
			})
		})
	}
}

func TestRegisterAttestorErrorStaysAtTheHub(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub(t)
		k := newAgentKeys(t)
		_, err := h.Issuer.register(context.Background(), registerRequest(t, k, testID, "forged", now()))
		require.ErrorIs(t, err, errDocumentRejected, "the cause is kept for the hub's log")
		assert.NotContains(t, publicMessage(err), "ref-7f3a", "but never shown to the caller")
	})
}

func TestRegisterAgainAfterRevokeIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub(t)
		k := newAgentKeys(t)
		h.register(t, k, testID)
		require.NoError(t, h.Revoke(context.Background(), testID))

		_, err := h.Issuer.register(context.Background(), registerRequest(t, k, testID, "good", now()))
		require.ErrorIs(t, err, ErrForbidden)
		require.ErrorIs(t, err, ErrRevoked)
		assert.True(t, h.record(t, testID).Revoked, "the tombstone stays")
	})
}

func TestRegisterInstanceOfAnotherNodeIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub(t)
		k := newAgentKeys(t)
		first := h.register(t, k, testID)
		other := testID
		other.Node = "node-2"
		_, err := h.Issuer.register(context.Background(), registerRequest(t, k, other, "good", now()))
		require.ErrorIs(t, err, ErrForbidden)
		assert.Contains(t, err.Error(), `is registered to org "acme" node "node-1"`)
		assert.Equal(t, first.Serial, h.record(t, testID).CurrentSerial, "the record is untouched")
	})
}

func TestRegisterAgainReplacesRecord(t *testing.T) {
	h := newHub(t)
	k := newAgentKeys(t)
	first := h.register(t, k, testID)
	second := h.register(t, k, testID)
	rec := h.record(t, testID)
	assert.Equal(t, second.Serial, rec.CurrentSerial)
	assert.Empty(t, rec.PreviousSerial, "a new registration starts a new chain of serials")

	_, err := h.Verifier().verify(context.Background(), leafOf(t, first))
	assert.ErrorIs(t, err, ErrForbidden, "the first certificate no longer verifies")
}

func TestRefreshSerialStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHub(t)
		k := newAgentKeys(t)
		a := h.register(t, k, testID)

		// Current → the new serial becomes current, the old one previous.
		time.Sleep(time.Hour)
		b, err := h.refresh(ctx, testID, refreshRequest(t, k, testID, a, now()))
		require.NoError(t, err)
		rec := h.record(t, testID)
		assert.Equal(t, b.Serial, rec.CurrentSerial)
		assert.Equal(t, a.Serial, rec.PreviousSerial)
		assert.Equal(t, leafOf(t, b).NotAfter, rec.NotAfter)
		assert.NotEqual(t, a.Serial, b.Serial)

		// Previous → allowed (the agent lost b); only current moves.
		c, err := h.refresh(ctx, testID, refreshRequest(t, k, testID, a, now()))
		require.NoError(t, err)
		rec = h.record(t, testID)
		assert.Equal(t, c.Serial, rec.CurrentSerial)
		assert.Equal(t, a.Serial, rec.PreviousSerial)

		// Neither (b was superseded twice over) → revoked and refused.
		_, err = h.refresh(ctx, testID, refreshRequest(t, k, testID, b, now()))
		require.ErrorIs(t, err, ErrForbidden)
		require.ErrorIs(t, err, ErrRevoked)
		assert.Contains(t, err.Error(), "serial "+b.Serial+" is neither the current nor the previous serial")
		rec = h.record(t, testID)
		assert.True(t, rec.Revoked)
		assert.Equal(t, now(), rec.RevokedAt)

		// Later, even the current certificate is refused.
		_, err = h.refresh(ctx, testID, refreshRequest(t, k, testID, c, now()))
		require.ErrorIs(t, err, ErrRevoked)
		assert.Equal(t, 403, statusOf(err))
	})
}

func TestRefreshWithNewKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHub(t)
		k := newAgentKeys(t)
		a := h.register(t, k, testID)
		k2 := newAgentKeys(t)
		req, err := newRefreshBody(k.sign, testID, leafOf(t, a), []byte(k2.csr(t, testID)), now(), 0)
		require.NoError(t, err)
		b, err := h.refresh(ctx, testID, req)
		require.NoError(t, err)
		got, err := inspectCertificate(leafOf(t, b))
		require.NoError(t, err)
		assert.True(t, got.SigningKey.Equal(k2.sign.Public()), "the proof is by the old key, the new certificate is for the CSR's key")
		assert.True(t, sameEncryptionKey(got.EncryptionKey, k2.enc.PublicKey()))
	})
}

func TestRefreshRefusals(t *testing.T) {
	ctx := context.Background()
	k := newAgentKeys(t)
	other := testID
	other.Node, other.InstanceID = "node-2", "i-other"

	cases := []struct {
		name     string
		hubOpts  []hubOption
		build    func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody)
		kind     error
		sentinel error
		msg      string
	}{
		{name: "path names another instance than certificate and CSR", kind: ErrForbidden, msg: "the certificate names instance " + testID.String() + ", not the one in the path",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				req, err := newRefreshBody(k.sign, other, leafOf(t, a), []byte(k.csr(t, testID)), now(), 0)
				require.NoError(t, err)
				return other, req
			}},
		{name: "CSR names another instance", kind: ErrForbidden, msg: "the CSR names instance " + other.String() + ", not the one in the path",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				req, err := newRefreshBody(k.sign, testID, leafOf(t, a), []byte(k.csr(t, other)), now(), 0)
				require.NoError(t, err)
				return testID, req
			}},
		{name: "certificate of another instance", kind: ErrForbidden, msg: "the certificate names instance " + other.String(),
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				b := h.register(t, k, other)
				req, err := newRefreshBody(k.sign, testID, leafOf(t, b), []byte(k.csr(t, testID)), now(), 0)
				require.NoError(t, err)
				return testID, req
			}},
		{name: "tampered proof signature", kind: ErrUnauthenticated, msg: "refresh proof signature does not verify",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				req := refreshRequest(t, k, testID, a, now())
				req.Signature[0] ^= 1
				return testID, req
			}},
		{name: "CSR swapped after signing", kind: ErrUnauthenticated, msg: "refresh proof signature does not verify",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				req := refreshRequest(t, k, testID, a, now())
				req.CSR = newAgentKeys(t).csr(t, testID)
				return testID, req
			}},
		{name: "lifetime changed after signing", kind: ErrUnauthenticated, msg: "refresh proof signature does not verify",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				req := refreshRequest(t, k, testID, a, now())
				req.LifetimeSeconds = 60
				return testID, req
			}},
		{name: "nonce changed after signing", kind: ErrUnauthenticated, msg: "refresh proof signature does not verify",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				req := refreshRequest(t, k, testID, a, now())
				req.Nonce[3] ^= 1
				return testID, req
			}},
		{name: "stale proof", kind: ErrUnauthenticated, msg: "outside the 5m0s window",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				return testID, refreshRequest(t, k, testID, a, now().Add(-6*time.Minute))
			}},
		{name: "proof from the future", kind: ErrUnauthenticated, msg: "outside the 5m0s window",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				return testID, refreshRequest(t, k, testID, a, now().Add(6*time.Minute))
			}},
		{name: "proof 400 years ahead", kind: ErrUnauthenticated, msg: "outside the 5m0s window",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				// Far enough that now.Sub(signedAt) saturates at the minimum Duration.
				req := refreshRequest(t, k, testID, a, now())
				req.SignedAt = now().AddDate(400, 0, 0).Unix()
				csrDER, err := decodeSinglePEM([]byte(req.CSR), pemTypeCSR)
				require.NoError(t, err)
				req.Signature = ed25519.Sign(k.sign, refreshProofMessage(testID, req.requestProof, req.LifetimeSeconds, csrDER, leafOf(t, a).Raw))
				return testID, req
			}},
		{name: "certificate from another CA", kind: ErrUnauthenticated, msg: "does not chain to the hub CA",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				foreign := newHub(t).register(t, k, testID)
				return testID, refreshRequest(t, k, testID, foreign, now())
			}},
		{name: "expired certificate", kind: ErrUnauthenticated, sentinel: ErrExpired, msg: "certificate expired at",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				time.Sleep(25 * time.Hour)
				return testID, refreshRequest(t, k, testID, a, now())
			}},
		{name: "chain instead of leaf", kind: edgesecrets.ErrInvalid, msg: "certificate must be the leaf alone",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				req := refreshRequest(t, k, testID, a, now())
				req.Certificate += a.CACertificates
				return testID, req
			}},
		{name: "record-store failure blocks issuing", kind: edgesecrets.ErrUnavailable, msg: "record store failed",
			build: func(t *testing.T, h *testHub, a *responseBody) (Identity, *refreshBody) {
				h.store.(*failingStore).putErr = errDiskFull
				return testID, refreshRequest(t, k, testID, a, now())
			},
			hubOpts: []hubOption{func(o *IssuerOptions) { o.Store = &failingStore{CertStore: NewMemoryCertStore()} }}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHub(t, tc.hubOpts...)
				a := h.register(t, k, testID)
				before := h.record(t, testID)
				id, req := tc.build(t, h, a)
				resp, err := h.refresh(ctx, id, req)
				require.Error(t, err)
				assert.Nil(t, resp)
				assert.Equal(t, tc.kind, kindOf(err), "%v", err)
				if tc.sentinel != nil {
					assert.ErrorIs(t, err, tc.sentinel)
				}
				assert.Contains(t, err.Error(), tc.msg)
				assert.Equal(t, before, h.record(t, testID), "a refused refresh leaves the record as it was")
			})
		})
	}
}

func TestRevoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHub(t)
		k := newAgentKeys(t)
		a := h.register(t, k, testID)
		verifier := h.Verifier()
		_, err := verifier.verify(ctx, leafOf(t, a))
		require.NoError(t, err)

		time.Sleep(time.Minute)
		require.NoError(t, h.Revoke(ctx, testID))
		rec := h.record(t, testID)
		assert.True(t, rec.Revoked)
		assert.Equal(t, now(), rec.RevokedAt)
		assert.Equal(t, a.Serial, rec.CurrentSerial, "the tombstone keeps the serials")

		_, err = h.refresh(ctx, testID, refreshRequest(t, k, testID, a, now()))
		require.ErrorIs(t, err, ErrRevoked, "refresh refused")
		require.ErrorIs(t, err, ErrForbidden)

		_, err = verifier.verify(ctx, leafOf(t, a))
		require.ErrorIs(t, err, ErrRevoked, "the verifier refuses to hand out the key")

		require.NoError(t, h.Revoke(ctx, testID), "revoking again succeeds")
		assert.Equal(t, rec, h.record(t, testID), "and changes nothing")

		unknown := testID
		unknown.InstanceID = "i-unknown"
		assert.ErrorIs(t, h.Revoke(ctx, unknown), edgesecrets.ErrNotFound)

		wrongNode := testID
		wrongNode.Node = "node-2"
		assert.ErrorIs(t, h.Revoke(ctx, wrongNode), ErrForbidden)
	})
}

func TestNewIssuerNeedsAttestor(t *testing.T) {
	_, err := NewIssuer(IssuerOptions{})
	assert.ErrorContains(t, err, "no Attest")
}
