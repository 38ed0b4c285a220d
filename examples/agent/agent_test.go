package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/internal/logtest"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

var (
	node    = relay.Node{Org: "myorg", Node: "node-1"}
	service = agreement.ServiceRef{Org: "myorg", URL: "com.example.web", Version: "1.0.0", Container: "web"}
)

// fixture is an agent wired to a real relay and store, and the agbot's
// side of the conversation: its keys, an identity issuer, the relay.
type fixture struct {
	t       *testing.T
	agent   *agent
	keys    *agreement.PrivateKeys // the agent's
	relay   *relay.Server
	agbot   *agreement.PrivateKeys
	logs    *logtest.Buffer
	seq     uint64
	guard   agreement.ReplayGuard
	envDir  string
	root    string
	relayTS *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	agbotKeys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	agentKeys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	issuer, err := identity.NewIssuer(identity.IssuerOptions{Attest: func(context.Context, identity.AttestationRequest) (time.Time, error) {
		return time.Now(), nil
	}})
	require.NoError(t, err)
	id, err := identity.NewAgent(identity.AgentOptions{
		Instance:   identity.Identity{Provider: "demo", Org: node.Org, Node: node.Node, InstanceID: node.Node},
		SigningKey: agentKeys.Signer(), EncryptionKey: agentKeys.Public().EncryptionKey(), Issuer: issuer})
	require.NoError(t, err)
	_, err = id.Register(t.Context(), "attested")
	require.NoError(t, err)

	dir := t.TempDir()
	log, logs := logtest.NewLogger()
	server := relay.NewServer(relay.ServerOptions{Verifier: issuer.Verifier(), Keys: agbotKeys})
	srv := httptest.NewServer(server)
	t.Cleanup(srv.Close)
	client, err := relay.NewClient(srv.URL, srv.Client())
	require.NoError(t, err)
	require.NoError(t, client.PublishCertificate(t.Context(), node, id.CertificateChain()))
	f := &fixture{
		t: t, keys: agentKeys, relay: server, agbot: agbotKeys, logs: logs, guard: agreement.NewMemoryReplayGuard(),
		envDir: filepath.Join(dir, "env"), root: filepath.Join(dir, "secrets"), relayTS: srv,
	}
	tokens := &agentapi.TokenTable{}
	store, err := agentapi.Open(t.Context(), agentapi.Options{Root: f.root, Tokens: tokens, Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	f.agent, err = newAgent(store, tokens, agentOptions{
		log: log, keys: agentKeys, agbotKeys: agbotKeys.Public(), node: node, upstreams: []*upstream{{url: srv.URL, relay: client, identity: id}}, envDir: f.envDir,
	})
	require.NoError(t, err)
	f.agent.apiURL = "http://127.0.0.1:1"
	require.NoError(t, os.MkdirAll(f.envDir, 0o700))
	return f
}

// deliver hands the agent an envelope through the relay and returns the
// reply it sent, opened, or false when it sent none.
func (f *fixture) deliver(envelope []byte) (agreement.Reply, bool) {
	f.t.Helper()
	id, replies, err := f.relay.Post(node, envelope)
	require.NoError(f.t, err)
	defer f.relay.Done(id)
	f.agent.handle(f.t.Context(), f.agent.upstreams[0], relay.Message{ID: id, Envelope: envelope})
	select {
	case b := <-replies:
		_, r, err := agreement.Open[agreement.Reply](f.t.Context(), f.agbot, f.keys.Public(), b, f.guard, agreement.Options{})
		require.NoError(f.t, err)
		return r, true
	case <-time.After(100 * time.Millisecond):
		return agreement.Reply{}, false
	}
}

func (f *fixture) proposal(id, value string) []byte {
	f.t.Helper()
	f.seq++
	p := agreement.Proposal{AgreementID: id, Services: []agreement.ServiceSecrets{{Service: service,
		Secrets: map[string]agreement.SecretDetails{"api_key": {Format: agreement.FormatRaw, Data: secretstore.Data{"value": []byte(value)}}}}}}
	env, err := agreement.Seal(f.agbot, f.keys.Public(), p, agreement.Header{Sequence: f.seq}, agreement.Options{})
	require.NoError(f.t, err)
	return env
}

func (f *fixture) update(u agreement.Update) []byte {
	f.t.Helper()
	f.seq++
	env, err := agreement.Seal(f.agbot, f.keys.Public(), u, agreement.Header{Sequence: f.seq}, agreement.Options{})
	require.NoError(f.t, err)
	return env
}

func (f *fixture) secretsUpdate(id, value string) []byte {
	f.t.Helper()
	u, err := agreement.NewSecretsUpdate(id, agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{Service: service,
		Secrets: map[string]agreement.SecretDetails{"api_key": {Format: agreement.FormatRaw, Data: secretstore.Data{"value": []byte(value)}}}}}})
	require.NoError(f.t, err)
	return f.update(u)
}

func (f *fixture) file() (string, error) {
	info, ok := f.agent.store.Instance("web")
	if !ok {
		return "", fmt.Errorf("instance web: %w", secretstore.ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(info.MountSource, "api_key"))
	return string(b), err
}

func TestAgentLifecycle(t *testing.T) {
	f := newFixture(t)

	// A proposal: the secret file and the instance's environment.
	proposal := f.proposal("agreement-1", "VALUE-1")
	r, ok := f.deliver(proposal)
	require.True(t, ok)
	assert.True(t, r.Accepted, r.Reason)
	assert.Equal(t, agreement.TypeProposal, r.InReplyTo.Type)
	content, err := f.file()
	require.NoError(t, err)
	assert.Equal(t, "VALUE-1", content)
	env, err := demo.ReadEnv(filepath.Join(f.envDir, "web.json"))
	require.NoError(t, err)
	info, _ := f.agent.store.Instance("web")
	mount := info.MountSource
	assert.Equal(t, demo.Env{API: "http://127.0.0.1:1", Instance: "web", Token: env.Token, Mount: mount}, env)
	token, ok := f.agent.tokens.Token(t.Context(), "web")
	require.True(t, ok)
	assert.Equal(t, env.Token, token)

	// The same envelope again (the agbot's resend after a lost reply):
	// answered again, nothing rewritten.
	r, ok = f.deliver(proposal)
	require.True(t, ok)
	assert.True(t, r.Accepted, r.Reason)

	// An update: the file is rewritten and listed as updated.
	r, ok = f.deliver(f.secretsUpdate("agreement-1", "VALUE-2"))
	require.True(t, ok)
	assert.True(t, r.Accepted, r.Reason)
	content, err = f.file()
	require.NoError(t, err)
	assert.Equal(t, "VALUE-2", content)
	// The proposal replayed after the update (by the relay): older than
	// the update, ignored without a reply.
	_, ok = f.deliver(proposal)
	assert.False(t, ok, "no reply to a replayed message")
	content, err = f.file()
	require.NoError(t, err)
	assert.Equal(t, "VALUE-2", content, "no rollback")
	info, _ = f.agent.store.Instance("web")
	assert.Equal(t, []string{"api_key"}, info.Updated)
	env2, err := demo.ReadEnv(filepath.Join(f.envDir, "web.json"))
	require.NoError(t, err)
	assert.Equal(t, env.Token, env2.Token, "the instance keeps its token")

	// An update of a kind the agent does not know: refused, saying why.
	r, ok = f.deliver(f.update(agreement.Update{AgreementID: "agreement-1", Kind: "restart", Payload: json.RawMessage(`{}`)}))
	require.True(t, ok)
	assert.False(t, r.Accepted)
	assert.Contains(t, r.Reason, `unknown update kind "restart"`)

	// Cancelled: files wiped, environment and token withdrawn.
	r, ok = f.deliver(f.update(agreement.Update{AgreementID: "agreement-1", Kind: agreement.UpdateKindCancel, Payload: json.RawMessage(`{}`)}))
	require.True(t, ok)
	assert.True(t, r.Accepted, r.Reason)
	_, err = f.file()
	assert.ErrorIs(t, err, secretstore.ErrNotFound)
	assert.NoDirExists(t, mount)
	_, err = os.Stat(filepath.Join(f.envDir, "web.json"))
	assert.True(t, errors.Is(err, fs.ErrNotExist))
	_, ok = f.agent.tokens.Token(t.Context(), "web")
	assert.False(t, ok)

	// An update for the ended agreement is refused.
	r, ok = f.deliver(f.secretsUpdate("agreement-1", "VALUE-3"))
	require.True(t, ok)
	assert.False(t, r.Accepted)

	assert.NotContains(t, f.logs.String(), "VALUE-")
}

// Messages the agent cannot trust are dropped: no reply, nothing written.
func TestAgentIgnoresUntrustedMessages(t *testing.T) {
	f := newFixture(t)
	impostor, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	p := agreement.Proposal{AgreementID: "agreement-x", Services: []agreement.ServiceSecrets{{Service: service,
		Secrets: map[string]agreement.SecretDetails{"api_key": {Data: secretstore.Data{"value": []byte("VALUE-x")}}}}}}
	forged, err := agreement.Seal(impostor, f.keys.Public(), p, agreement.Header{Sequence: 1}, agreement.Options{})
	require.NoError(t, err)
	tampered := f.proposal("agreement-y", "VALUE-y")
	tampered[len(tampered)/2] ^= 1

	for name, env := range map[string][]byte{"not from the agbot": forged, "altered": tampered, "not an envelope": []byte("hello")} {
		t.Run(name, func(t *testing.T) {
			f.agent.handle(t.Context(), f.agent.upstreams[0], relay.Message{ID: 1, Envelope: env})
			assert.Contains(t, f.logs.String(), "ignoring a message that does not open")
			assert.Empty(t, f.agent.store.InstanceIDs())
			entries, err := os.ReadDir(f.envDir)
			require.NoError(t, err)
			assert.Empty(t, entries)
		})
	}
	assert.NotContains(t, f.logs.String(), "VALUE-")
}

func TestInstanceID(t *testing.T) {
	assert.Equal(t, "web", instanceID(service))
	assert.Equal(t, "com.example.web", instanceID(agreement.ServiceRef{Org: "myorg", URL: "com.example.web"}))
}
