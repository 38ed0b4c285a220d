package agreement_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
)

// sealedAgent is the agent side of the update protocol, as a node runs it:
// it opens sealed updates with its keys and replay guard, decides, and
// answers with a reply sealed to the agbot.
type sealedAgent struct {
	keys   *agreement.PrivateKeys
	agbot  *agreement.PublicKeys
	guard  *agreement.MemoryReplayGuard
	decide func(agreement.Update) (accepted bool, reason string)

	mu       sync.Mutex
	opened   map[string][]openedUpdate // by agreement
	failures []error                   // envelopes it refused
}

// openedUpdate is an update the agent opened, with its envelope sequence.
type openedUpdate struct {
	sequence uint64
	update   agreement.Update
}

func newSealedAgent(t testing.TB, agbot *agreement.PublicKeys, decide func(agreement.Update) (bool, string)) *sealedAgent {
	t.Helper()
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	if decide == nil {
		decide = func(agreement.Update) (bool, string) { return true, "" }
	}
	return &sealedAgent{keys: keys, agbot: agbot, guard: agreement.NewMemoryReplayGuard(), decide: decide, opened: map[string][]openedUpdate{}}
}

// handle opens an update envelope and returns the sealed reply.
func (a *sealedAgent) handle(ctx context.Context, envelope []byte) ([]byte, error) {
	h, u, err := agreement.OpenUpdate(ctx, a.keys, a.agbot, envelope, a.guard)
	if err != nil {
		a.mu.Lock()
		a.failures = append(a.failures, err)
		a.mu.Unlock()
		return nil, err
	}
	accepted, reason := a.decide(u)
	if _, err := u.Secrets(); err != nil {
		accepted, reason = false, err.Error()
	}
	a.mu.Lock()
	a.opened[u.AgreementID] = append(a.opened[u.AgreementID], openedUpdate{h.Sequence, u})
	a.mu.Unlock()
	// One reply per update: the update's sequence orders the replies too.
	return agreement.SealReply(a.keys, a.agbot, agreement.NewReply(h, accepted, reason), agreement.Header{Sequence: h.Sequence})
}

func (a *sealedAgent) updates(id string) []openedUpdate {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]openedUpdate(nil), a.opened[id]...)
}

func (a *sealedAgent) refused() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]error(nil), a.failures...)
}

// agentLink is an EnvelopeSender routing envelopes to agents in process,
// as the exchange between agbot and nodes would. drop[id] = n loses the
// reply to the n-th envelope of agreement id, after the agent acted on it.
type agentLink struct {
	agents map[string]*sealedAgent // by agreement

	mu   sync.Mutex
	sent map[string][][]byte // envelopes by agreement
	drop map[string]int
}

func newAgentLink() *agentLink {
	return &agentLink{agents: map[string]*sealedAgent{}, sent: map[string][][]byte{}, drop: map[string]int{}}
}

func (l *agentLink) Send(ctx context.Context, id string, envelope []byte) ([]byte, error) {
	l.mu.Lock()
	l.sent[id] = append(l.sent[id], envelope)
	n := len(l.sent[id])
	a, ok := l.agents[id]
	l.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no route to the agent of %s", id)
	}
	reply, err := a.handle(ctx, envelope)
	if err != nil {
		return nil, errors.New("agent did not answer")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drop[id] == n {
		return nil, errors.New("reply lost on the way")
	}
	return reply, nil
}

func (l *agentLink) envelopes(id string) [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.sent[id]...)
}

// agentKeys returns the AgentKeys lookup for the agents of link.
func (l *agentLink) agentKeys(_ context.Context, id string) (*agreement.PublicKeys, error) {
	a, ok := l.agents[id]
	if !ok {
		return nil, fmt.Errorf("no identity for the agent of %s", id)
	}
	return a.keys.Public(), nil
}

func newSealingTransport(t testing.TB, agbot *agreement.PrivateKeys, link *agentLink) *agreement.SealingTransport {
	t.Helper()
	tr, err := agreement.NewSealingTransport(agreement.SealingTransportOptions{Keys: agbot, AgentKeys: link.agentKeys, Sender: link})
	require.NoError(t, err)
	return tr
}

func TestSealingTransportThroughOutbox(t *testing.T) {
	ctx := context.Background()
	agbot := mustGenerate(t)
	link := newAgentLink()
	agent := newSealedAgent(t, agbot.Public(), nil)
	link.agents["ag1"] = agent
	link.drop["ag1"] = 1 // the agent applies the first envelope; its reply is lost
	clock := clockwork.NewFakeClock()
	o, err := agreement.NewOutbox(ctx, newSealingTransport(t, agbot, link), agreement.OutboxOptions{Clock: clock, Backoff: time.Minute})
	require.NoError(t, err)
	runOutbox(t, o)

	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v1"}})))
	require.Eventually(t, func() bool { r, _ := o.Lookup("ag1"); return r.Reason != "" }, waitFor, time.Millisecond)
	assert.Equal(t, agreement.StatusPending, status(o, "ag1"))
	advanceWhenWaiting(t, clock, time.Minute)
	require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusAccepted }, waitFor, time.Millisecond)

	opened := agent.updates("ag1")
	require.Len(t, opened, 2, "the resend is opened, not refused as a replay")
	assert.Less(t, opened[0].sequence, opened[1].sequence)
	rec, _ := o.Lookup("ag1")
	assert.Equal(t, opened[1].sequence, rec.Sequence, "the outbox records the sequence it sealed with")
	assert.Equal(t, rec.Sequence, agent.guard.Last("ag1", agreement.TypeUpdate))
	assert.Equal(t, map[string]map[string]string{"web": {"db": "v1"}}, contents(t, opened[1].update))
	assert.Empty(t, agent.refused())

	// The first envelope, replayed by someone on the link, is refused.
	_, err = link.Send(ctx, "ag1", link.envelopes("ag1")[0])
	assert.Error(t, err)
	require.Len(t, agent.refused(), 1)
	assert.ErrorIs(t, agent.refused()[0], agreement.ErrReplay)
}

// mustGenerate returns a fresh X25519 key set, the fast suite.
func mustGenerate(t testing.TB) *agreement.PrivateKeys {
	t.Helper()
	k, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	return k
}

func TestSealingTransportDeliverErrors(t *testing.T) {
	ctx := context.Background()
	const canary = "canary-Vx81-secret"
	agbot := mustGenerate(t)
	u := secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": canary}})
	otherAgent := mustGenerate(t)

	// reply answers sequence 7 of ag1 with keys signer, as built by edit.
	reply := func(signer *agreement.PrivateKeys, edit func(*agreement.Reply)) []byte {
		r := agreement.NewReply(agreement.Header{Type: agreement.TypeUpdate, AgreementID: "ag1", Sequence: 7}, true, "")
		if edit != nil {
			edit(&r)
		}
		env, err := agreement.SealReply(signer, agbot.Public(), r, agreement.Header{Sequence: 7})
		require.NoError(t, err)
		return env
	}
	agent := mustGenerate(t)
	good := reply(agent, nil)

	cases := []struct {
		name      string
		agentKeys func(context.Context, string) (*agreement.PublicKeys, error)
		answer    []byte
		sendErr   error
		guard     agreement.ReplayGuard
		wantIs    error
		wantText  string
	}{
		{name: "accepted", answer: good},
		{name: "no identity", agentKeys: func(context.Context, string) (*agreement.PublicKeys, error) {
			return nil, errors.New("identity revoked")
		}, wantText: `agreement "ag1": agent keys: identity revoked`},
		{name: "nil keys", agentKeys: func(context.Context, string) (*agreement.PublicKeys, error) { return nil, nil }, wantIs: agreement.ErrInvalidKey},
		{name: "send fails", sendErr: errors.New("exchange down"), wantText: "exchange down"},
		{name: "garbage reply", answer: []byte(`{"not":"an envelope"}`), wantIs: agreement.ErrMalformed},
		{name: "reply from another agent", answer: reply(otherAgent, nil), wantIs: agreement.ErrWrongSender},
		{name: "reply names nothing", answer: reply(agent, func(r *agreement.Reply) { r.InReplyTo = agreement.MessageRef{} }), wantIs: agreement.ErrInvalidMessage},
		{name: "replayed reply", answer: good, guard: replayedGuard(t, "ag1", 7), wantIs: agreement.ErrReplay},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keys := c.agentKeys
			if keys == nil {
				keys = func(context.Context, string) (*agreement.PublicKeys, error) { return agent.Public(), nil }
			}
			var sent []byte
			tr, err := agreement.NewSealingTransport(agreement.SealingTransportOptions{
				Keys: agbot, AgentKeys: keys, ReplyGuard: c.guard,
				Sender: senderFunc(func(_ context.Context, id string, env []byte) ([]byte, error) {
					assert.Equal(t, "ag1", id)
					sent = env
					return c.answer, c.sendErr
				}),
			})
			require.NoError(t, err)
			got, err := tr.Deliver(ctx, agreement.Delivery{Update: u, Sequence: 7, Attempt: 1})
			if c.wantIs == nil && c.wantText == "" {
				require.NoError(t, err)
				assert.True(t, got.Accepted)
				assert.Equal(t, agreement.MessageRef{Type: agreement.TypeUpdate, Sequence: 7}, got.InReplyTo)
				h, opened, err := agreement.OpenUpdate(ctx, agent, agbot.Public(), sent, agreement.NewMemoryReplayGuard())
				require.NoError(t, err, "sealed to the agent's keys")
				assert.Equal(t, uint64(7), h.Sequence, "sealed with the delivery's sequence")
				assert.Equal(t, u.Payload, opened.Payload)
				return
			}
			require.Error(t, err)
			if c.wantIs != nil {
				assert.ErrorIs(t, err, c.wantIs)
			}
			assert.ErrorContains(t, err, c.wantText)
			for _, leak := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary))} {
				assert.NotContains(t, err.Error(), leak)
			}
		})
	}

	_, err := agreement.NewSealingTransport(agreement.SealingTransportOptions{})
	for _, want := range []string{"missing Keys", "missing AgentKeys", "missing Sender"} {
		assert.ErrorContains(t, err, want)
	}
}

// replayedGuard returns a guard that has seen reply seq of agreement id.
func replayedGuard(t *testing.T, id string, seq uint64) agreement.ReplayGuard {
	g := agreement.NewMemoryReplayGuard()
	require.NoError(t, g.Accept(context.Background(), id, agreement.TypeReply, seq))
	return g
}

// FuzzSealingTransportReply feeds arbitrary answers from the link to
// Deliver: it must never panic, and only the agent's authentic reply
// yields a Reply.
func FuzzSealingTransportReply(f *testing.F) {
	agbot, agent := mustGenerate(f), mustGenerate(f)
	u := secretsUpdate(f, "ag1", map[string]map[string]string{"web": {"db": "v"}})
	want := agreement.NewReply(agreement.Header{Type: agreement.TypeUpdate, AgreementID: "ag1", Sequence: 7}, true, "")
	good, err := agreement.SealReply(agent, agbot.Public(), want, agreement.Header{Sequence: 7})
	require.NoError(f, err)
	want.Version = agreement.MessageVersion
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(bytes.Replace(good, []byte(`"signature":"`), []byte(`"signature":"A`), 1))
	for _, s := range []string{"", "{}", "null", `{"version":1,"header":"","enc":"","ciphertext":"","signature":""}`} {
		f.Add([]byte(s))
	}
	deliver := func(t testing.TB, answer []byte) (agreement.Reply, error) {
		tr, err := agreement.NewSealingTransport(agreement.SealingTransportOptions{
			Keys:      agbot,
			AgentKeys: func(context.Context, string) (*agreement.PublicKeys, error) { return agent.Public(), nil },
			Sender: senderFunc(func(context.Context, string, []byte) ([]byte, error) {
				return answer, nil
			}),
		})
		require.NoError(t, err)
		return tr.Deliver(context.Background(), agreement.Delivery{Update: u, Sequence: 7, Attempt: 1})
	}
	got, err := deliver(f, good)
	require.NoError(f, err)
	require.Equal(f, want, got)

	f.Fuzz(func(t *testing.T, answer []byte) {
		if got, err := deliver(t, answer); err == nil {
			assert.Equal(t, want, got)
		}
	})
}
