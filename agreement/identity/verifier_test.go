package identity

import (
	"context"
	"crypto/ecdh"
	"crypto/hpke"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerifierHandsOutTheAgentKeys(t *testing.T) {
	ctx := context.Background()
	h := newHub(t)
	k := newAgentKeys(t)
	resp := h.register(t, k, testID)

	v, err := NewVerifier(VerifierOptions{CACertificates: h.trust.chain, Store: h.store})
	require.NoError(t, err)
	got, err := v.Verify(ctx, []byte(resp.Certificate+resp.CACertificates))
	require.NoError(t, err)
	assert.Equal(t, testID, got.Instance)
	assert.Equal(t, resp.Serial, got.Serial)
	assert.Equal(t, resp.NotAfter, got.NotAfter)
	assert.Equal(t, leafOf(t, resp).NotBefore, got.NotBefore)
	assert.True(t, got.SigningKey.Equal(k.sign.Public()))
	assert.Equal(t, k.enc.PublicKey().KEM().ID(), got.EncryptionKey.KEM().ID())
	assert.Equal(t, k.enc.PublicKey().Bytes(), got.EncryptionKey.Bytes())

	// The key is usable: seal to it, the agent opens.
	sealed, err := hpke.Seal(got.EncryptionKey, hpke.HKDFSHA256(), hpke.AES256GCM(), []byte("info"), []byte("s3cr3t"))
	require.NoError(t, err)
	opened, err := hpke.Open(k.enc, hpke.HKDFSHA256(), hpke.AES256GCM(), []byte("info"), sealed)
	require.NoError(t, err)
	assert.Equal(t, []byte("s3cr3t"), opened)
}

func TestVerifierRefusals(t *testing.T) {
	ctx := context.Background()
	k := newAgentKeys(t)

	cases := []struct {
		name     string
		hubOpts  []hubOption
		verifier func(h *testHub) VerifierOptions
		act      func(t *testing.T, h *testHub, a *responseBody) *responseBody // returns the certificate to verify
		kind     error
		sentinel error
		msg      string
	}{
		{name: "previous serial is accepted", kind: nil,
			act: func(t *testing.T, h *testHub, a *responseBody) *responseBody {
				_, err := h.refresh(ctx, testID, refreshRequest(t, k, testID, a, now()))
				require.NoError(t, err)
				return a
			}},
		{name: "superseded serial", kind: ErrForbidden, msg: "is neither the current nor the previous serial",
			act: func(t *testing.T, h *testHub, a *responseBody) *responseBody {
				b, err := h.refresh(ctx, testID, refreshRequest(t, k, testID, a, now()))
				require.NoError(t, err)
				_, err = h.refresh(ctx, testID, refreshRequest(t, k, testID, b, now()))
				require.NoError(t, err)
				return a
			}},
		{name: "revoked", kind: ErrForbidden, sentinel: ErrRevoked, msg: "instance revoked at",
			act: func(t *testing.T, h *testHub, a *responseBody) *responseBody {
				require.NoError(t, h.Revoke(ctx, testID))
				return a
			}},
		{name: "expired", kind: ErrUnauthenticated, sentinel: ErrExpired, msg: "certificate expired at",
			act: func(t *testing.T, h *testHub, a *responseBody) *responseBody {
				time.Sleep(24*time.Hour + time.Second)
				return a
			}},
		{name: "another hub's CA", kind: ErrUnauthenticated, msg: "does not chain to the hub CA",
			act: func(t *testing.T, h *testHub, a *responseBody) *responseBody { return newHub(t).register(t, k, testID) }},
		{name: "no record", kind: edgesecrets.ErrNotFound, msg: "no record for the instance",
			verifier: func(h *testHub) VerifierOptions {
				return VerifierOptions{CACertificates: h.trust.chain, Store: NewMemoryCertStore()}
			}},
		{name: "store down", kind: edgesecrets.ErrUnavailable, msg: "record store failed",
			verifier: func(h *testHub) VerifierOptions {
				return VerifierOptions{CACertificates: h.trust.chain, Store: &failingStore{CertStore: h.store, getErr: errDiskFull}}
			}},
		{name: "KEM not allowed by the agbot", kind: ErrForbidden, msg: "HPKE KEM 0x647a is not allowed",
			verifier: func(h *testHub) VerifierOptions {
				return VerifierOptions{CACertificates: h.trust.chain, Store: h.store, AllowedKEMs: []uint16{hpke.DHKEM(ecdh.X25519()).ID()}}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHub(t, tc.hubOpts...)
				a := h.register(t, k, testID)
				target := a
				if tc.act != nil {
					target = tc.act(t, h, a)
				}
				opts := VerifierOptions{CACertificates: h.trust.chain, Store: h.store}
				if tc.verifier != nil {
					opts = tc.verifier(h)
				}
				v, err := NewVerifier(opts)
				require.NoError(t, err)
				got, err := v.verify(ctx, leafOf(t, target))
				if tc.kind == nil {
					require.NoError(t, err)
					assert.Equal(t, target.Serial, got.Serial)
					return
				}
				require.Error(t, err)
				assert.Nil(t, got)
				assert.Equal(t, tc.kind, kindOf(err), "%v", err)
				if tc.sentinel != nil {
					assert.ErrorIs(t, err, tc.sentinel)
				}
				assert.Contains(t, err.Error(), tc.msg)
				assert.NotContains(t, publicMessage(err), errDiskFull.Error())
			})
		})
	}
}

func TestNewVerifierNeedsCAAndStore(t *testing.T) {
	_, err := NewVerifier(VerifierOptions{Store: NewMemoryCertStore()})
	assert.ErrorContains(t, err, "no CA certificates")
	h := newHub(t)
	_, err = NewVerifier(VerifierOptions{CACertificates: h.trust.chain})
	assert.ErrorContains(t, err, "no CertStore")
}
