package sim_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state/statetest"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/testkit/sim"
)

// sharedHarness gives each conformance case a SharedState of its own,
// with the suite's member joined, as an engine joins before its first
// cycle.
type sharedHarness struct{}

func (sharedHarness) MakeState(ctx context.Context) (state.Backend, error) {
	h := sim.NewSharedState(time.Hour).Open()
	if _, err := h.Join(ctx, "member-1"); err != nil {
		return nil, err
	}
	return h, nil
}

func (sharedHarness) Close() {}

// The simulation's shared state keeps the state.Backend contract, shared leases
// included.
func TestSharedStateConformance(t *testing.T) {
	statetest.Run(t, func(context.Context, *testing.T) (statetest.Harness, error) { return sharedHarness{}, nil },
		statetest.Options{Shared: true})
}

// rec is a record bound to one store name, due at due.
func rec(id, name string, due time.Time) *state.Record {
	return &state.Record{ID: id, Node: "node-" + id, Phase: state.PhaseActive, NextAttempt: due,
		Services: []binding.ServiceBinding{{Service: agreement.ServiceRef{Org: "o", URL: "s", Version: "1", Arch: "amd64"},
			Secrets: map[string]binding.BoundSecret{"k": {StoreNames: []string{name}}}}}}
}

// The membership rules of the simulation's shared state, which the
// conformance suite does not reach: the names are shared among the live
// members, a lapsed or replaced member is fenced off, and its claims are
// void.
func TestSharedStateMembership(t *testing.T) {
	const period = 6 * time.Second
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *sim.SharedState, a, b *sim.SharedHandle)
	}{
		{"the names are split among the live members", func(t *testing.T, s *sim.SharedState, a, b *sim.SharedHandle) {
			ctx := t.Context()
			for i, n := range []string{"o/n0", "o/n1", "o/n2", "o/n3", "o/n4", "o/n5"} {
				require.NoError(t, a.Create(ctx, rec(fmt.Sprint(i), n, time.Time{})))
			}
			na, err := a.Names(ctx, "a")
			require.NoError(t, err)
			nb, err := b.Names(ctx, "b")
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{"o/n0", "o/n1", "o/n2", "o/n3", "o/n4", "o/n5"}, append(na, nb...), "every name polled once")
			require.NoError(t, b.Leave(ctx, "b"))
			na, err = a.Names(ctx, "a")
			require.NoError(t, err)
			assert.Len(t, na, 6, "the member left: its names pass to the other")
		}},
		{"a lapsed member is fenced off and its claims are void", func(t *testing.T, s *sim.SharedState, a, b *sim.SharedHandle) {
			ctx := t.Context()
			require.NoError(t, a.Create(ctx, rec("1", "o/n", time.Now())))
			claimed, err := a.Due(ctx, "a", time.Now(), time.Minute, 10)
			require.NoError(t, err)
			require.Len(t, claimed, 1)
			none, err := b.Due(ctx, "b", time.Now().Add(time.Hour), time.Minute, 10)
			require.NoError(t, err)
			assert.Empty(t, none, "a valid claim is not taken")
			time.Sleep(period + time.Second) // a does not heartbeat
			_, err = b.Heartbeat(ctx, "b")
			require.ErrorIs(t, err, state.ErrLeaseLost, "b's lease lapsed too")
			_, err = b.Join(ctx, "b")
			require.NoError(t, err)
			taken, err := b.Due(ctx, "b", time.Now(), time.Minute, 10)
			require.NoError(t, err)
			assert.Len(t, taken, 1, "a's claim is void with its membership")
			assert.ErrorIs(t, a.Update(ctx, "a", &claimed[0]), state.ErrLeaseLost, "a lapsed member writes nothing")
			_, err = a.Heartbeat(ctx, "a")
			assert.ErrorIs(t, err, state.ErrLeaseLost, "a lapsed lease is not renewed")
			assert.Empty(t, s.ClaimViolations())
		}},
		{"a restart under the same id fences the old process off", func(t *testing.T, s *sim.SharedState, a, b *sim.SharedHandle) {
			ctx := t.Context()
			require.NoError(t, a.Create(ctx, rec("1", "o/n", time.Now())))
			claimed, err := a.Due(ctx, "a", time.Now(), time.Minute, 10)
			require.NoError(t, err)
			require.Len(t, claimed, 1)
			again := s.Open()
			_, err = again.Join(ctx, "a")
			require.NoError(t, err)
			assert.ErrorIs(t, a.Update(ctx, "a", &claimed[0]), state.ErrLeaseLost, "the old incarnation writes nothing")
			_, err = a.Heartbeat(ctx, "a")
			assert.ErrorIs(t, err, state.ErrLeaseLost)
			require.NoError(t, again.Update(ctx, "a", &claimed[0]), "the claim passes to the new incarnation")
		}},
		{"a closed handle answers nothing", func(t *testing.T, s *sim.SharedState, a, b *sim.SharedHandle) {
			require.NoError(t, a.Close())
			_, err := a.Heartbeat(t.Context(), "a")
			assert.ErrorIs(t, err, state.ErrStateUnavailable)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := sim.NewSharedState(period)
				a, b := s.Open(), s.Open()
				_, err := a.Join(t.Context(), "a")
				require.NoError(t, err)
				_, err = b.Join(t.Context(), "b")
				require.NoError(t, err)
				tc.run(t, s, a, b)
			})
		})
	}
}
