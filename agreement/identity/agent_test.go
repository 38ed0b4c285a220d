package identity

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestAgent returns an agent of testID with keys k talking to hubAPI,
// installing its certificates in f when f is not nil.
func newTestAgent(t *testing.T, hubAPI hub, k agentKeys, f *files) *Agent {
	t.Helper()
	opts := AgentOptions{Instance: testID, SigningKey: k.sign, EncryptionKey: k.enc.PublicKey()}
	switch h := hubAPI.(type) {
	case *Client:
		opts.Hub = h
	case *Issuer:
		opts.Issuer = h
	default:
		opts.Issuer = &Issuer{} // replaced below
	}
	if f != nil {
		opts.KeyFile, opts.CertFile = f.keyPath, f.certPath
	}
	a, err := NewAgent(opts)
	require.NoError(t, err)
	a.hub = hubAPI
	return a
}

func TestAgentOverHTTPWithFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		h := newHub(t)
		client := inMemoryClient(t, h.Issuer)
		f := testFiles(t)
		require.NoError(t, writeKeyFile(f.keyPath, newAgentKeys(t).sign))
		k := newAgentKeys(t)

		agent := newTestAgent(t, client, k, f)
		key, err := readKeyFile(f.keyPath)
		require.NoError(t, err)
		assert.True(t, key.Equal(k.sign), "NewAgent wrote the agent's key over the old one")
		first, err := agent.Register(ctx, "good")
		require.NoError(t, err)
		assert.Equal(t, h.record(t, testID).CurrentSerial, serialString(first))
		onDisk, err := f.readCertificate()
		require.NoError(t, err)
		assert.Equal(t, first.Raw, onDisk[0].Raw)
		assert.Equal(t, h.trust.chain[0].Raw, onDisk[1].Raw, "the CA chain follows the leaf")

		time.Sleep(16 * time.Hour)
		second, err := agent.Renew(ctx)
		require.NoError(t, err)
		rec := h.record(t, testID)
		assert.Equal(t, serialString(second), rec.CurrentSerial)
		assert.Equal(t, serialString(first), rec.PreviousSerial)
		assert.Equal(t, second, agent.certificate())
		onDisk, err = f.readCertificate()
		require.NoError(t, err)
		assert.Equal(t, second.Raw, onDisk[0].Raw)

		// After a restart the agent reads its key and picks up the
		// installed certificate.
		restarted, err := NewAgent(AgentOptions{Instance: testID, EncryptionKey: k.enc.PublicKey(), Hub: client, KeyFile: f.keyPath, CertFile: f.certPath})
		require.NoError(t, err)
		require.NoError(t, restarted.LoadCertificate())
		assert.Equal(t, second.Raw, restarted.certificate().Raw)
		_, err = restarted.Renew(ctx)
		require.NoError(t, err)

		got, err := h.Verifier().Verify(ctx, restarted.CertificateChain())
		require.NoError(t, err)
		assert.True(t, got.SigningKey.Equal(k.sign.Public()))
	})
}

// lyingHub answers refreshes with whatever respond returns.
type lyingHub struct {
	hub
	respond func(t *testing.T) *responseBody
	t       *testing.T
}

func (l lyingHub) refresh(ctx context.Context, id Identity, req *refreshBody) (*responseBody, error) {
	return l.respond(l.t), nil
}

func TestAgentRefusesBadCertificates(t *testing.T) {
	ctx := context.Background()
	k := newAgentKeys(t)
	other := testID
	other.InstanceID = "i-other"
	cases := []struct {
		name    string
		respond func(t *testing.T, h *testHub) *responseBody
		kind    error
		msg     string
	}{
		{name: "another signing key", kind: edgesecrets.ErrInvalid, msg: "for another signing key; not installed",
			respond: func(t *testing.T, h *testHub) *responseBody {
				k2 := newAgentKeys(t)
				k2.enc = k.enc
				return h.register(t, k2, testID)
			}},
		{name: "another encryption key", kind: edgesecrets.ErrInvalid, msg: "carries another encryption key; not installed",
			respond: func(t *testing.T, h *testHub) *responseBody {
				k2 := newAgentKeys(t)
				k2.sign = k.sign
				return h.register(t, k2, testID)
			}},
		{name: "another instance", kind: edgesecrets.ErrInvalid, msg: "names " + other.String() + "; not installed",
			respond: func(t *testing.T, h *testHub) *responseBody { return h.register(t, k, other) }},
		{name: "another CA", kind: ErrUnauthenticated, msg: "does not chain to the hub CA; not installed",
			respond: func(t *testing.T, h *testHub) *responseBody { return newHub(t).register(t, k, testID) }},
		{name: "garbage", kind: edgesecrets.ErrInvalid, msg: "is not PEM",
			respond: func(t *testing.T, h *testHub) *responseBody {
				return &responseBody{Certificate: "nope", CACertificates: "nope"}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t)
			f := testFiles(t)
			require.NoError(t, writeKeyFile(f.keyPath, k.sign))
			agent := newTestAgent(t, lyingHub{hub: h.Issuer, t: t, respond: func(t *testing.T) *responseBody { return tc.respond(t, h) }}, k, f)
			first, err := agent.Register(ctx, "good")
			require.NoError(t, err)
			before, err := os.ReadFile(f.certPath)
			require.NoError(t, err)

			got, err := agent.Renew(ctx)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Equal(t, tc.kind, kindOf(err), "%v", err)
			assert.ErrorContains(t, err, tc.msg)
			assert.Equal(t, first, agent.certificate(), "the current certificate stays")
			after, err := os.ReadFile(f.certPath)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the file stays")
		})
	}
}

func TestAgentLoadExpiredCertificate(t *testing.T) {
	synctest.Test(t, testAgentLoadExpiredCertificate)
}

func testAgentLoadExpiredCertificate(t *testing.T) {
	h := newHub(t)
	f := testFiles(t)
	k := newAgentKeys(t)
	require.NoError(t, writeKeyFile(f.keyPath, k.sign))
	_, err := newTestAgent(t, h.Issuer, k, f).Register(context.Background(), "good")
	require.NoError(t, err)

	time.Sleep(25 * time.Hour)
	restarted := newTestAgent(t, h.Issuer, k, f)
	err = restarted.LoadCertificate()
	require.ErrorIs(t, err, ErrExpired)
	assert.Nil(t, restarted.certificate())
}

func TestAgentRenewBeforeRegister(t *testing.T) {
	h := newHub(t)
	agent := newTestAgent(t, h.Issuer, newAgentKeys(t), nil)
	_, err := agent.Renew(context.Background())
	assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.ErrorContains(t, err, "register first")
	assert.ErrorIs(t, agent.LoadCertificate(), edgesecrets.ErrInvalid)
}

func TestNewAgentChecksOptions(t *testing.T) {
	h := newHub(t)
	k := newAgentKeys(t)
	good := AgentOptions{Instance: testID, SigningKey: k.sign, EncryptionKey: k.enc.PublicKey(), Issuer: h.Issuer}
	for name, mut := range map[string]func(*AgentOptions){
		"bad identity":      func(o *AgentOptions) { o.Instance.Org = "a/b" },
		"no signing key":    func(o *AgentOptions) { o.SigningKey = nil },
		"no encryption key": func(o *AgentOptions) { o.EncryptionKey = nil },
		"no hub":            func(o *AgentOptions) { o.Issuer = nil },
		"a hub twice":       func(o *AgentOptions) { o.Hub = inMemoryClient(t, h.Issuer) },
		"key file alone":    func(o *AgentOptions) { o.KeyFile = filepath.Join(t.TempDir(), "agent.key") },
		"no key in the key file": func(o *AgentOptions) {
			o.SigningKey = nil
			o.KeyFile, o.CertFile = filepath.Join(t.TempDir(), "agent.key"), filepath.Join(t.TempDir(), "agent.crt")
		},
		"a key file for a key that cannot be written": func(o *AgentOptions) {
			o.SigningKey = opaqueSigner{k.sign}
			o.KeyFile, o.CertFile = filepath.Join(t.TempDir(), "agent.key"), filepath.Join(t.TempDir(), "agent.crt")
		},
	} {
		o := good
		mut(&o)
		_, err := NewAgent(o)
		assert.Error(t, err, name)
	}
	_, err := NewAgent(good)
	assert.NoError(t, err)
}

// opaqueSigner is a signing key that cannot be exported, like one in an HSM.
type opaqueSigner struct{ key ed25519.PrivateKey }

func (o opaqueSigner) Public() crypto.PublicKey { return o.key.Public() }

func (o opaqueSigner) Sign(r io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	return o.key.Sign(r, msg, opts)
}

// An agent whose key is not an ed25519.PrivateKey (an HSM) works without
// key and certificate files.
func TestAgentWithOpaqueSigner(t *testing.T) {
	h := newHub(t)
	k := newAgentKeys(t)
	agent, err := NewAgent(AgentOptions{Instance: testID, SigningKey: opaqueSigner{k.sign}, EncryptionKey: k.enc.PublicKey(), Issuer: h.Issuer})
	require.NoError(t, err)
	_, err = agent.Register(t.Context(), "good")
	require.NoError(t, err)
	_, err = agent.Renew(t.Context())
	require.NoError(t, err)
}
