package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// An agreement whose due mark is lost (its record says the agent lacks
// its content, and nothing is scheduled) is found by the anti-entropy
// review and delivered within one resync period, while each cycle reviews
// only a slice of the fleet.
func TestLostDueMarkIsRepairedWithinOneResyncPeriod(t *testing.T) {
	const (
		agreements = 300 // more than one cycle's slice
		resync     = 10 * testInterval
	)
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) { o.ResyncPeriod = resync })
		h.agent("node-1")
		h.put("org/db", canary+"v1")
		for i := range agreements {
			h.register(fmt.Sprintf("agr-%03d", i), "node-1", "org/db")
		}
		h.start()
		defer h.stop()
		for i := range agreements {
			h.wait(fmt.Sprintf("agr-%03d", i), time.Minute)
		}
		cycles(2) // the first pass, over every agreement, is done

		ctx := context.Background()
		const victim = "agr-290"
		r, err := h.state.Get(ctx, victim)
		require.NoError(t, err)
		r.Slots[0].Acked = state.Content{} // the agent's acknowledgement and the mark, lost
		r.NextAttempt = time.Time{}
		require.NoError(t, h.state.Update(ctx, "someone", &r))
		require.False(t, h.status(victim).InSync)

		start := time.Now()
		st := h.wait(victim, resync+testInterval)
		assert.True(t, st.InSync)
		assert.LessOrEqual(t, time.Since(start), resync+testInterval, "repaired within one resync period")
		assert.Equal(t, agreements, h.engine.Health(context.Background()).Agreements, "counted by the review's passes")
	})
}

// A confirmed deletion cancels the agreements bound to the secret within
// the grace period plus one interval through the name index, not when the
// review reaches them: here the review never shows the victim.
func TestDeletionCancelsWithinGraceWithoutTheReview(t *testing.T) {
	const agreements, victim = 300, "agr-150"
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *delivery.Options) {
			o.State = hiding{Backend: o.State, id: victim}
			o.ResyncPeriod = 60 * testInterval
		})
		h.agent("node-1")
		h.put("org/db", canary+"v1")
		h.put("org/gone", canary+"g1")
		for i := range agreements {
			id, name := fmt.Sprintf("agr-%03d", i), "org/db"
			if id == victim {
				name = "org/gone"
			}
			h.register(id, "node-1", name)
		}
		h.start()
		defer h.stop()
		for i := range agreements {
			h.wait(fmt.Sprintf("agr-%03d", i), time.Minute)
		}

		h.delete("org/gone")
		cycles(int((testGrace+testInterval)/testInterval) + 1)
		assert.Len(t, h.cancelled()[victim], 1, "cancelled within grace plus one interval")
		assert.Len(t, h.cancelled(), 1, "only the agreement bound to the deleted secret")
	})
}

// hiding is a State whose RecordsAfter never shows one record.
type hiding struct {
	state.Backend
	id string
}

func (s hiding) RecordsAfter(ctx context.Context, after string, limit int, fn func(state.Record) bool) error {
	return s.Backend.RecordsAfter(ctx, after, limit, func(r state.Record) bool { return r.ID == s.id || fn(r) })
}
