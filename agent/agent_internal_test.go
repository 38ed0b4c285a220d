package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/relay"
)

var (
	node    = relay.Node{Org: "myorg", Node: "node-1"}
	service = agreement.ServiceRef{Org: "myorg", URL: "com.example.web", Version: "1.0.0", Container: "web"}
)

// fixture is an Agent wired to a real relay and identity issuer served
// over HTTP, and the agbot's side of the conversation: its keys, the
// issuer, the relay.
type fixture struct {
	t            *testing.T
	agent        *Agent
	keys         *agreement.PrivateKeys // the agent's
	relay        *relay.Server
	issuer       *identity.Issuer
	agbot        *agreement.PrivateKeys
	logs         *logtest.Buffer
	seq          uint64
	guard        agreement.ReplayGuard
	root         string
	srv          *httptest.Server
	mux          http.Handler // the identity API and the relay; see useIssuer
	mu           sync.Mutex
	instances    map[string]Instance    // by id, as OnInstance gave them
	messages     []agentapi.Received    // as OnMessage gave them
	refusals     []error                // as OnMessage gave them
	publications chan relay.Publication // as the relay's OnCertificate gave them
}

func newFixture(t *testing.T, edit ...func(*Options)) *fixture {
	t.Helper()
	agbotKeys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	agentKeys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	issuer, err := identity.NewIssuer(identity.IssuerOptions{Attest: func(context.Context, identity.AttestationRequest) (time.Time, error) {
		return time.Now(), nil
	}})
	require.NoError(t, err)
	log, logs := logtest.NewLogger()
	f := &fixture{t: t, keys: agentKeys, issuer: issuer, agbot: agbotKeys, logs: logs, guard: agreement.NewMemoryReplayGuard(),
		root: filepath.Join(t.TempDir(), "secrets"), instances: map[string]Instance{}, publications: make(chan relay.Publication, 16)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.hub().ServeHTTP(w, r) }))
	t.Cleanup(f.srv.Close)
	f.useIssuer()
	opts := Options{
		Instance: identity.Identity{Provider: "demo", Org: node.Org, Node: node.Node, InstanceID: node.Node},
		Keys:     agentKeys, Agbot: agbotKeys.Public(), Agbots: []string{f.srv.URL},
		Attest: func(context.Context) (identity.Attestation, error) { return "attested", nil },
		Files:  agentapi.Options{Root: f.root},
		OnInstance: func(_ context.Context, inst Instance) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.instances[inst.ID] = inst
			return nil
		},
		OnMessage: func(_ context.Context, got agentapi.Received, err error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if err != nil {
				f.refusals = append(f.refusals, err)
				return
			}
			f.messages = append(f.messages, got)
		},
		PollInterval: 20 * time.Millisecond,
		Logger:       log,
	}
	for _, e := range edit {
		e(&opts)
	}
	f.agent, err = New(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { f.agent.Close() })
	return f
}

// useIssuer serves f.issuer's identity API and a relay that verifies
// certificates with it.
func (f *fixture) useIssuer() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.relay = relay.NewServer(relay.ServerOptions{Verifier: f.issuer.Verifier(), Keys: f.agbot,
		OnCertificate: func(p relay.Publication) { f.publications <- p }})
	mux := http.NewServeMux()
	mux.Handle("/identity/", http.StripPrefix("/identity", f.issuer.Handler(nil)))
	mux.Handle("/relay/", f.relay)
	f.mux = mux
}

// hub returns the handler serving the identity API and the relay.
func (f *fixture) hub() http.Handler {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mux
}

// register registers the agent's identity and publishes its certificate
// on the relay, as Run does.
func (f *fixture) register() {
	f.t.Helper()
	_, err := f.agent.identity.Register(f.t.Context(), "attested")
	require.NoError(f.t, err)
	require.NoError(f.t, f.agent.upstreams[0].relay.PublishCertificate(f.t.Context(), relay.Publication{Node: node, ChainPEM: f.agent.identity.CertificateChain()}))
}

// instance returns the instance OnInstance was given, by id.
func (f *fixture) instance(id string) (Instance, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	inst, ok := f.instances[id]
	return inst, ok
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
		Secrets: map[string]agreement.SecretDetails{"api_key": {Format: agreement.FormatRaw, Data: edgesecrets.Data{"value": []byte(value)}}}}}}
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
		Secrets: map[string]agreement.SecretDetails{"api_key": {Format: agreement.FormatRaw, Data: edgesecrets.Data{"value": []byte(value)}}}}}})
	require.NoError(f.t, err)
	return f.update(u)
}

func (f *fixture) file() (string, error) {
	info, ok := f.agent.files.Instance("web")
	if !ok {
		return "", fmt.Errorf("instance web: %w", edgesecrets.ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(info.MountSource, "api_key"))
	return string(b), err
}

// publication polls the relay once, as Run does, and returns what the
// agent published there.
func (f *fixture) publication() relay.Publication {
	f.t.Helper()
	f.agent.pollOne(f.t.Context(), f.agent.upstreams[0])
	select {
	case p := <-f.publications:
		return p
	case <-time.After(10 * time.Second):
		f.t.Fatal("the agent published no certificate")
		return relay.Publication{}
	}
}

// An agent over empty files says so when it publishes its certificate,
// and one holding an agreement's secrets does not: the agbot proposes
// again to the first (an agent wiped with its keys kept held nothing until
// a secret rotated: seed 7 of the fault simulation).
func TestAgentSaysWhenItHoldsNothing(t *testing.T) {
	f := newFixture(t)
	_, err := f.agent.identity.Register(t.Context(), "attested")
	require.NoError(t, err)
	chain := f.agent.identity.CertificateChain()
	assert.Equal(t, relay.Publication{Node: node, ChainPEM: chain, HoldsNothing: true}, f.publication(), "new, over empty files")

	reply, ok := f.deliver(f.proposal("agr-1", "s3cret-held"))
	require.True(t, ok)
	require.True(t, reply.Accepted, reply.Reason)
	f.agent.upstreams[0].published = nil // as a restarted agbot's relay asks
	assert.Equal(t, relay.Publication{Node: node, ChainPEM: chain}, f.publication(), "holding the agreement's secrets")
	assert.Contains(t, f.logs.String(), `"holds_nothing":false`)
}

func TestAgentLifecycle(t *testing.T) {
	f := newFixture(t)
	f.register()

	// A proposal: the secret file and the instance's environment.
	proposal := f.proposal("agreement-1", "VALUE-1")
	r, ok := f.deliver(proposal)
	require.True(t, ok)
	assert.True(t, r.Accepted, r.Reason)
	assert.Equal(t, agreement.TypeProposal, r.InReplyTo.Type)
	content, err := f.file()
	require.NoError(t, err)
	assert.Equal(t, "VALUE-1", content)
	inst, ok := f.instance("web")
	require.True(t, ok, "OnInstance gave the instance its token")
	info, _ := f.agent.files.Instance("web")
	mount := info.MountSource
	assert.Equal(t, mount, inst.Mount)
	token, ok := f.agent.tokens.Token(t.Context(), "web")
	require.True(t, ok)
	assert.Equal(t, string(inst.Token), token)
	assert.NotContains(t, fmt.Sprint(inst), string(inst.Token), "printing an Instance hides its token")

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
	info, _ = f.agent.files.Instance("web")
	assert.Equal(t, []string{"api_key"}, info.Updated)
	token2, _ := f.agent.tokens.Token(t.Context(), "web")
	assert.Equal(t, string(inst.Token), token2, "the instance keeps its token")

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
	assert.ErrorIs(t, err, edgesecrets.ErrNotFound)
	assert.NoDirExists(t, mount)
	f.mu.Lock()
	last := f.messages[len(f.messages)-1]
	f.mu.Unlock()
	assert.Equal(t, []string{"web"}, last.Removed, "OnMessage names the instances a cancellation removed")
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
		Secrets: map[string]agreement.SecretDetails{"api_key": {Data: edgesecrets.Data{"value": []byte("VALUE-x")}}}}}}
	forged, err := agreement.Seal(impostor, f.keys.Public(), p, agreement.Header{Sequence: 1}, agreement.Options{})
	require.NoError(t, err)
	tampered := f.proposal("agreement-y", "VALUE-y")
	tampered[len(tampered)/2] ^= 1

	for name, env := range map[string][]byte{"not from the agbot": forged, "altered": tampered, "not an envelope": []byte("hello")} {
		t.Run(name, func(t *testing.T) {
			f.agent.handle(t.Context(), f.agent.upstreams[0], relay.Message{ID: 1, Envelope: env})
			assert.Contains(t, f.logs.String(), "ignoring a message that does not open")
			assert.Empty(t, f.agent.files.InstanceIDs())
			assert.Empty(t, f.instances)
		})
	}
	assert.NotContains(t, f.logs.String(), "VALUE-")
}

func TestAssignByContainer(t *testing.T) {
	got, err := assignByContainer(t.Context(), agreement.Proposal{Services: []agreement.ServiceSecrets{
		{Service: service}, {Service: agreement.ServiceRef{Org: "myorg", URL: "com.example.db"}}}})
	require.NoError(t, err)
	assert.Equal(t, agentapi.Instances{service: {ID: "web"}, {Org: "myorg", URL: "com.example.db"}: {ID: "com.example.db"}}, got)
}
