package delivery_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// notPollingState is a shared state.Memory in which another member polls
// every name, as pgstate divides them: Names gives this member none, and
// PutObservations refuses theirs with a *state.ConflictError.
type notPollingState struct{ *sharedMemoryState }

func (s notPollingState) Names(context.Context, string) ([]string, error) { return nil, nil }

func (s notPollingState) PutObservations(_ context.Context, _ string, obs ...state.Observation) error {
	var refused []string
	for _, o := range obs {
		refused = append(refused, o.Name)
	}
	if len(refused) > 0 {
		return &state.ConflictError{IDs: refused}
	}
	return nil
}

// A member that reads newer content than the member polling the name
// observed cannot store that observation, so it does not send the content:
// sent, it could be followed by the older content that another member,
// whose cached value equals the stale observation, seals with a higher
// sequence (found by the model, model/README.md). It waits until the
// polling member observes the change, then delivers it.
func TestMemberNotPollingANameWaitsForItsObservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		shared := notPollingState{&sharedMemoryState{Backend: state.NewMemory(), period: 30 * time.Second}}
		h := newHarness(t, func(o *delivery.Options) { o.State = shared })
		h.state = shared
		agent := h.agent("node-1")
		observe := func() { // the member polling org/db observes it
			s, err := h.store.Inner.Get(ctx, "org/db")
			require.NoError(t, err)
			now := time.Now()
			require.NoError(t, shared.Backend.PutObservations(ctx, "other", state.Observation{
				Name: "org/db", State: state.Present, Tag: s.ContentTag(), Since: now, CheckedAt: now}))
			_, err = shared.MarkDue(ctx, state.Selector{StoreNames: []string{"org/db"}}, now, false)
			require.NoError(t, err)
		}
		h.put("org/db", canary+"v1")
		observe()
		h.put("org/db", canary+"v2") // rotated since the polling member's cycle
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()

		cycles(3)
		assert.Empty(t, agent.messages(), "content the polling member has not observed is not sent")

		observe()
		h.wait("agr-1", 2*time.Minute)
		got, ok := agent.file("agr-1", "pw")
		require.True(t, ok)
		assert.Equal(t, jsonFile(canary+"v2"), got)
	})
}

// ownershipState is a shared state.Memory in which this member polls every
// bound name once owns is set, and before that none, as a member does
// whose share of the names grows when another member leaves.
type ownershipState struct {
	*sharedMemoryState
	owns *atomic.Bool
}

func (s ownershipState) Names(ctx context.Context, member string) ([]string, error) {
	if !s.owns.Load() {
		return nil, nil
	}
	return s.sharedMemoryState.Names(ctx, member)
}

func (s ownershipState) PutObservations(ctx context.Context, member string, obs ...state.Observation) error {
	if !s.owns.Load() {
		ids := make([]string, 0, len(obs))
		for _, o := range obs {
			ids = append(ids, o.Name)
		}
		return &state.ConflictError{IDs: ids}
	}
	return s.sharedMemoryState.PutObservations(ctx, member, obs...)
}

// A member that watched a name for a waiting deployment before it polled
// it for the state saw the name come back while another member owned it,
// and could not record that; once the name is its own to poll it records
// what it sees though the name did not change since (found by the fault
// simulation, seed 6215 of three agbots over Secrets Manager: the stored
// observation said forbidden forever and the node was never delivered).
func TestAMemberRecordsANameItWatchedBeforeItPolledIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var owns atomic.Bool
		shared := ownershipState{&sharedMemoryState{Backend: state.NewMemory(), period: 30 * time.Second}, &owns}
		h := newHarness(t, func(o *delivery.Options) { o.State = shared })
		h.state = shared
		agent := h.agent("node-1")
		now := time.Now()
		require.NoError(t, shared.Backend.PutObservations(ctx, "other", state.Observation{
			Name: "org/db", State: state.Forbidden, Since: now, CheckedAt: now})) // the other member's last word
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db")
		// A deployment waits for org/db and a secret still missing: this
		// member watches org/db though it does not poll it.
		require.NoError(t, h.engine.WaitForSecrets(ctx, "dep-1", "org/db", "org/later"))
		h.start()
		defer h.stop()
		cycles(3)
		assert.Empty(t, agent.messages(), "not this member's to record")

		owns.Store(true) // the other member left
		h.wait("agr-1", 3*time.Minute)
		got, ok := agent.file("agr-1", "pw")
		require.True(t, ok)
		assert.Equal(t, jsonFile(canary+"v1"), got)
	})
}

// A name this member watches only for a waiting deployment is another
// member's to poll: that member's recent observations confirm its
// absence, and the agreement bound to it is cancelled after the grace
// period (found by the fault simulation, seed 61 of three agbots: taken
// for this member's own name, the absence needed this member's own
// sighting, which it cannot record, and was never confirmed).
func TestAnAbsenceAnotherMemberPollsIsConfirmedByItsObservations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var owns atomic.Bool // never: another member polls every name
		shared := ownershipState{&sharedMemoryState{Backend: state.NewMemory(), period: 30 * time.Second}, &owns}
		h := newHarness(t, func(o *delivery.Options) { o.State = shared })
		h.state = shared
		h.agent("node-1")
		h.register("agr-1", "node-1", "org/db")
		require.NoError(t, h.engine.WaitForSecrets(ctx, "dep-1", "org/db")) // watched here too
		since := time.Now()
		observe := func() { // the other member's cycle, half an interval ago
			require.NoError(t, shared.Backend.PutObservations(ctx, "other", state.Observation{
				Name: "org/db", State: state.Missing, Since: since, CheckedAt: time.Now().Add(-testInterval / 2)}))
		}
		observe()
		h.start()
		defer h.stop()
		for range int(testGrace/testInterval) + 3 {
			cycles(1)
			observe()
		}
		assert.Len(t, h.cancelled()["agr-1"], 1, "the other member's absence confirmed over the grace period")
	})
}
