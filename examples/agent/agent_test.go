package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agent"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/relay"
)

var (
	node    = relay.Node{Org: "myorg", Node: "node-1"}
	service = agreement.ServiceRef{Org: "myorg", URL: "com.example.web", Version: "1.0.0", Container: "web"}
)

// fixture is the example's agent (the library's front door, with the
// example's environment files) running against a hub's identity API and
// relay served over HTTP, and the agbot's side of the conversation.
type fixture struct {
	t      *testing.T
	agent  *agent.Agent
	keys   *agreement.PrivateKeys // the agent's
	relay  *relay.Server
	agbot  *agreement.PrivateKeys
	logs   *logtest.Buffer
	seq    uint64
	guard  agreement.ReplayGuard
	envDir string
	root   string
	env    *envFiles
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
	server := relay.NewServer(relay.ServerOptions{Verifier: issuer.Verifier(), Keys: agbotKeys})
	mux := http.NewServeMux()
	mux.Handle("/identity/", http.StripPrefix("/identity", issuer.Handler(nil)))
	mux.Handle("/relay/", server)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	log, logs := logtest.NewLogger()
	f := &fixture{t: t, keys: agentKeys, relay: server, agbot: agbotKeys, logs: logs, guard: agreement.NewMemoryReplayGuard(),
		envDir: filepath.Join(dir, "env"), root: filepath.Join(dir, "secrets")}
	require.NoError(t, os.MkdirAll(f.envDir, 0o700))
	f.env = &envFiles{dir: f.envDir, log: log}
	f.env.setAPI("http://127.0.0.1:1")
	f.agent, err = agent.New(t.Context(), agent.Options{
		Instance: identity.Identity{Provider: "demo", Org: node.Org, Node: node.Node, InstanceID: node.Node},
		Keys:     agentKeys, Agbot: agbotKeys.Public(), Agbots: []string{srv.URL},
		Attest:       func(context.Context) (identity.Attestation, error) { return "attested", nil },
		Files:        agentapi.Options{Root: f.root, Logger: log},
		OnInstance:   f.env.write,
		OnMessage:    f.env.removeWiped,
		PollInterval: 50 * time.Millisecond,
		Logger:       log,
	})
	require.NoError(t, err)
	t.Cleanup(func() { f.agent.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	require.Eventually(t, func() bool { _, ok := server.Certificate(node); return ok }, 10*time.Second, 10*time.Millisecond)
	return f
}

// deliver hands the agent an envelope through the relay and returns the
// reply it sent, opened, or false when it sent none within a second.
func (f *fixture) deliver(ctx context.Context, envelope []byte) (agreement.Reply, bool) {
	f.t.Helper()
	id, replies, err := f.relay.Post(node, envelope)
	require.NoError(f.t, err)
	defer f.relay.Done(id)
	select {
	case b := <-replies:
		_, r, err := agreement.Open[agreement.Reply](f.t.Context(), f.agbot, f.keys.Public(), b, f.guard, agreement.Options{})
		require.NoError(f.t, err)
		return r, true
	case <-time.After(time.Second):
		return agreement.Reply{}, false
	case <-ctx.Done():
		return agreement.Reply{}, false
	}
}

func (f *fixture) seal(u agreement.Update) []byte {
	f.t.Helper()
	f.seq++
	env, err := agreement.Seal(f.agbot, f.keys.Public(), u, agreement.Header{Sequence: f.seq}, agreement.Options{})
	require.NoError(f.t, err)
	return env
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

func (f *fixture) secretsUpdate(id, value string) []byte {
	f.t.Helper()
	u, err := agreement.NewSecretsUpdate(id, agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{Service: service,
		Secrets: map[string]agreement.SecretDetails{"api_key": {Format: agreement.FormatRaw, Data: edgesecrets.Data{"value": []byte(value)}}}}}})
	require.NoError(f.t, err)
	return f.seal(u)
}

func (f *fixture) file() (string, error) {
	info, ok := f.agent.Files().Instance("web")
	if !ok {
		return "", edgesecrets.ErrNotFound
	}
	b, err := os.ReadFile(filepath.Join(info.MountSource, "api_key"))
	return string(b), err
}

// The example's environment files follow the instances: written with the
// token when a proposal is applied, kept through updates, removed with a
// cancellation.
func TestEnvironmentFilesFollowTheInstances(t *testing.T) {
	f := newFixture(t)
	r, ok := f.deliver(t.Context(), f.proposal("agreement-1", "VALUE-1"))
	require.True(t, ok)
	require.True(t, r.Accepted, r.Reason)
	envPath := filepath.Join(f.envDir, "web.json")
	env, err := demo.ReadEnv(envPath)
	require.NoError(t, err)
	info, _ := f.agent.Files().Instance("web")
	assert.Equal(t, demo.Env{API: "http://127.0.0.1:1", Instance: "web", Token: env.Token, Mount: info.MountSource}, env)
	_, ok = f.agent.Files().Instance("web")
	require.True(t, ok)

	r, ok = f.deliver(t.Context(), f.secretsUpdate("agreement-1", "VALUE-2"))
	require.True(t, ok)
	require.True(t, r.Accepted, r.Reason)
	env2, err := demo.ReadEnv(envPath)
	require.NoError(t, err)
	assert.Equal(t, env.Token, env2.Token, "the instance keeps its token")

	r, ok = f.deliver(t.Context(), f.seal(agreement.Update{AgreementID: "agreement-1", Kind: agreement.UpdateKindCancel, Payload: json.RawMessage(`{}`)}))
	require.True(t, ok)
	require.True(t, r.Accepted, r.Reason)
	_, err = os.Stat(envPath)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "the environment file is removed")
	assert.NotContains(t, f.logs.String(), "VALUE-")
}
