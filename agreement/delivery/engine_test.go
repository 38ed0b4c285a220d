package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

func TestRegisterProposesAndRotationUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()

		st := h.wait("agr-1", time.Minute)
		assert.True(t, st.InSync)
		got, ok := agent.file("agr-1", "pw")
		require.True(t, ok, "the proposal was applied")
		assert.Equal(t, jsonFile(canary+"v1"), got)

		h.put("org/db", canary+"v2")
		cycles(1)
		h.wait("agr-1", time.Minute)
		got, _ = agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v2"), got)

		msgs := agent.messages()
		require.Len(t, msgs, 2)
		assert.Equal(t, agreement.TypeProposal, msgs[0].Type)
		assert.Equal(t, agreement.TypeUpdate, msgs[1].Type)
		assert.Less(t, msgs[0].Sequence, msgs[1].Sequence, "one series across message types")
	})
}

func TestUnreachableAgentConvergesWhenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.DivergedAfter = 5 * time.Minute })
		agent := h.deployOne()
		defer h.stop()

		agent.setDown(true)
		h.put("org/db", canary+"v2")
		before := h.fleet.sends.Load()
		time.Sleep(10 * testMaxDelay)
		synctest.Wait()

		st := h.status("agr-1")
		assert.False(t, st.InSync)
		assert.True(t, st.Diverged, "silent for longer than DivergedAfter")
		assert.Contains(t, st.LastError, "unreachable")
		assert.Equal(t, 1, h.engine.Health(context.Background()).Diverged)
		// Capped, never exhausted: after the doubling, one try per MaxDelay.
		tries := h.fleet.sends.Load() - before
		assert.GreaterOrEqual(t, tries, int64(12))
		assert.LessOrEqual(t, tries, int64(20))
		assert.Empty(t, h.cancelled())

		agent.setDown(false)
		st = h.wait("agr-1", testMaxDelay+time.Second) // the next try, without a Resync
		assert.False(t, st.Diverged)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v2"), got)
	})
}

func TestDeletionWhileAgentUnreachableWipesItsFilesWhenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployOne()
		defer h.stop()

		agent.setDown(true)
		h.delete("org/db")
		time.Sleep(10 * testMaxDelay)
		synctest.Wait()

		st := h.status("agr-1")
		assert.Equal(t, state.PhaseCancelling, st.Phase, "decided after the grace, not yet acknowledged")
		require.NotNil(t, st.Cancel)
		assert.Equal(t, "org/db", st.Cancel.StoreName)
		assert.Equal(t, state.Missing, st.Cancel.Kind)
		assert.Len(t, h.cancelled()["agr-1"], 1, "the hook is called once per decision")
		_, held := agent.file("agr-1", "pw")
		assert.True(t, held, "the agent has not heard of it yet")

		agent.setDown(false)
		time.Sleep(testMaxDelay + time.Second)
		synctest.Wait()
		_, held = agent.file("agr-1", "pw")
		assert.False(t, held, "the cancellation wiped the files")
		_, err := h.engine.Wait(context.Background(), "agr-1")
		assert.ErrorIs(t, err, state.ErrNotFound, "acknowledged: the record is gone")
		assert.Len(t, h.cancelled()["agr-1"], 1)
	})
}

func TestEngineRestartMidRotationDeliversWithoutTouchingTheAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.ReplyTimeout = time.Hour })
		agent := h.deployOne()

		// The agent applies the update, but its reply never comes back:
		// the agbot is killed with the update unacknowledged.
		agent.mu.Lock()
		agent.async = true
		agent.mu.Unlock()
		h.put("org/db", canary+"v2")
		cycles(1)
		got, _ := agent.file("agr-1", "pw")
		require.Equal(t, jsonFile(canary+"v2"), got)
		require.False(t, h.status("agr-1").InSync)
		h.stop()

		agent.mu.Lock()
		agent.async = false
		agent.mu.Unlock()
		h.put("org/db", canary+"v3") // rotated while the agbot is down
		var err error
		h.engine, err = delivery.New(h.opts)
		require.NoError(t, err)
		h.start()
		defer h.stop()

		h.wait("agr-1", time.Minute)
		got, _ = agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v3"), got)
		msgs := agent.messages()
		for i := 1; i < len(msgs); i++ {
			assert.Less(t, msgs[i-1].Sequence, msgs[i].Sequence)
		}
		assert.Greater(t, msgs[len(msgs)-1].Sequence>>32, msgs[0].Sequence>>32, "a new epoch after the restart")
		assert.Zero(t, agent.dropped, "the agent refused nothing as a replay")
	})
}

func TestStoreDownDuringFirstDeployIsDeployedWhenItReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		h.put("org/db", canary+"v1")
		h.store.SetFaults(mock.Faults{Fail: edgesecrets.ErrUnavailable})
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()

		time.Sleep(10 * time.Minute)
		synctest.Wait()
		st := h.status("agr-1")
		assert.False(t, st.InSync)
		assert.Contains(t, st.LastError, "unavailable")
		assert.Empty(t, agent.messages(), "nothing to propose without the values")
		assert.Contains(t, h.engine.Health(context.Background()).StoreProblem, "unavailable")

		h.store.SetFaults(mock.Faults{})
		h.wait("agr-1", testMaxDelay+time.Second)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v1"), got)
		cycles(1)
		assert.Empty(t, h.engine.Health(context.Background()).StoreProblem)
		assert.Empty(t, h.cancelled())
	})
}

// setupThree registers agreements agr-a, agr-b and agr-c on nodes node-a,
// node-b and node-c over org/a, org/b and org/c, and waits until they are
// in sync.
func setupThree(h *harness) map[string]*testAgent {
	agents := map[string]*testAgent{}
	for _, x := range []string{"a", "b", "c"} {
		agents[x] = h.agent("node-" + x)
		h.put("org/"+x, canary+x)
		h.register("agr-"+x, "node-"+x, "org/"+x)
	}
	h.start()
	for _, x := range []string{"a", "b", "c"} {
		h.wait("agr-"+x, time.Minute)
	}
	return agents
}

func TestStoreWideForbiddenCancelsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.Grace = delivery.NoGrace })
		agents := setupThree(h)
		defer h.stop()

		h.forbid("org/a", "org/b", "org/c") // the agbot's own access, not a revocation
		cycles(30)
		assert.Empty(t, h.cancelled())
		for _, x := range []string{"a", "b", "c"} {
			st := h.status("agr-" + x)
			assert.Equal(t, state.PhaseActive, st.Phase)
			assert.Nil(t, st.Held)
			got, _ := agents[x].file("agr-"+x, "pw")
			assert.Equal(t, jsonFile(canary+x), got)
		}
		assert.Contains(t, h.engine.Health(context.Background()).StoreProblem, "refuses the agbot every watched secret")

		h.forbid()
		cycles(1)
		assert.Empty(t, h.engine.Health(context.Background()).StoreProblem)
		assert.Empty(t, h.cancelled())
	})
}

// failCredentials makes s's credential check fail with err from now on,
// and refuses the forbidden names as harness.forbid does.
func failCredentials(s *mock.Store, err error, forbidden ...string) {
	s.SetFaults(mock.Faults{Hook: func(_ context.Context, c mock.Call) error {
		switch {
		case c.Op == "check-credentials":
			return err
		case slices.Contains(forbidden, c.Name):
			return &secretstore.Error{Op: c.Op, Name: c.Name, Kind: edgesecrets.ErrPermission, Err: mock.ErrInjected}
		}
		return nil
	}})
}

func TestFailingCredentialCheckCancelsNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		cause  string
		forbid bool // every name reads forbidden too, as with an expired Vault token
	}{
		{"token expired", &secretstore.Error{Op: "check-credentials", Kind: edgesecrets.ErrPermission, Err: errors.New("token expired")}, "rejects the agbot's own credentials", true},
		{"token cannot renew, names still readable", &secretstore.Error{Op: "check-credentials", Kind: edgesecrets.ErrPermission, Err: errors.New("token can no longer be renewed")}, "rejects the agbot's own credentials", false},
		{"check unavailable", &secretstore.Error{Op: "check-credentials", Kind: edgesecrets.ErrUnavailable, Err: errors.New("timeout")}, "credential check failed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				h.opts.Grace = delivery.NoGrace
				var err error
				h.engine, err = delivery.New(h.opts)
				require.NoError(t, err)
				agents := setupThree(h)
				defer h.stop()

				var forbidden []string
				if tc.forbid {
					forbidden = []string{"org/b", "org/c"}
				}
				failCredentials(h.store, tc.err, forbidden...)
				h.delete("org/a") // would be a revocation in a healthy cycle
				cycles(30)
				assert.Empty(t, h.cancelled(), "zero cancellations")
				health := h.engine.Health(context.Background())
				assert.Contains(t, health.StoreProblem, tc.cause)
				assert.Contains(t, health.StoreProblem, tc.err.Error(), "health names the cause")
				_, held := agents["a"].file("agr-a", "pw")
				assert.True(t, held)

				// Once the check passes, the deletion is a revocation.
				h.store.SetFaults(mock.Faults{})
				h.forbid()
				cycles(2)
				assert.Len(t, h.cancelled()["agr-a"], 1)
				assert.NotContains(t, h.cancelled(), "agr-b")
			})
		})
	}
}

func TestOneForbiddenSecretCancelsOnlyItsAgreementsAfterTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agents := setupThree(h)
		defer h.stop()
		h.agent("node-b2")
		h.register("agr-b2", "node-b2", "org/b")
		h.wait("agr-b2", time.Minute)

		h.forbid("org/b")
		cycles(4) // within the grace
		assert.Empty(t, h.cancelled())
		assert.Contains(t, h.status("agr-b").Waiting, `"org/b" forbidden`)

		cycles(2)
		cancels := h.cancelled()
		assert.ElementsMatch(t, []string{"agr-b", "agr-b2"}, keys(cancels))
		for _, id := range []string{"agr-b", "agr-b2"} {
			require.Len(t, cancels[id], 1)
			assert.Equal(t, state.Forbidden, cancels[id][0].Kind)
			assert.Equal(t, "org/b", cancels[id][0].StoreName)
			_, err := h.engine.Status(context.Background(), id)
			assert.ErrorIs(t, err, state.ErrNotFound)
		}
		_, held := agents["b"].file("agr-b", "pw")
		assert.False(t, held, "wiped")
		for _, x := range []string{"a", "c"} {
			assert.True(t, h.status("agr-"+x).InSync)
			got, _ := agents[x].file("agr-"+x, "pw")
			assert.Equal(t, jsonFile(canary+x), got)
		}
		cycles(3)
		assert.Len(t, h.cancelled()["agr-b"], 1, "once per decision")
	})
}

func TestBudgetHoldsAMassCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.Budget = delivery.Budget{Count: 3} })
		agents := map[string]*testAgent{}
		for i := range 10 {
			id := fmt.Sprint(i)
			agents[id] = h.agent("node-" + id)
			h.put("org/s"+id, canary+id)
			h.register("agr-"+id, "node-"+id, "org/s"+id)
		}
		h.start()
		defer h.stop()
		for i := range 10 {
			h.wait(fmt.Sprint("agr-", i), time.Minute)
		}

		for i := range 5 {
			h.delete(fmt.Sprint("org/s", i))
		}
		cycles(10)
		assert.Empty(t, h.cancelled(), "5 cancellations in one cycle exceed the budget of 3: all held")
		assert.Equal(t, 5, h.engine.Health(context.Background()).Held)
		for i := range 10 {
			st := h.status(fmt.Sprint("agr-", i))
			assert.Equal(t, state.PhaseActive, st.Phase)
			assert.Equal(t, i < 5, st.Held != nil, "agreement %d", i)
			_, held := agents[fmt.Sprint(i)].file(fmt.Sprint("agr-", i), "pw")
			assert.True(t, held)
		}

		// One secret comes back: its agreement is no longer held.
		h.put("org/s0", canary+"0")
		cycles(1)
		assert.Nil(t, h.status("agr-0").Held)
		assert.Equal(t, 4, h.engine.Health(context.Background()).Held)

		n, err := h.engine.ReleaseHeld(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 4, n)
		synctest.Wait()
		assert.ElementsMatch(t, []string{"agr-1", "agr-2", "agr-3", "agr-4"}, keys(h.cancelled()))
		for i := 1; i < 5; i++ {
			_, held := agents[fmt.Sprint(i)].file(fmt.Sprint("agr-", i), "pw")
			if !assert.False(t, held, "agreement %d wiped once released", i) {
				st, err := h.engine.Status(context.Background(), fmt.Sprint("agr-", i))
				t.Logf("%+v %v", st, err)
			}
		}
		assert.True(t, h.status("agr-0").InSync)
		assert.Zero(t, h.engine.Health(context.Background()).Held)
	})
}

func TestNodeLevelSecretDeletedFallsBackToTheOrgLevelOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.Grace = delivery.NoGrace })
		agent := h.agent("node-1")
		h.put("node/node-1/db", canary+"node")
		h.put("org/db", canary+"org")
		h.register("agr-1", "node-1", "node/node-1/db", "org/db")
		h.start()
		defer h.stop()
		h.wait("agr-1", time.Minute)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"node"), got)

		h.delete("node/node-1/db")
		cycles(1)
		st := h.wait("agr-1", time.Minute)
		assert.Equal(t, "org/db", st.Slots[0].Acked.StoreName)
		got, _ = agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"org"), got)
		assert.Empty(t, h.cancelled(), "a fallback never cancels")

		h.put("node/node-1/db", canary+"node2")
		cycles(1)
		h.wait("agr-1", time.Minute)
		got, _ = agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"node2"), got)
		assert.Empty(t, h.cancelled())
	})
}

// essentials is what a reply may change in a record.
func essentials(r state.Record) any {
	return []any{r.Phase, r.Proposed, r.AgentKey, r.Slots, r.InFlight, r.Cancel, r.Held}
}

func TestDuplicateReplayedAndLateRepliesChangeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.ReplyTimeout = time.Hour })
		agent := h.agent("node-1")
		agent.async = true
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()
		ctx := context.Background()

		synctest.Wait()
		proposal := agent.takeReplies()
		require.Len(t, proposal, 1)
		require.NoError(t, h.engine.HandleReply(ctx, "node-1", proposal[0]))
		assert.True(t, h.status("agr-1").InSync)

		// The same reply again: a replay.
		before, err := h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		assert.ErrorIs(t, h.engine.HandleReply(ctx, "node-1", proposal[0]), agreement.ErrReplay)
		after, err := h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		assert.Equal(t, before, after)

		// Two rotations: the first update is superseded before its reply.
		h.put("org/db", canary+"v2")
		cycles(1)
		h.put("org/db", canary+"v3")
		cycles(1)
		replies := agent.takeReplies()
		require.Len(t, replies, 2)
		before, err = h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		require.NoError(t, h.engine.HandleReply(ctx, "node-1", replies[0]), "a late reply is no error")
		after, err = h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		assert.Equal(t, essentials(before), essentials(after), "the late reply changed nothing")

		require.NoError(t, h.engine.HandleReply(ctx, "node-1", replies[1]))
		st := h.status("agr-1")
		assert.True(t, st.InSync)
		assert.Equal(t, st.Slots[0].Desired, st.Slots[0].Acked)
		before, err = h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		for _, r := range append(replies, proposal...) {
			assert.ErrorIs(t, h.engine.HandleReply(ctx, "node-1", r), agreement.ErrReplay)
		}
		after, err = h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		assert.Equal(t, before, after)

		// A reply from another node for this agreement is refused.
		other := h.agent("node-2")
		assert.Error(t, h.engine.HandleReply(ctx, "node-2", replies[1]))
		_ = other
	})
}

func TestRejectedUpdatesNeverCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployOne()
		defer h.stop()

		agent.setRejectUpdates("updates are disabled on this node")
		h.put("org/db", canary+"v2")
		before := h.fleet.sends.Load()
		time.Sleep(time.Hour)
		synctest.Wait()
		st := h.status("agr-1")
		assert.Equal(t, state.PhaseActive, st.Phase)
		assert.False(t, st.InSync)
		assert.Contains(t, st.Rejection, "updates are disabled")
		assert.Empty(t, h.cancelled())
		tries := h.fleet.sends.Load() - before
		assert.GreaterOrEqual(t, tries, int64(55), "tried on at most MaxDelay apart")
		assert.LessOrEqual(t, tries, int64(70))

		agent.setRejectUpdates("")
		h.wait("agr-1", testMaxDelay+time.Second)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v2"), got)
	})
}

func TestGracePeriodSurvivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.deployOne()
		synctest.Wait()

		h.delete("org/db")
		cycles(1) // seen missing: the grace starts
		cycles(2)
		h.restart()
		defer h.stop()
		synctest.Wait()
		cycles(2) // 4 minutes into the grace
		assert.Empty(t, h.cancelled(), "not skipped")
		cycles(1) // 5 minutes: over
		assert.Len(t, h.cancelled()["agr-1"], 1, "not reset by the restart")
	})
}

func TestWaitForSecretsCallsOnReadyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		require.NoError(t, h.engine.WaitForSecrets(ctx, "dep-1", "org/x", "org/y"))
		h.start()
		defer h.stop()
		cycles(2)
		assert.Empty(t, h.readied())
		h.put("org/y", canary+"y") // any one of the names will do
		cycles(1)
		assert.Equal(t, []string{"dep-1"}, h.readied())
		h.put("org/x", canary+"x")
		cycles(2)
		assert.Equal(t, []string{"dep-1"}, h.readied(), "once")

		err := h.engine.WaitForSecrets(ctx, "", "bad//name")
		assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
		assert.ErrorContains(t, err, "deployment id is empty")
		assert.ErrorContains(t, err, "empty path segment")
	})
}

// A second call for the same deployment adds its names to the wait, never
// drops one: the agbots sharing a state each call the cancel hook of a
// decision, and one that no longer finds the record names the revoked
// secret alone (seed 161 of three agbots: the other candidate, written
// later, never ended the wait).
func TestWaitForSecretsAddsToTheDeploymentsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		require.NoError(t, h.engine.WaitForSecrets(ctx, "dep-1", "org/node/n1/db", "org/db"))
		require.NoError(t, h.engine.WaitForSecrets(ctx, "dep-1", "org/db"))
		h.start()
		defer h.stop()
		cycles(2)
		assert.Empty(t, h.readied())
		h.put("org/node/n1/db", canary+"n") // the name the second call left out
		cycles(1)
		assert.Equal(t, []string{"dep-1"}, h.readied())
	})
}

func TestEndCancelsUntilAcknowledgedAndDropForgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		a1, a2 := h.agent("node-1"), h.agent("node-2")
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db")
		h.register("agr-2", "node-2", "org/db")
		h.start()
		defer h.stop()
		h.wait("agr-1", time.Minute)
		h.wait("agr-2", time.Minute)

		a1.setDown(true)
		require.NoError(t, h.engine.End(ctx, "agr-1"))
		require.NoError(t, h.engine.End(ctx, "agr-1"), "ending twice is no error")
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		assert.Equal(t, state.PhaseCancelling, h.status("agr-1").Phase, "sent until acknowledged")
		a1.setDown(false)
		_, err := h.engine.Wait(ctx, "agr-1")
		assert.ErrorIs(t, err, state.ErrNotFound)
		_, held := a1.file("agr-1", "pw")
		assert.False(t, held)
		assert.Empty(t, h.cancelled(), "the hook is for the engine's own decisions")
		assert.ErrorIs(t, h.engine.End(ctx, "agr-1"), state.ErrNotFound)

		sent := len(a2.messages())
		require.NoError(t, h.engine.Drop(ctx, "agr-2"))
		cycles(2)
		assert.Len(t, a2.messages(), sent, "the agent is not told")
		_, held = a2.file("agr-2", "pw")
		assert.True(t, held)
		_, err = h.engine.Status(ctx, "agr-2")
		assert.ErrorIs(t, err, state.ErrNotFound)
	})
}

func TestEndBeforeAnythingWasSentDeletesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		h.store.SetFaults(mock.Faults{Fail: edgesecrets.ErrUnavailable})
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.NoError(t, h.engine.End(context.Background(), "agr-1"))
		_, err := h.engine.Status(context.Background(), "agr-1")
		assert.ErrorIs(t, err, state.ErrNotFound)
		assert.Empty(t, agent.messages())
	})
}

func TestNewAgentKeysAreProposedTheAgreementAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.deployOne()
		defer h.stop()

		fresh := h.agent("node-1") // reinstalled: new keys, nothing stored
		require.NoError(t, h.engine.Resync(context.Background(), "node-1"))
		synctest.Wait()
		h.wait("agr-1", time.Minute)
		msgs := fresh.messages()
		require.NotEmpty(t, msgs)
		assert.Equal(t, agreement.TypeProposal, msgs[0].Type)
		got, _ := fresh.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v1"), got)
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestAnOldAbsenceStartsAFreshGracePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.agent("node-1")
		h.agent("node-2")
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()
		h.wait("agr-1", time.Minute)
		h.delete("org/db")
		cycles(7)
		require.Len(t, h.cancelled()["agr-1"], 1)
		_, err := h.engine.Status(context.Background(), "agr-1")
		require.ErrorIs(t, err, state.ErrNotFound)

		// An hour later a new agreement binds the name, still missing: its
		// grace period starts now, not when the name was last seen.
		time.Sleep(time.Hour)
		h.register("agr-2", "node-2", "org/db")
		cycles(4)
		assert.NotContains(t, h.cancelled(), "agr-2")
		cycles(3)
		assert.Len(t, h.cancelled()["agr-2"], 1)
	})
}

// A State that keeps times to the microsecond, as PostgreSQL does, still
// confirms this engine's own sightings of an absence: the cycle's times
// have sub-microsecond parts on a real clock, and a sighting read back
// earlier than the read that made it was never confirmed, so a deleted
// secret stayed on its nodes (found by the fault simulation over
// PostgreSQL, seed 10 of two agbots).
func TestAStateKeepingMicrosecondsConfirmsAnAbsence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(1234 * time.Nanosecond) // the clock off whole microseconds, as a real one is
		h := newHarness(t, func(o *delivery.Options) { o.State = microseconds{Backend: o.State} })
		h.agent("node-1")
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()
		h.wait("agr-1", time.Minute)

		h.delete("org/db")
		cycles(int((testGrace+testInterval)/testInterval) + 1)
		assert.Len(t, h.cancelled()["agr-1"], 1, "cancelled within grace plus one interval")
	})
}

// microseconds is a State that keeps the observations' times to the
// microsecond.
type microseconds struct{ state.Backend }

func (s microseconds) PutObservations(ctx context.Context, member string, obs ...state.Observation) error {
	obs = slices.Clone(obs)
	for i := range obs {
		obs[i].Since, obs[i].CheckedAt = obs[i].Since.Truncate(time.Microsecond), obs[i].CheckedAt.Truncate(time.Microsecond)
	}
	return s.Backend.PutObservations(ctx, member, obs...)
}

func TestNewRejectsMissingAndInvalidOptionsNamingEach(t *testing.T) {
	_, err := delivery.New(delivery.Options{})
	require.Error(t, err)
	for _, want := range []string{"missing Store", "missing State", "missing Keys", "missing Agents", "missing Transport"} {
		assert.ErrorContains(t, err, want)
	}

	f := newFleet()
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	valid := delivery.Options{Store: mock.NewStore(nil).Store, State: state.NewMemory(), Keys: keys, Agents: f, Transport: f}
	_, err = delivery.New(valid)
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		change func(*delivery.Options)
		want   string
	}{
		{"interval below a second", func(o *delivery.Options) { o.Interval = 10 * time.Millisecond }, "Interval"},
		{"negative grace", func(o *delivery.Options) { o.Grace = -time.Minute }, "NoGrace"},
		{"negative budget", func(o *delivery.Options) { o.Budget.Count = -1 }, "Budget.Count"},
		{"budget over 100%", func(o *delivery.Options) { o.Budget.Percent = 150 }, "Budget.Percent"},
		{"negative reply timeout", func(o *delivery.Options) { o.ReplyTimeout = -time.Second }, "ReplyTimeout"},
		{"max delay below initial", func(o *delivery.Options) { o.InitialDelay, o.MaxDelay = time.Minute, time.Second }, "MaxDelay"},
		{"negative workers", func(o *delivery.Options) { o.Workers = -1 }, "Workers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid
			tc.change(&o)
			_, err := delivery.New(o)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestRegisterValidatesAndIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		bad := delivery.Agreement{ID: "has space", Services: []binding.ServiceBinding{
			{Service: agreement.ServiceRef{Org: "org", URL: "svc"}, Secrets: map[string]binding.BoundSecret{
				"../up":   {StoreNames: []string{"org/a"}},
				"none":    {},
				"badfmt":  {StoreNames: []string{"org/a"}, Format: "yaml"},
				"twice":   {StoreNames: []string{"org/a", "org/a"}},
				"badname": {StoreNames: []string{"/abs"}},
			}},
			{Service: agreement.ServiceRef{Org: "org", URL: "svc"}, Secrets: map[string]binding.BoundSecret{"x": {StoreNames: []string{"org/x"}}}},
		}}
		err := h.engine.Register(ctx, bad)
		require.ErrorIs(t, err, edgesecrets.ErrInvalid)
		for _, want := range []string{"spaces", "node is empty", `"../up"`, `"none" is bound to no store secret`, `unknown format "yaml"`,
			`names store secret "org/a" twice`, `"/abs"`, "listed twice"} {
			assert.ErrorContains(t, err, want)
		}
		assert.ErrorContains(t, h.engine.Register(ctx, delivery.Agreement{ID: "a", Node: "n"}), "no services")

		h.register("agr-1", "node-1", "org/a", "org/b")
		h.register("agr-1", "node-1", "org/a", "org/b") // the same again: nothing happens
		err = h.engine.Register(ctx, testAgreement("agr-1", "node-2", "org/a", "org/b"))
		assert.ErrorIs(t, err, state.ErrExists)
	})
}

func TestAnUpdateCarriesOnlyTheSecretsThatChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		for _, n := range []string{"org/a", "org/b", "org/c"} {
			h.put(n, canary+n+"1")
		}
		a := delivery.Agreement{ID: "agr-1", Node: "node-1", Services: []binding.ServiceBinding{
			{Service: agreement.ServiceRef{Org: "org", URL: "web", Version: "1"}, Secrets: map[string]binding.BoundSecret{
				"a": {StoreNames: []string{"org/a"}}, "b": {StoreNames: []string{"org/b"}},
			}},
			{Service: agreement.ServiceRef{Org: "org", URL: "db", Version: "1"}, Secrets: map[string]binding.BoundSecret{
				"b": {StoreNames: []string{"org/b"}}, "c": {StoreNames: []string{"org/c"}, Format: agreement.FormatRaw},
			}},
		}}
		require.NoError(t, h.engine.Register(context.Background(), a))
		h.start()
		defer h.stop()
		h.wait("agr-1", time.Minute)

		h.put("org/b", canary+"b2")
		cycles(1)
		h.wait("agr-1", time.Minute)
		assert.Equal(t, []string{"web:b", "db:b"}, agent.lastCarried())
		got, _ := agent.serviceFile("agr-1", 1, "b")
		assert.Equal(t, `{"password":"`+canary+`b2"}`, got)
		got, _ = agent.serviceFile("agr-1", 1, "c")
		assert.Equal(t, canary+"org/c1", got, "raw format: the value's bytes")

		h.put("org/c", canary+"c2")
		cycles(1)
		h.wait("agr-1", time.Minute)
		assert.Equal(t, []string{"db:c"}, agent.lastCarried())
	})
}

func TestADownlevelAgentIsReportedDivergedAndKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.DivergedAfter = 10 * time.Minute })
		agent := h.agent("node-1")
		agent.async = true // it takes the messages and never answers
		h.put("org/db", canary+"v1")
		h.register("agr-1", "node-1", "org/db")
		h.start()
		defer h.stop()

		time.Sleep(9 * time.Minute)
		synctest.Wait()
		assert.False(t, h.status("agr-1").Diverged)
		sends := h.fleet.sends.Load()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		st := h.status("agr-1")
		assert.True(t, st.Diverged)
		assert.Contains(t, st.LastError, "no reply within")
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Greater(t, h.fleet.sends.Load(), sends+50, "still tried")
		assert.Equal(t, state.PhaseActive, h.status("agr-1").Phase)
		assert.Equal(t, 1, h.engine.Health(context.Background()).Diverged)
		assert.Empty(t, h.cancelled())
	})
}

func TestAStateOutageIsReportedAndSurvived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.deployOne()
		defer h.stop()

		require.NoError(t, h.state.Close())
		cycles(2)
		assert.Contains(t, h.engine.Health(context.Background()).StateProblem, "state unavailable")
	})
}

func TestResyncDeliversAtOnceWhenTheAgentIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.MaxDelay = time.Hour })
		agent := h.deployOne()
		defer h.stop()

		agent.setDown(true)
		h.put("org/db", canary+"v2")
		time.Sleep(3 * time.Hour) // the backoff is at its cap: an hour
		synctest.Wait()
		require.False(t, h.status("agr-1").InSync)

		agent.setDown(false)
		require.NoError(t, h.engine.Resync(context.Background(), "node-1"))
		h.wait("agr-1", 5*time.Second)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v2"), got)
	})
}

func TestACancelHookInterruptedByACrashIsCalledAfterTheRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployOne()
		h.stop()

		// What a crash right after storing the decision leaves behind.
		ctx := context.Background()
		r, err := h.state.Get(ctx, "agr-1")
		require.NoError(t, err)
		r.Phase = state.PhaseCancelling
		r.Cancel = &state.Cancellation{Reason: "store secret gone", StoreName: "org/db", Kind: state.Missing, DecidedAt: time.Now()}
		r.NextAttempt = time.Now()
		require.NoError(t, h.state.Update(ctx, "", &r))

		// A slow store holds up the first watcher cycle: the agent
		// acknowledges the cancellation, and the record goes, before the
		// cycle reviews the agreements.
		h.store.SetFaults(mock.Faults{Op: "stat", Latency: 10 * time.Second})
		h.engine, err = delivery.New(h.opts)
		require.NoError(t, err)
		h.start()
		defer h.stop()
		synctest.Wait()
		_, err = h.engine.Status(ctx, "agr-1")
		require.ErrorIs(t, err, state.ErrNotFound, "acknowledged before the first cycle")
		cycles(3)
		require.Len(t, h.cancelled()["agr-1"], 1, "called after the restart, once")
		assert.Equal(t, "org/db", h.cancelled()["agr-1"][0].StoreName)
		_, held := agent.file("agr-1", "pw")
		assert.False(t, held)
	})
}

// An absence seen before a store outage and again after it is not known
// to have lasted through the outage (the secret may have been written and
// deleted again meanwhile): its grace period starts afresh once the store
// answers (found by the fault simulation, seed 5341 of three agbots).
func TestAnAbsenceSeenAcrossAStoreOutageStartsAFreshGracePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.deployOne()
		defer h.stop()
		synctest.Wait()

		h.delete("org/db")
		cycles(1) // seen missing: the grace starts
		h.store.SetFaults(mock.Faults{Fail: edgesecrets.ErrUnavailable})
		cycles(1)
		h.put("org/db", canary+"v2") // unseen: written and deleted during the outage
		cycles(1)
		h.delete("org/db")
		cycles(1)
		h.store.SetFaults(mock.Faults{})
		cycles(4) // the grace from the first sighting is over
		assert.Empty(t, h.cancelled(), "grace counted across the outage")
		cycles(2)
		assert.Len(t, h.cancelled()["agr-1"], 1, "cancelled a grace period after the store answered")
	})
}

// A cycle whose reads are answered late (a slow store, a paused process)
// confirms an absence as of when it asked the store, not when it got the
// answers: a secret back in the meantime was gone for less than the grace
// period (found by the fault simulation, seed 6199 of three agbots over
// Secrets Manager).
func TestAnAbsenceIsConfirmedAsOfWhenTheStoreWasAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.agent("node-1")
		h.agent("node-2")
		h.put("org/db", canary+"v1")
		h.put("org/other", canary+"o1")
		h.register("agr-1", "node-1", "org/db")
		h.register("agr-2", "node-2", "org/other")
		h.start()
		defer h.stop()
		h.wait("agr-1", time.Minute)
		h.wait("agr-2", time.Minute)

		h.delete("org/db")
		cycles(1) // seen missing: the grace starts
		cycles(3)
		// The next cycle reads org/db at once but org/other only after 90 s.
		var slow atomic.Bool
		slow.Store(true)
		h.store.SetFaults(mock.Faults{Hook: func(ctx context.Context, c mock.Call) error {
			if c.Name == "org/other" && slow.CompareAndSwap(true, false) {
				select {
				case <-time.After(90 * time.Second):
				case <-ctx.Done():
				}
			}
			return nil
		}})
		cycles(1)
		require.False(t, slow.Load(), "the slow read began")
		h.put("org/db", canary+"v2") // back before that cycle answers, 4 minutes after the grace began
		cycles(3)
		assert.Empty(t, h.cancelled(), "an absence read 4 minutes into the grace period confirmed as if read 5.5 minutes in")
		h.wait("agr-1", time.Minute)
		got, _ := agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"v2"), got)
	})
}

// A message the agent applied but whose answer was lost leaves the agent
// holding either content: once the desired content comes back to what was
// acknowledged before, it is sent again (found by the fault simulation,
// seeds 557 and 4435 of three agbots: the organisation's fallback, sent
// while the node-level secret was denied and unanswered, stayed on the
// node once the node-level secret was back).
func TestContentOfAnUnansweredMessageIsSentOverAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployNodeLevel()
		defer h.stop()

		agent.setLoseReplies(true)
		h.forbid("org/node/node-1/db") // the fallback is sent, applied, unanswered
		cycles(2)
		got, _ := agent.file("agr-1", "pw")
		require.Equal(t, jsonFile(canary+"org"), got, "the agent applied the fallback")

		h.forbid() // the node's own secret is back: what was acknowledged
		cycles(2)
		agent.setLoseReplies(false)
		cycles(2)
		st := h.wait("agr-1", 3*testMaxDelay)
		got, _ = agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"node"), got, "sent over again though acknowledged before: %+v", st)
	})
}

// A message sent while an earlier one is still unanswered makes the slots
// the earlier one changed unknown too: the agent may have applied it. Seed
// 1403 of three agbots: the fallback, sent while the node-level secret was
// denied, was applied and its answer never came back; the node-level
// secret back, its content (what was acknowledged before) was sent over
// the unanswered fallback and lost; the engine took the slot for in sync
// again and the node kept the fallback.
func TestAMessageOverAnUnansweredOneForgetsWhatBothChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		agent := h.deployNodeLevel()
		defer h.stop()

		agent.mu.Lock()
		agent.async = true // it applies the messages and its answers stay with it
		agent.mu.Unlock()
		h.forbid("org/node/node-1/db") // the fallback is sent (again each reply timeout), applied, unanswered
		// Just before the cycle that finds the node's own secret back:
		// the fallback's last copy is still in flight then.
		time.Sleep(2*testInterval - 3*time.Second)
		synctest.Wait()
		got, _ := agent.file("agr-1", "pw")
		require.Equal(t, jsonFile(canary+"org"), got, "the agent applied the fallback")

		agent.setDown(true) // what comes next is lost
		h.forbid()          // the node's own secret is back: what was acknowledged
		cycles(3)
		agent.mu.Lock()
		agent.async = false
		agent.mu.Unlock()
		agent.setDown(false)
		cycles(2)
		st := h.wait("agr-1", 3*testMaxDelay)
		got, _ = agent.file("agr-1", "pw")
		assert.Equal(t, jsonFile(canary+"node"), got, "sent over again: %+v", st)
	})
}
