package delivery_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// flakyGetState is a State whose Get fails with ErrStateUnavailable while
// down is set; its other methods always answer.
type flakyGetState struct {
	state.Backend
	down atomic.Bool
}

func (s *flakyGetState) Get(ctx context.Context, id string) (state.Record, error) {
	if s.down.Load() {
		return state.Record{}, fmt.Errorf("get %q: %w", id, state.ErrStateUnavailable)
	}
	return s.Backend.Get(ctx, id)
}

// Every State call the engine makes is noted for Health, whichever method
// it is: one failing with ErrStateUnavailable reports the state
// unavailable, and the next call that succeeds clears it and counts as
// the last success.
func TestAStateCallIsNotedForHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var flaky *flakyGetState
		h := newHarness(t, func(o *delivery.Options) {
			flaky = &flakyGetState{Backend: o.State}
			o.State = flaky
		})
		ctx := context.Background()
		h.register("agr-1", "node-1", "org/db")
		registered := h.engine.Health(ctx)
		require.Empty(t, registered.StateProblem)
		require.False(t, registered.LastStateSuccess.IsZero(), "registering called the state")

		time.Sleep(time.Second)
		flaky.down.Store(true)
		_, err := h.engine.Status(ctx, "agr-1")
		require.ErrorIs(t, err, state.ErrStateUnavailable)
		down := h.engine.Health(ctx)
		assert.Contains(t, down.StateProblem, "state unavailable")
		assert.Equal(t, registered.LastStateSuccess, down.LastStateSuccess)

		time.Sleep(time.Second)
		flaky.down.Store(false)
		h.status("agr-1")
		back := h.engine.Health(ctx)
		assert.Empty(t, back.StateProblem)
		assert.True(t, back.LastStateSuccess.After(registered.LastStateSuccess), "the success is noted")
	})
}

// sharedReviewState is a state.Memory that implements SharedReview, each
// claim the whole pass, counting the claims.
type sharedReviewState struct {
	state.Backend
	claims atomic.Int64
}

func (s *sharedReviewState) ReviewNext(ctx context.Context, _ string, limit int, fn func(state.Record) bool) (from, through string, err error) {
	s.claims.Add(1)
	return "", "", s.RecordsAfter(ctx, "", limit, fn)
}

// The engine wraps its State to note every call, and still finds the
// SharedReview the State implements: the review claims its slices from
// it.
func TestTheWrappedStateKeepsTheSharedReview(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var shared *sharedReviewState
		h := newHarness(t, func(o *delivery.Options) {
			shared = &sharedReviewState{Backend: o.State}
			o.State = shared
		})
		h.deployOne()
		defer h.stop()
		cycles(2)
		assert.Positive(t, shared.claims.Load(), "the review claims through SharedReview")
		assert.Equal(t, 1, h.engine.Health(context.Background()).Agreements)
	})
}
