package state_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

func TestMemoryDueReturnsTheEarliestInOrderAndLeasesThem(t *testing.T) {
	ctx := context.Background()
	s := state.NewMemory()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []string
	for i, off := range rand.Perm(100) {
		r := &state.Record{ID: fmt.Sprintf("r%03d", i), Node: "n", NextAttempt: now.Add(time.Duration(off-80) * time.Second)}
		require.NoError(t, s.Create(ctx, r))
		if off <= 80 {
			want = append(want, r.ID)
		}
	}
	slices.SortFunc(want, func(a, b string) int {
		ra, _ := s.Get(ctx, a)
		rb, _ := s.Get(ctx, b)
		return ra.NextAttempt.Compare(rb.NextAttempt)
	})
	var got []string
	for {
		recs, err := s.Due(ctx, "m", now, time.Minute, 10)
		require.NoError(t, err)
		if len(recs) == 0 {
			break
		}
		assert.LessOrEqual(t, len(recs), 10)
		for _, r := range recs {
			got = append(got, r.ID)
			assert.Equal(t, now.Add(time.Minute), r.NextAttempt, "leased")
		}
	}
	assert.Equal(t, want, got, "every due record once, earliest first")
}

func TestMemoryDueFollowsUpdatesMarksAndDeletes(t *testing.T) {
	ctx := context.Background()
	s := state.NewMemory()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"a", "b", "c"} {
		require.NoError(t, s.Create(ctx, &state.Record{ID: id, Node: "n-" + id, NextAttempt: now}))
	}
	due := func() []string {
		recs, err := s.Due(ctx, "m", now, time.Minute, 0)
		require.NoError(t, err)
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	a, err := s.Get(ctx, "a")
	require.NoError(t, err)
	a.NextAttempt = time.Time{} // in sync: nothing to do
	require.NoError(t, s.Update(ctx, "m", &a))
	b, err := s.Get(ctx, "b")
	require.NoError(t, err)
	b.NextAttempt = now.Add(-time.Second) // due before c
	require.NoError(t, s.Update(ctx, "m", &b))
	require.NoError(t, s.Delete(ctx, "c"))
	assert.Equal(t, []string{"b"}, due())
	assert.Empty(t, due(), "leased")

	n, err := s.MarkDue(ctx, state.Selector{Nodes: []string{"n-a", "n-b"}}, now, false)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, []string{"a", "b"}, due())
}
