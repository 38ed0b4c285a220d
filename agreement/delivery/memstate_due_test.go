package delivery_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
)

func TestMemoryStateDueReturnsTheEarliestInOrderAndLeasesThem(t *testing.T) {
	ctx := context.Background()
	s := delivery.NewMemoryState()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []string
	for i, off := range rand.Perm(100) {
		r := &delivery.Record{ID: fmt.Sprintf("r%03d", i), Node: "n", NextAttempt: now.Add(time.Duration(off-80) * time.Second)}
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
