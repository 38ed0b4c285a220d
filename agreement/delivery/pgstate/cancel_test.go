package pgstate_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// Engines on one PostgreSQL state, on a real clock, cancel every
// agreement whose secrets are deleted within the grace period and a few
// intervals: one engine, and two, where some agreements are bound to a
// name either member polls and one to two candidates that different
// members poll. PostgreSQL keeps
// times to the microsecond, so a member's sighting comes back earlier
// than the read that made it; taken for an older one, no absence a member
// polled was confirmed and nothing was cancelled (found by the fault
// simulation over PostgreSQL, seed 10 of two agbots).
func TestDeletedSecretsAreCancelledOnPostgreSQL(t *testing.T) {
	for _, members := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d members", members), func(t *testing.T) { testDeletedSecretsAreCancelled(t, members) })
	}
}

func testDeletedSecretsAreCancelled(t *testing.T, members int) {
	const (
		interval = time.Second
		grace    = 2 * time.Second
		within   = grace + 10*interval // a loaded machine under the race detector
	)
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	ms := joinAll(t, db.URL, pgstate.Options{LeasePeriod: 10 * time.Second}, memberIDs(members)...)
	store := memory.New()
	names := storeNames(6)
	now := time.Now()
	contents := map[string]state.Content{}
	for _, n := range names {
		_, err := store.Put(ctx, &secretstore.Secret{Name: n, Data: edgesecrets.Data{"password": []byte("v1")}}, secretstore.PutOptions{})
		require.NoError(t, err)
		s, err := store.Get(ctx, n)
		require.NoError(t, err)
		contents[n] = state.Content{StoreName: n, Tag: s.ContentTag()}
		require.NoError(t, ms[0].PutObservations(ctx, ms[0].id, state.Observation{Name: n, State: state.Present, Tag: s.ContentTag(), Since: now, CheckedAt: now}))
	}
	var ids []string
	for i, n := range names {
		r := newRecord(fmt.Sprintf("agr-%d", i), time.Time{}, n)
		r.Slots[0].Desired, r.Slots[0].Acked, r.Proposed = contents[n], contents[n], true
		require.NoError(t, ms[0].Create(ctx, r))
		ids = append(ids, r.ID)
	}
	owner := assertPartition(t, ms, names)
	first, second := names[0], names[1] // candidates polled by different members, when there are two
	for _, n := range names[1:] {
		if owner[n] != owner[first] {
			second = n
		}
	}
	require.Len(t, slices.Compact(slices.Sorted(maps.Values(owner))), members, "each member polls some of the names: %v", owner)
	both := newRecord("agr-both", time.Time{}, first)
	bound := both.Services[0].Secrets["secret00"]
	bound.StoreNames = []string{first, second}
	both.Services[0].Secrets["secret00"] = bound
	both.Slots[0].Desired, both.Slots[0].Acked, both.Proposed = contents[first], contents[first], true
	require.NoError(t, ms[0].Create(ctx, both))
	ids = append(ids, both.ID)

	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	var (
		mu        sync.Mutex
		cancelled = map[string]int{}
	)
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer running.Wait()
	defer stop()
	for _, m := range ms {
		e, err := delivery.New(delivery.Options{
			Store: store, State: m.sharedState, Keys: keys, Agents: noAgents{}, Transport: noAgents{},
			OnCancel: func(_ context.Context, id string, _ state.Cancellation) {
				mu.Lock()
				defer mu.Unlock()
				cancelled[id]++
			},
			Interval: interval, Grace: grace, Member: m.id,
		})
		require.NoError(t, err)
		running.Go(func() { _ = e.Run(runCtx) })
	}
	time.Sleep(3 * interval) // the engines poll the names present
	for _, n := range names {
		require.NoError(t, store.Delete(ctx, n))
	}
	deleted := time.Now()
	assert.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(cancelled) == len(ids)
	}, within, 100*time.Millisecond, "every agreement cancelled within %s of the deletions", within)
	mu.Lock()
	defer mu.Unlock()
	assert.ElementsMatch(t, ids, slices.Collect(maps.Keys(cancelled)), "cancelled %v after %s", cancelled, time.Since(deleted).Round(time.Millisecond))
}
