package identity

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestAgent(t *testing.T, hubAPI Hub, k agentKeys, clock Clock, files *Files) *Agent {
	t.Helper()
	a, err := NewAgent(AgentOptions{Instance: testID, SigningKey: k.sign, EncryptionKey: k.enc.PublicKey(), Hub: hubAPI, Files: files, Clock: clock})
	require.NoError(t, err)
	return a
}

func TestAgentOverHTTPWithFiles(t *testing.T) {
	ctx := context.Background()
	s := newServer(t, HandlerOptions{})
	f := testFiles(t)
	require.NoError(t, f.WriteKey(newAgentKeys(t).sign))
	k := newAgentKeys(t)
	require.NoError(t, f.WriteKey(k.sign), "a new key replaces the old one")
	key, err := f.ReadKey()
	require.NoError(t, err)
	k.sign = key

	agent := newTestAgent(t, s.client, k, s.clock, &f)
	first, err := agent.Register(ctx, "good")
	require.NoError(t, err)
	assert.Equal(t, s.record(t, testID).CurrentSerial, serialString(first))
	onDisk, err := f.ReadCertificate()
	require.NoError(t, err)
	assert.Equal(t, first.Raw, onDisk[0].Raw)
	assert.Equal(t, s.CACertificates()[0].Raw, onDisk[1].Raw, "the CA chain follows the leaf")

	s.clock.Advance(16 * time.Hour)
	second, err := agent.Renew(ctx)
	require.NoError(t, err)
	rec := s.record(t, testID)
	assert.Equal(t, serialString(second), rec.CurrentSerial)
	assert.Equal(t, serialString(first), rec.PreviousSerial)
	assert.Equal(t, second, agent.Certificate())
	onDisk, err = f.ReadCertificate()
	require.NoError(t, err)
	assert.Equal(t, second.Raw, onDisk[0].Raw)

	// After a restart the agent picks up the installed certificate.
	restarted := newTestAgent(t, s.client, k, s.clock, &f)
	require.NoError(t, restarted.LoadCertificate())
	assert.Equal(t, second.Raw, restarted.Certificate().Raw)
	_, err = restarted.Renew(ctx)
	require.NoError(t, err)

	got, err := s.Verifier().Verify(ctx, restarted.CertificateChain()...)
	require.NoError(t, err)
	assert.True(t, got.SigningKey.Equal(k.sign.Public()))
}

// lyingHub answers refreshes with whatever respond returns.
type lyingHub struct {
	Hub
	respond func(t *testing.T) *IdentityResponse
	t       *testing.T
}

func (l lyingHub) Refresh(ctx context.Context, id Identity, req *RefreshRequest) (*IdentityResponse, error) {
	return l.respond(l.t), nil
}

func TestAgentRefusesBadCertificates(t *testing.T) {
	ctx := context.Background()
	k := newAgentKeys(t)
	other := testID
	other.InstanceID = "i-other"
	cases := []struct {
		name    string
		respond func(t *testing.T, h *hub) *IdentityResponse
		kind    error
		msg     string
	}{
		{name: "another signing key", kind: ErrInvalid, msg: "for another signing key; not installed",
			respond: func(t *testing.T, h *hub) *IdentityResponse {
				k2 := newAgentKeys(t)
				k2.enc = k.enc
				return h.register(t, k2, testID)
			}},
		{name: "another encryption key", kind: ErrInvalid, msg: "carries another encryption key; not installed",
			respond: func(t *testing.T, h *hub) *IdentityResponse {
				k2 := newAgentKeys(t)
				k2.sign = k.sign
				return h.register(t, k2, testID)
			}},
		{name: "another instance", kind: ErrInvalid, msg: "names " + other.String() + "; not installed",
			respond: func(t *testing.T, h *hub) *IdentityResponse { return h.register(t, k, other) }},
		{name: "another CA", kind: ErrUnauthenticated, msg: "does not chain to the hub CA; not installed",
			respond: func(t *testing.T, h *hub) *IdentityResponse { return newHub(t).register(t, k, testID) }},
		{name: "garbage", kind: ErrInvalid, msg: "is not PEM",
			respond: func(t *testing.T, h *hub) *IdentityResponse {
				return &IdentityResponse{Certificate: "nope", CACertificates: "nope"}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t)
			f := testFiles(t)
			require.NoError(t, f.WriteKey(k.sign))
			agent := newTestAgent(t, lyingHub{Hub: h.Issuer, t: t, respond: func(t *testing.T) *IdentityResponse { return tc.respond(t, h) }}, k, h.clock, &f)
			first, err := agent.Register(ctx, "good")
			require.NoError(t, err)
			before, err := os.ReadFile(f.CertPath)
			require.NoError(t, err)

			got, err := agent.Renew(ctx)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Equal(t, tc.kind, KindOf(err), "%v", err)
			assert.ErrorContains(t, err, tc.msg)
			assert.Equal(t, first, agent.Certificate(), "the current certificate stays")
			after, err := os.ReadFile(f.CertPath)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the file stays")
		})
	}
}

func TestAgentLoadExpiredCertificate(t *testing.T) {
	h := newHub(t)
	f := testFiles(t)
	k := newAgentKeys(t)
	require.NoError(t, f.WriteKey(k.sign))
	_, err := newTestAgent(t, h.Issuer, k, h.clock, &f).Register(context.Background(), "good")
	require.NoError(t, err)

	h.clock.Advance(25 * time.Hour)
	restarted := newTestAgent(t, h.Issuer, k, h.clock, &f)
	err = restarted.LoadCertificate()
	require.ErrorIs(t, err, ErrExpired)
	assert.Nil(t, restarted.Certificate())
}

func TestAgentRenewBeforeRegister(t *testing.T) {
	h := newHub(t)
	agent := newTestAgent(t, h.Issuer, newAgentKeys(t), h.clock, nil)
	_, err := agent.Renew(context.Background())
	assert.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "register first")
	assert.ErrorIs(t, agent.LoadCertificate(), ErrInvalid)
}

func TestNewAgentChecksOptions(t *testing.T) {
	h := newHub(t)
	k := newAgentKeys(t)
	good := AgentOptions{Instance: testID, SigningKey: k.sign, EncryptionKey: k.enc.PublicKey(), Hub: h.Issuer}
	for name, mut := range map[string]func(*AgentOptions){
		"bad identity":      func(o *AgentOptions) { o.Instance.Org = "a/b" },
		"no signing key":    func(o *AgentOptions) { o.SigningKey = nil },
		"no encryption key": func(o *AgentOptions) { o.EncryptionKey = nil },
		"no hub":            func(o *AgentOptions) { o.Hub = nil },
	} {
		o := good
		mut(&o)
		_, err := NewAgent(o)
		assert.Error(t, err, name)
	}
	_, err := NewAgent(good)
	assert.NoError(t, err)
}
