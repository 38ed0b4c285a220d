package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/testkit/forgetful"
)

// run runs the fixture's agent until the test ends.
func (f *fixture) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.agent.Run(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		assert.NoError(f.t, <-done, "Run returns nil once its context ends")
	})
}

// published waits for the relay to hold a certificate for the node and
// returns it.
func (f *fixture) published(other []byte) []byte {
	f.t.Helper()
	var chain []byte
	require.Eventually(f.t, func() bool {
		var ok bool
		chain, ok = f.relay.Certificate(node)
		return ok && string(chain) != string(other)
	}, 10*time.Second, 10*time.Millisecond, "the agent publishes a certificate on the relay")
	return chain
}

// post sends an envelope through the relay and waits for the agent's
// reply to it, opened.
func (f *fixture) post(envelope []byte) agreement.Reply {
	f.t.Helper()
	id, replies, err := f.relay.Post(node, envelope)
	require.NoError(f.t, err)
	defer f.relay.Done(id)
	select {
	case b := <-replies:
		_, r, err := agreement.Open[agreement.Reply](f.t.Context(), f.agbot, f.keys.Public(), b, f.guard, agreement.Options{})
		require.NoError(f.t, err)
		return r
	case <-time.After(10 * time.Second):
		f.t.Fatal("no reply")
		return agreement.Reply{}
	}
}

// Run registers the identity through the agbot's identity API, publishes
// the certificate on its relay, and applies and answers what arrives
// there.
func TestRunRegistersAndTakesMessages(t *testing.T) {
	f := newFixture(t)
	f.run()
	f.published(nil)
	r := f.post(f.proposal("agreement-1", "VALUE-1"))
	assert.True(t, r.Accepted, r.Reason)
	content, err := f.file()
	require.NoError(t, err)
	assert.Equal(t, "VALUE-1", content)
	_, ok := f.instance("web")
	assert.True(t, ok)
}

// An agent whose identity record the hub lost registers again, on its
// own, once the agbot refuses its certificate, and is delivered to again
// (issue 28: the agent recovers on its own).
func TestRunRegistersAgainWhenTheHubLostTheIdentity(t *testing.T) {
	records := forgetful.New()
	f := newFixture(t, func(o *Options) { o.RegisterBackoff = 50 * time.Millisecond })
	var err error
	f.issuer, err = identity.NewIssuer(identity.IssuerOptions{Store: records,
		Attest: func(context.Context, identity.AttestationRequest) (time.Time, error) { return time.Now(), nil }})
	require.NoError(t, err)
	f.useIssuer()
	f.run()
	first := f.published(nil)
	assert.True(t, f.post(f.proposal("agreement-1", "VALUE-1")).Accepted)

	records.Forget()
	// The agbot finds the certificate no longer verifies and drops it
	// from its relay (the agbot does so when it looks up its keys); the agent publishes it
	// again, learns that its identity is lost, and registers again.
	require.True(t, f.relay.DropCertificate(node, first))
	second := f.published(first)
	assert.NotEqual(t, string(first), string(second), "a new certificate")
	r := f.post(f.secretsUpdate("agreement-1", "VALUE-2"))
	assert.True(t, r.Accepted, r.Reason)
	content, err := f.file()
	require.NoError(t, err)
	assert.Equal(t, "VALUE-2", content)
	assert.Contains(t, f.logs.String(), "the agbot refused the certificate as a lost identity")
}

// Instances kept from an earlier run get fresh tokens when Run starts,
// handed to OnInstance; the old token stops working.
func TestRunGivesKeptInstancesFreshTokens(t *testing.T) {
	f := newFixture(t)
	f.register()
	r, ok := f.deliver(f.proposal("agreement-1", "VALUE-1"))
	require.True(t, ok)
	require.True(t, r.Accepted)
	old, ok := f.instance("web")
	require.True(t, ok)
	require.NoError(t, f.agent.Close())

	// The agent restarts over the same files.
	g := newFixture(t, func(o *Options) {
		o.Keys, o.Agbot, o.Files = f.keys, f.agbot.Public(), agentapi.Options{Root: f.root}
	})
	g.run()
	require.Eventually(t, func() bool { _, ok := g.instance("web"); return ok }, 10*time.Second, 10*time.Millisecond)
	fresh, _ := g.instance("web")
	assert.NotEqual(t, old.Token, fresh.Token)
	_, ok = g.agent.tokens.Authenticate(t.Context(), "web", string(old.Token))
	assert.False(t, ok, "the old token no longer works")
	_, ok = g.agent.tokens.Authenticate(t.Context(), "web", string(fresh.Token))
	assert.True(t, ok)
}

func TestNewNamesEveryMissingOption(t *testing.T) {
	_, err := New(t.Context(), Options{})
	require.Error(t, err)
	for _, field := range []string{"Instance", "Keys is required", "Agbot is required", "Agbots (at least one URL) is required", "Attest is required", "Files.Root is required"} {
		assert.Contains(t, err.Error(), field)
	}
	f := newFixture(t)
	_, err = New(t.Context(), Options{Instance: f.agent.opts.Instance, Keys: f.keys, Agbot: f.agbot.Public(), Agbots: []string{"ftp://x"},
		Attest: f.agent.opts.Attest, Files: agentapi.Options{Root: t.TempDir()}})
	assert.ErrorContains(t, err, "Agbots[0]")
}

// An Instance never prints its token, whatever the verb, nor in a log.
func TestInstanceNeverPrintsItsToken(t *testing.T) {
	inst := Instance{ID: "web", Mount: "/var/lib/agent/web", Token: "t0ken-never-shown"}
	var logs strings.Builder
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("instance", slog.Any("inst", inst))
	slog.New(slog.NewTextHandler(&logs, nil)).Info("instance", slog.Any("inst", inst))
	for _, out := range []string{fmt.Sprintf("%v", inst), fmt.Sprintf("%+v", inst), fmt.Sprintf("%#v", inst), fmt.Sprintf("%s", inst), fmt.Sprint(&inst), logs.String()} {
		assert.NotContains(t, out, inst.Token)
		assert.Contains(t, out, "web")
	}
}
