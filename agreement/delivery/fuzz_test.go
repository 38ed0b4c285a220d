package delivery_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/mock"
)

// FuzzHandleReply feeds HandleReply, the engine's decoder of what agents
// send back, arbitrary envelopes: it never panics, and an envelope it
// refuses changes nothing.
func FuzzHandleReply(f *testing.F) {
	ctx := context.Background()
	agbot, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(f, err)
	agentKeys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(f, err)
	fl := newFleet()
	fl.add(&testAgent{node: "node-1", keys: agentKeys, agbot: agbot.Public(), floor: map[string]uint64{}})

	// A record with a proposal in flight, sequence 1<<32|1.
	const seq = 1<<32 | 1
	setup := func(t testing.TB) (*delivery.Engine, state.Backend) {
		st := state.NewMemory()
		e, err := delivery.New(delivery.Options{Store: mock.NewStore(nil).Store, State: st, Keys: agbot, Agents: fl, Transport: fl})
		require.NoError(t, err)
		require.NoError(t, e.Register(ctx, testAgreement("agr-1", "node-1", "org/db")))
		r, err := st.Get(ctx, "agr-1")
		require.NoError(t, err)
		r.Epoch, r.Counter = 1, 1
		r.InFlight = &state.Sent{Type: agreement.TypeProposal, Sequence: seq, Contents: map[int]state.Content{0: {StoreName: "org/db"}},
			AgentKey: agentKeys.Public().EncryptionKeyID()}
		require.NoError(t, st.Update(ctx, "", &r))
		return e, st
	}
	reply := func(r agreement.Reply, s uint64) []byte {
		env, err := agreement.Seal(agentKeys, agbot.Public(), r, agreement.Header{Sequence: s}, agreement.Options{})
		require.NoError(f, err)
		return env
	}
	answered := agreement.Header{Type: agreement.TypeProposal, AgreementID: "agr-1", Sequence: seq}
	f.Add(reply(agreement.NewReply(answered, true, ""), seq))
	f.Add(reply(agreement.NewReply(answered, false, "no"), seq))
	f.Add(reply(agreement.Reply{AgreementID: "agr-1", Accepted: true}, 7))
	f.Add([]byte(`{"version":1,"header":"e30","enc":"","ciphertext":"","signature":""}`))
	f.Add([]byte("not json"))

	f.Fuzz(func(t *testing.T, envelope []byte) {
		e, st := setup(t)
		before, err := st.Get(ctx, "agr-1")
		require.NoError(t, err)
		if err := e.HandleReply(ctx, "node-1", envelope); err != nil {
			after, gerr := st.Get(ctx, "agr-1")
			require.NoError(t, gerr)
			require.Equal(t, before, after, "a refused reply changed the record: %v", err)
		}
	})
}
