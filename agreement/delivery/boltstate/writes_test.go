package boltstate_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// TestConcurrentWritesShareCommits: single Updates from many goroutines
// are group-committed, and an Update of many records is one commit.
func TestConcurrentWritesShareCommits(t *testing.T) {
	st := openState(t, filepath.Join(t.TempDir(), "state.db"))
	ctx := t.Context()
	const writers, rounds = 64, 10
	recs := make([]*state.Record, writers)
	for i := range recs {
		recs[i] = record(fmt.Sprintf("agr-%02d", i), i)
	}
	before := boltstate.Commits(st)
	require.ErrorIs(t, st.Update(ctx, "", recs...), state.ErrConflict, "records not yet stored conflict")
	// The conflicts above were one transaction.
	assert.Equal(t, before+1, boltstate.Commits(st), "an Update of many records is one commit")

	for _, r := range recs {
		require.NoError(t, st.Create(ctx, r))
	}
	before = boltstate.Commits(st)
	var wg sync.WaitGroup
	for _, r := range recs {
		wg.Go(func() {
			for range rounds {
				r.Attempts++
				assert.NoError(t, st.Update(ctx, "", r))
			}
		})
	}
	wg.Wait()
	commits := boltstate.Commits(st) - before
	t.Logf("%d single updates in %d commits", writers*rounds, commits)
	assert.LessOrEqual(t, commits, int64(writers*rounds/2), "concurrent single updates share commits")
	for _, r := range recs {
		got, err := st.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, rounds, got.Attempts)
	}

	before = boltstate.Commits(st)
	for _, r := range recs {
		r.Attempts = 0
	}
	require.NoError(t, st.Update(ctx, "", recs...))
	assert.Equal(t, before+1, boltstate.Commits(st), "an Update of many records is one commit")
}

// TestCloseWhileWriting: calls racing Close either complete or fail with
// ErrStateUnavailable; none is lost half-way or panics.
func TestCloseWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st := openState(t, path)
	ctx := t.Context()
	var wg sync.WaitGroup
	acked := make([]int, 16)
	for w := range acked {
		wg.Go(func() {
			r := record(fmt.Sprintf("agr-%02d", w), w)
			if err := st.Create(ctx, r); err != nil {
				assert.ErrorIs(t, err, state.ErrStateUnavailable)
				return
			}
			for {
				r.Counter++
				if err := st.Update(ctx, "", r); err != nil {
					assert.ErrorIs(t, err, state.ErrStateUnavailable)
					return
				}
				acked[w] = int(r.Counter)
			}
		})
	}
	for boltstate.Commits(st) < 50 {
		_, err := st.NewEpoch(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	wg.Wait()
	st = openState(t, path)
	for w, n := range acked {
		if n == 0 {
			continue
		}
		got, err := st.Get(ctx, fmt.Sprintf("agr-%02d", w))
		require.NoError(t, err)
		assert.Equal(t, n, int(got.Counter), "every Update acknowledged before Close is in the file, and none after")
	}
	require.NoError(t, boltstate.Check(ctx, st))
	_, err := st.Get(ctx, "missing")
	assert.True(t, errors.Is(err, state.ErrNotFound))
}

// TestDueWithNothingDueWritesNothing: the reconcile loop asks for due
// records every second; when none is due, that costs no commit (a write
// transaction syncs the file even when it changes nothing).
func TestDueWithNothingDueWritesNothing(t *testing.T) {
	st := openState(t, filepath.Join(t.TempDir(), "state.db"))
	ctx := t.Context()
	now := time.Now()
	later := record("agr-later", 0)
	later.NextAttempt = now.Add(time.Hour)
	require.NoError(t, st.Create(ctx, later))
	idle := record("agr-idle", 0)
	idle.NextAttempt = time.Time{}
	require.NoError(t, st.Create(ctx, idle))

	before := boltstate.Commits(st)
	got, err := st.Due(ctx, "", now, time.Minute, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, before, boltstate.Commits(st), "nothing due: no commit")

	got, err = st.Due(ctx, "", now.Add(2*time.Hour), time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, got, 1, "the record due later, once due")
	assert.Equal(t, before+1, boltstate.Commits(st), "its claim is one commit")
}
