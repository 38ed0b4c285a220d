package agentapi_test

import (
	"context"
	"encoding/json"
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
)

// receiverFixture is an agent's store and Receiver, and the agbot's side:
// its keys and a replay guard for the agent's replies.
type receiverFixture struct {
	t        *testing.T
	root     string
	opts     agentapi.Options
	store    *agentapi.Store
	receiver *agentapi.Receiver
	tokens   *agentapi.TokenTable
	agent    *agreement.PrivateKeys
	agbot    *agreement.PrivateKeys
	replies  agreement.ReplayGuard
	// sealedBefore is an envelope a test sealed for later.
	sealedBefore []byte
}

func newReceiverFixture(t *testing.T) *receiverFixture {
	t.Helper()
	agent, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	agbot, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	f := &receiverFixture{t: t, root: filepath.Join(t.TempDir(), "secrets"), agent: agent, agbot: agbot, replies: agreement.NewMemoryReplayGuard()}
	f.opts = agentapi.Options{Root: f.root}
	f.open()
	return f
}

// open (re)opens the store and its Receiver, as an agent start does.
func (f *receiverFixture) open() {
	f.t.Helper()
	f.tokens = &agentapi.TokenTable{}
	f.opts.Tokens = f.tokens
	s, err := agentapi.Open(context.Background(), f.opts)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { s.Close() })
	f.store = s
	f.receiver, err = agentapi.NewReceiver(s, agentapi.ReceiverOptions{
		Keys: f.agent, Agbot: f.agbot.Public(),
		Assign: func(_ context.Context, p agreement.Proposal) (agentapi.Instances, error) {
			inst := agentapi.Instances{}
			for _, ss := range p.Services {
				inst[ss.Service] = agentapi.Instance{ID: ss.Service.URL}
			}
			return inst, nil
		},
		Provision: func(_ context.Context, _ agreement.Proposal, inst agentapi.Instances) error {
			for _, i := range inst {
				if err := f.tokens.Set(i.ID, "token-"+i.ID); err != nil {
					return err
				}
			}
			return nil
		},
	})
	require.NoError(f.t, err)
}

func (f *receiverFixture) restart() {
	f.t.Helper()
	require.NoError(f.t, f.store.Close())
	f.open()
}

func (f *receiverFixture) proposal(seq uint64, value string) []byte {
	f.t.Helper()
	p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"cert": rawSecret([]byte(value))}}}}
	env, err := agreement.Seal(f.agbot, f.agent.Public(), p, agreement.Header{Sequence: seq}, agreement.Options{})
	require.NoError(f.t, err)
	return env
}

func (f *receiverFixture) update(seq uint64, u agreement.Update) []byte {
	f.t.Helper()
	env, err := agreement.Seal(f.agbot, f.agent.Public(), u, agreement.Header{Sequence: seq}, agreement.Options{})
	require.NoError(f.t, err)
	return env
}

func (f *receiverFixture) secrets(seq uint64, value string) []byte {
	f.t.Helper()
	return f.update(seq, secretsUpdate(f.t, agreement.ServiceSecrets{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"cert": rawSecret([]byte(value))}}))
}

func (f *receiverFixture) cancel(seq uint64) []byte {
	return f.update(seq, agreement.Update{AgreementID: "ag-1", Kind: agreement.UpdateKindCancel, Payload: json.RawMessage(`{}`)})
}

// receive hands the envelope to the Receiver and opens its reply as the
// agbot does.
func (f *receiverFixture) receive(env []byte) (agentapi.Received, agreement.Reply) {
	f.t.Helper()
	got, err := f.receiver.Receive(context.Background(), env)
	require.NoError(f.t, err)
	_, reply, err := agreement.Open[agreement.Reply](context.Background(), f.agbot, f.agent.Public(), got.Reply, f.replies, agreement.Options{})
	require.NoError(f.t, err, "the reply opens with a sequence above every earlier one")
	assert.Equal(f.t, agreement.MessageRef{Type: got.Header.Type, Sequence: got.Header.Sequence}, reply.InReplyTo)
	return got, reply
}

func (f *receiverFixture) content() string {
	f.t.Helper()
	b, err := f.store.ReadSecret(context.Background(), "svc-a", "cert")
	require.NoError(f.t, err)
	return string(b)
}

func TestReceiverLifecycle(t *testing.T) {
	f := newReceiverFixture(t)

	got, reply := f.receive(f.proposal(10, "v1"))
	assert.True(t, reply.Accepted, reply.Reason)
	assert.Equal(t, map[string][]string{"svc-a": {"cert"}}, got.Changes)
	assert.Equal(t, "v1", f.content())
	assert.Equal(t, []string{"svc-a"}, f.tokens.IDs(), "Provision ran")

	update := f.secrets(11, "v2")
	_, reply = f.receive(update)
	assert.True(t, reply.Accepted, reply.Reason)
	assert.Equal(t, "v2", f.content())

	// The same update again (the agbot lost the reply): answered again,
	// nothing rewritten.
	got, reply = f.receive(update)
	assert.True(t, reply.Accepted)
	assert.Empty(t, got.Changes)

	// The proposal replayed, or a delayed resend of it sealed before the
	// update: below the floor, refused without a reply.
	for _, env := range [][]byte{f.proposal(10, "v1"), f.proposal(9, "v1")} {
		_, err := f.receiver.Receive(context.Background(), env)
		require.ErrorIs(t, err, agreement.ErrReplay)
	}
	assert.Equal(t, "v2", f.content())

	// An update of a kind the agent does not know: rejected, saying why.
	got, reply = f.receive(f.update(12, agreement.Update{AgreementID: "ag-1", Kind: "restart", Payload: json.RawMessage(`{}`)}))
	assert.False(t, reply.Accepted)
	assert.Contains(t, reply.Reason, `unknown update kind "restart"`)
	assert.ErrorIs(t, got.Err, edgesecrets.ErrInvalid)

	// Cancelled: instances removed, their tokens withdrawn.
	got, reply = f.receive(f.cancel(13))
	assert.True(t, reply.Accepted, reply.Reason)
	assert.Equal(t, []string{"svc-a"}, got.Removed)
	assert.Empty(t, f.store.InstanceIDs())
	assert.Empty(t, f.tokens.IDs())

	// Nothing from before the cancellation brings the instance back, not
	// even after a restart.
	f.restart()
	for _, env := range [][]byte{f.proposal(10, "v1"), update} {
		_, err := f.receiver.Receive(context.Background(), env)
		require.ErrorIs(t, err, agreement.ErrReplay)
	}
	assert.Empty(t, f.store.InstanceIDs())
}

// The agreement's replay state lost, truncated or corrupt while its
// instances exist: an old envelope replayed afterwards is still refused,
// the floor coming from the instances' metadata (issue 18: a missing
// replay.json let a relay roll a node back to its first proposal's value).
func TestReplayStateLostOrDamaged(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(t *testing.T, path string)
	}{
		{"lost", func(t *testing.T, path string) { require.NoError(t, os.Remove(path)) }},
		{"truncated", func(t *testing.T, path string) {
			b := mustRead(t, path)
			require.NoError(t, os.WriteFile(path, b[:len(b)/2], 0o600))
		}},
		{"emptied", func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, nil, 0o600)) }},
		{"reset", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte(`{"version":1,"agreements":{}}`), 0o600))
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			f := newReceiverFixture(t)
			first := f.proposal(10, "v1")
			_, reply := f.receive(first)
			require.True(t, reply.Accepted)
			older := f.secrets(20, "v2")
			_, reply = f.receive(older)
			require.True(t, reply.Accepted)
			_, reply = f.receive(f.secrets(30, "v3"))
			require.True(t, reply.Accepted)
			require.NoError(t, f.store.Close())
			damage.do(t, filepath.Join(f.root, "agreements.json"))

			f.open()
			for _, env := range [][]byte{first, older, f.proposal(25, "v2.5")} {
				_, err := f.receiver.Receive(context.Background(), env)
				require.ErrorIs(t, err, agreement.ErrReplay)
			}
			assert.Equal(t, "v3", f.content(), "no rollback")
			_, reply = f.receive(f.secrets(31, "v4"))
			assert.True(t, reply.Accepted, reply.Reason)
			assert.Equal(t, "v4", f.content())
		})
	}
}

// Replies carry increasing sequences across restarts, so the agbot's
// replay guard accepts every one.
func TestReplySequencesSurviveRestart(t *testing.T) {
	f := newReceiverFixture(t)
	f.receive(f.proposal(1, "v1"))
	f.restart()
	f.receive(f.secrets(2, "v2")) // receive fails if the reply's sequence is not above the first's
	f.restart()
	f.receive(f.secrets(3, "v3"))
	assert.Equal(t, "v3", f.content())
}

// What does not open gets no reply and changes nothing.
func TestReceiverRefusesWhatDoesNotOpen(t *testing.T) {
	f := newReceiverFixture(t)
	impostor, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"cert": rawSecret([]byte("forged"))}}}}
	forged, err := agreement.Seal(impostor, f.agent.Public(), p, agreement.Header{Sequence: 5}, agreement.Options{})
	require.NoError(t, err)
	tampered := f.proposal(6, "v")
	tampered[len(tampered)/2] ^= 1
	reply, err := agreement.Seal(f.agbot, f.agent.Public(), agreement.Reply{AgreementID: "ag-1", Accepted: true}, agreement.Header{Sequence: 7}, agreement.Options{})
	require.NoError(t, err)

	for name, c := range map[string]struct {
		env  []byte
		kind error
	}{
		"not from the agbot": {forged, agreement.ErrNotAuthentic},
		"altered":            {tampered, nil},
		"a reply":            {reply, edgesecrets.ErrInvalid},
		"not an envelope":    {[]byte("hello"), edgesecrets.ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := f.receiver.Receive(context.Background(), c.env)
			require.Error(t, err)
			if c.kind != nil {
				assert.ErrorIs(t, err, c.kind)
			}
			assert.Nil(t, got.Reply)
			assert.Empty(t, f.store.InstanceIDs())
		})
	}
	_, reply2 := f.receive(f.proposal(5, "v")) // the refusals set no floor
	assert.True(t, reply2.Accepted)
}

// Concurrent messages of one agreement: each is applied or refused as
// older than one applied before it; the newest wins.
func TestReceiverConcurrentMessages(t *testing.T) {
	f := newReceiverFixture(t)
	f.receive(f.proposal(1, "v1"))
	envs := make([][]byte, 8)
	for i := range envs {
		envs[i] = f.secrets(uint64(10+i), "v"+string(rune('a'+i)))
	}
	var wg sync.WaitGroup
	for _, env := range envs {
		wg.Go(func() {
			_, err := f.receiver.Receive(context.Background(), env)
			if err != nil {
				assert.ErrorIs(t, err, agreement.ErrReplay)
			}
		})
	}
	wg.Wait()
	_, err := f.receiver.Receive(context.Background(), envs[6])
	require.ErrorIs(t, err, agreement.ErrReplay, "the newest one (17) set the floor")
	_, err = f.receiver.Receive(context.Background(), envs[7])
	require.NoError(t, err)
	assert.Equal(t, "vh", f.content())
}

func TestNewReceiverChecksOptions(t *testing.T) {
	f := newReceiverFixture(t)
	_, err := agentapi.NewReceiver(nil, agentapi.ReceiverOptions{})
	assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
	_, err = agentapi.NewReceiver(f.store, agentapi.ReceiverOptions{Keys: f.agent, Agbot: f.agbot.Public()})
	assert.ErrorContains(t, err, "Assign")
}

// sealedAt seals a proposal of agreement ag-1 as if at the given time.
func (f *receiverFixture) sealedAt(seq uint64, value string, at time.Time) []byte {
	f.t.Helper()
	return f.sealedFor("ag-1", seq, value, at)
}

// sealedFor seals a proposal of agreement id as if at the given time.
func (f *receiverFixture) sealedFor(id string, seq uint64, value string, at time.Time) []byte {
	f.t.Helper()
	p := agreement.Proposal{AgreementID: id, Services: []agreement.ServiceSecrets{{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"cert": rawSecret([]byte(value))}}}}
	env, err := agreement.Seal(f.agbot, f.agent.Public(), p, agreement.Header{Sequence: seq, Time: at}, agreement.Options{})
	require.NoError(f.t, err)
	return env
}

// An agent that lost its replay state but kept its keys (its root wiped,
// or agreements.json gone with no instance left to give the floor) refuses
// an envelope sealed before its replay state began, as a replay: an old
// proposal replayed to it would bring back content of an agreement
// cancelled since (found by the fault simulation, seeds 1311 and 2325 of
// three agbots). What the agbot seals afterwards, and an agreement whose
// floor survived, are judged as before; the beginning survives restarts.
func TestAnAgentThatLostItsReplayStateRefusesOlderEnvelopes(t *testing.T) {
	old := time.Now().Add(-time.Minute)
	for _, tc := range []struct {
		name   string
		lose   func(f *receiverFixture)
		env    func(f *receiverFixture) []byte
		replay bool
	}{
		{"a new root, an envelope sealed before it", func(f *receiverFixture) { f.opts.Root = filepath.Join(f.t.TempDir(), "new"); f.open() },
			func(f *receiverFixture) []byte { return f.sealedAt(1, "old", old) }, true},
		{"a new root, an envelope sealed after it", func(f *receiverFixture) { f.opts.Root = filepath.Join(f.t.TempDir(), "new"); f.open() },
			func(f *receiverFixture) []byte { return f.proposal(1, "new") }, false},
		{"the replay state lost and no instance left, an envelope sealed before", func(f *receiverFixture) {
			_, reply := f.receive(f.cancel(2))
			require.True(f.t, reply.Accepted)
			require.NoError(f.t, f.store.Close())
			require.NoError(f.t, os.Remove(filepath.Join(f.root, "agreements.json")))
			f.open()
		}, func(f *receiverFixture) []byte { return f.sealedAt(3, "old", old) }, true},
		{"the replay state lost, the floor kept by an instance", func(f *receiverFixture) {
			require.NoError(f.t, f.store.Close())
			require.NoError(f.t, os.Remove(filepath.Join(f.root, "agreements.json")))
			f.open()
		}, func(f *receiverFixture) []byte { return f.sealedAt(2, "old but newer", old) }, false},
		{"restarted with its replay state: its beginning is kept", func(f *receiverFixture) {
			_, reply := f.receive(f.cancel(2)) // its instance is free for ag-2
			require.True(f.t, reply.Accepted)
			f.sealedBefore = f.sealedFor("ag-2", 1, "another agreement, sealed before the restart", time.Now())
			time.Sleep(10 * time.Millisecond)
			f.restart()
		}, func(f *receiverFixture) []byte { return f.sealedBefore }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newReceiverFixture(t)
			_, reply := f.receive(f.proposal(1, "first"))
			require.True(t, reply.Accepted)
			tc.lose(f)
			got, err := f.receiver.Receive(t.Context(), tc.env(f))
			if !tc.replay {
				require.NoError(t, err)
				assert.NoError(t, got.Err)
				return
			}
			require.ErrorIs(t, err, agreement.ErrReplay)
			assert.Contains(t, err.Error(), "before this agent's replay state began")
			assert.Empty(t, f.store.InstanceIDs(), "nothing applied")
		})
	}
}
