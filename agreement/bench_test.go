package agreement

import (
	"context"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha3"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// rsaBaseline seals the way Open Horizon protects agreement messages today:
// the body under AES-256-GCM with a fresh key, the key wrapped with
// RSA-OAEP-SHA3-256 to the recipient, the whole signed with
// RSA-PSS-SHA3-256 by the sender; RSA-2048 keys; JSON on the wire.
type rsaBaseline struct {
	sender, recipient *rsa.PrivateKey
}

type rsaEnvelope struct {
	WrappedKey []byte `json:"wrappedKey"`
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
	Signature  []byte `json:"signature"`
}

var pssOptions = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA3_256}

func (e *rsaEnvelope) digest() []byte {
	h := sha3.New256()
	h.Write(e.WrappedKey)
	h.Write(e.Nonce)
	h.Write(e.Ciphertext)
	return h.Sum(nil)
}

// seal and open encode and decode the proposal exactly as SealProposal and
// OpenProposal do, so the comparison is of the protection alone.
func (rb *rsaBaseline) seal(p Proposal) ([]byte, error) {
	plaintext, err := p.encode()
	if err != nil {
		return nil, err
	}
	env, err := rb.protect(plaintext)
	if err != nil {
		return nil, err
	}
	return json.Marshal(env)
}

// protect is the cryptography of seal.
func (rb *rsaBaseline) protect(plaintext []byte) (*rsaEnvelope, error) {
	key := make([]byte, 32)
	rand.Read(key)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	env := &rsaEnvelope{Nonce: make([]byte, gcm.NonceSize())}
	rand.Read(env.Nonce)
	env.Ciphertext = gcm.Seal(nil, env.Nonce, plaintext, nil)
	if env.WrappedKey, err = rsa.EncryptOAEP(sha3.New256(), rand.Reader, &rb.recipient.PublicKey, key, nil); err != nil {
		return nil, err
	}
	if env.Signature, err = rsa.SignPSS(rand.Reader, rb.sender, crypto.SHA3_256, env.digest(), pssOptions); err != nil {
		return nil, err
	}
	return env, nil
}

func (rb *rsaBaseline) open(b []byte) (Proposal, error) {
	var env rsaEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return Proposal{}, err
	}
	if err := rsa.VerifyPSS(&rb.sender.PublicKey, crypto.SHA3_256, env.digest(), env.Signature, pssOptions); err != nil {
		return Proposal{}, err
	}
	key, err := rsa.DecryptOAEP(sha3.New256(), nil, rb.recipient, env.WrappedKey, nil)
	if err != nil {
		return Proposal{}, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return Proposal{}, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return Proposal{}, err
	}
	if len(env.Nonce) != gcm.NonceSize() {
		return Proposal{}, errors.New("bad nonce")
	}
	plaintext, err := gcm.Open(nil, env.Nonce, env.Ciphertext, nil)
	if err != nil {
		return Proposal{}, err
	}
	return decodeProposal(plaintext)
}

var benchRSA = sync.OnceValues(func() (*rsaBaseline, error) {
	sender, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	recipient, err := rsa.GenerateKey(rand.Reader, 2048)
	return &rsaBaseline{sender, recipient}, err
})

// benchProposal is a proposal of 10 secrets whose JSON is about 4 KiB.
func benchProposal(b *testing.B) Proposal {
	p := proposalWithSecrets("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 10, 256)
	j, err := json.Marshal(p)
	require.NoError(b, err)
	require.InDelta(b, 4096, len(j), 512, "the benchmark is specified for a ~4 KiB proposal")
	return p
}

// reportCPU starts measuring process CPU time; the function it returns
// reports it per operation as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	start := testkit.ProcessCPU(b)
	return func() { b.ReportMetric(float64(testkit.ProcessCPU(b)-start)/float64(b.N), "cpu-ns/op") }
}

// acceptAll is a ReplayGuard that records nothing, so one envelope can be
// opened b.N times; the in-memory guard's cost (one map update under a
// mutex) is not what is compared here.
type acceptAll struct{}

func (acceptAll) Accept(context.Context, string, MessageType, uint64) error { return nil }

// BenchmarkSealProposal compares sealing a 10-secret proposal with each
// suite against the RSA-2048 baseline. Compare sec/op side by side:
//
//	go test -bench 'SealProposal|OpenProposal' -benchmem -run '^$' ./agreement/
func BenchmarkSealProposal(b *testing.B) {
	p := benchProposal(b)
	b.Run("baseline=rsa2048-oaep-pss-sha3", func(b *testing.B) {
		rb, err := benchRSA()
		require.NoError(b, err)
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := rb.seal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, suite := range suites() {
		b.Run("suite="+goldenName(suite), func(b *testing.B) {
			agbot, agent := mustKeys(b, suite), mustKeys(b, suite)
			h := Header{Sequence: 1, Time: t0}
			defer reportCPU(b)()
			for b.Loop() {
				if _, err := Seal(agbot, agent.Public(), p, h, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSealCrypto measures the cryptography of one seal alone, on the
// same ~4 KiB plaintext, without encoding the proposal or the envelope: the
// floor under BenchmarkSealProposal, and how far the ratio to the baseline
// can go. The part= benchmarks are the primitives that dominate it: an
// X25519 HPKE encapsulation is a key generation and an ECDH, each a full
// Montgomery ladder in crypto/ecdh; the baseline is dominated by the
// RSA-PSS signature.
//
//	go test -bench 'SealCrypto' -benchmem -run '^$' ./agreement/
func BenchmarkSealCrypto(b *testing.B) {
	p := benchProposal(b)
	plaintext, err := p.encode()
	require.NoError(b, err)
	b.Run("baseline=rsa2048-oaep-pss-sha3", func(b *testing.B) {
		rb, err := benchRSA()
		require.NoError(b, err)
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := rb.protect(plaintext); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, suite := range suites() {
		b.Run("suite="+goldenName(suite), func(b *testing.B) {
			agbot, agent := mustKeys(b, suite), mustKeys(b, suite)
			h := Header{Version: envelopeVersion, Suite: suite, SenderKeyID: agbot.Public().signingID, RecipientKeyID: agent.Public().EncryptionKeyID(),
				Type: TypeProposal, AgreementID: p.AgreementID, Sequence: 1, Time: t0}
			header, err := appendHeader(nil, h)
			require.NoError(b, err)
			defer reportCPU(b)()
			for b.Loop() {
				if _, _, _, err := protect(agbot, agent.Public(), header, plaintext); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("part=x25519-keygen", func(b *testing.B) {
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := ecdh.X25519().GenerateKey(rand.Reader); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("part=x25519-ecdh", func(b *testing.B) {
		priv, err := ecdh.X25519().GenerateKey(rand.Reader)
		require.NoError(b, err)
		peer, err := ecdh.X25519().GenerateKey(rand.Reader)
		require.NoError(b, err)
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := priv.ECDH(peer.PublicKey()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("part=ed25519ctx-sign", func(b *testing.B) {
		k := mustKeys(b, SuiteX25519)
		digest := make([]byte, 32)
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := k.signing.Sign(nil, digest, signatureOptions); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("part=rsa2048-pss-sha3-sign", func(b *testing.B) {
		rb, err := benchRSA()
		require.NoError(b, err)
		digest := make([]byte, 32)
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := rsa.SignPSS(rand.Reader, rb.sender, crypto.SHA3_256, digest, pssOptions); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOpenProposal compares opening (verify, decrypt, decode and
// validate) a 10-secret proposal with each suite against the baseline.
func BenchmarkOpenProposal(b *testing.B) {
	p := benchProposal(b)
	b.Run("baseline=rsa2048-oaep-pss-sha3", func(b *testing.B) {
		rb, err := benchRSA()
		require.NoError(b, err)
		env, err := rb.seal(p)
		require.NoError(b, err)
		b.SetBytes(int64(len(env)))
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := rb.open(env); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, suite := range suites() {
		b.Run("suite="+goldenName(suite), func(b *testing.B) {
			agbot, agent := mustKeys(b, suite), mustKeys(b, suite)
			env, err := Seal(agbot, agent.Public(), p, Header{Sequence: 1, Time: t0}, Options{})
			require.NoError(b, err)
			b.SetBytes(int64(len(env)))
			ctx := context.Background()
			defer reportCPU(b)()
			for b.Loop() {
				if _, _, err := Open[Proposal](ctx, agent, agbot.Public(), env, acceptAll{}, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRSABaselineRoundTrip keeps the benchmark's baseline honest: it must
// really encrypt, sign and reject tampering.
func TestRSABaselineRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("RSA key generation is slow")
	}
	rb, err := benchRSA()
	require.NoError(t, err)
	p := proposalWithSecrets("agr-1", 2, 10)
	env, err := rb.seal(p)
	require.NoError(t, err)
	require.NotContains(t, string(env), canary)
	got, err := rb.open(env)
	require.NoError(t, err)
	require.Equal(t, p.Services[0].secretNames(), got.Services[0].secretNames())
	var e rsaEnvelope
	require.NoError(t, json.Unmarshal(env, &e))
	e.Ciphertext[0] ^= 1
	tampered, err := json.Marshal(e)
	require.NoError(t, err)
	_, err = rb.open(tampered)
	require.Error(t, err)
}
