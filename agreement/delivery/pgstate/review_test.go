package pgstate_test

import (
	"context"
	"fmt"
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

// Members claiming slices of the review at once get consecutive ranges
// that do not overlap: every claim starts where exactly one other ended
// (or at the start of a pass), spans limit records, and reads exactly the
// records of its range.
func TestReviewClaimsPartitionThePass(t *testing.T) {
	const records, limit, claimers, passes = 100, 7, 8, 3
	db := pgtest.NewDatabase(t)
	ms := joinAll(t, db.URL, pgstate.Options{}, "agbot-1", "agbot-2")
	ids := createRecords(t, ms[0], records, time.Time{}, storeNames(3))

	type claim struct{ from, through string }
	var (
		mu     sync.Mutex
		claims []claim
		ends   int
		wg     sync.WaitGroup
	)
	for i := range claimers {
		m := ms[i%len(ms)]
		sr, ok := m.sharedState.(state.SharedReview)
		require.True(t, ok, "the PostgreSQL state splits the review")
		wg.Go(func() {
			for {
				mu.Lock()
				done := ends >= passes
				mu.Unlock()
				if done {
					return
				}
				var read []string
				from, through, err := sr.ReviewNext(t.Context(), m.id, limit, func(r state.Record) bool {
					read = append(read, r.ID)
					return true
				})
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, inRange(ids, from, through), read, "the records of the range (%q, %q]", from, through)
				mu.Lock()
				claims = append(claims, claim{from, through})
				if through == "" {
					ends++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	next := func(after string) string { // the limit-th id after after, or ""
		i := 0
		if after != "" {
			i = slices.Index(ids, after) + 1
		}
		if i+limit-1 < len(ids) {
			return ids[i+limit-1]
		}
		return ""
	}
	// Along the pass, the claims starting at each boundary: one per pass
	// ended, and one more for a prefix of the pass under way. Two claims
	// of one range in one pass would make a count above that, or a
	// boundary claimed more often than one before it.
	starts := map[string]int{}
	for _, c := range claims {
		starts[c.from]++
	}
	var boundaries []string
	for b := ""; ; {
		boundaries = append(boundaries, b)
		if b = next(b); b == "" {
			break
		}
	}
	assert.Len(t, starts, len(boundaries), "claims start only at the boundaries")
	prev := ends + 1
	for _, b := range boundaries {
		n := starts[b]
		assert.True(t, n == ends || n == ends+1, "claims after %q: %d, with %d passes ended", b, n, ends)
		assert.LessOrEqual(t, n, prev, "claims after %q", b)
		prev = n
	}
}

// inRange returns the ids after from, up to and including through (”:
// the last).
func inRange(ids []string, from, through string) []string {
	var out []string
	for _, id := range ids {
		if id > from && (through == "" || id <= through) {
			out = append(out, id)
		}
	}
	return out
}

// reviewState is a shared State whose members split the review.
type reviewState interface {
	state.Backend
	state.Membership
	state.SharedReview
}

// reviewCount is a member's State that counts, with the other members'
// wrappers, the records each review reads and the passes ended.
type reviewCount struct {
	reviewState
	member string
	tally  *tally
}

type tally struct {
	mu     sync.Mutex
	per    map[string]int // reviews of each record
	by     map[string]int // records reviewed by each member
	passes int            // claims that ended a pass
}

func (c *reviewCount) ReviewNext(ctx context.Context, member string, limit int, fn func(state.Record) bool) (string, string, error) {
	from, through, err := c.reviewState.ReviewNext(ctx, member, limit, func(r state.Record) bool {
		if !fn(r) {
			return false
		}
		c.tally.mu.Lock()
		c.tally.per[r.ID]++
		c.tally.by[c.member]++
		c.tally.mu.Unlock()
		return true
	})
	if err == nil && through == "" {
		c.tally.mu.Lock()
		c.tally.passes++
		c.tally.mu.Unlock()
	}
	return from, through, err
}

// Two engines on one PostgreSQL state review the agreements once per
// pass between them, each a part: every record is reviewed as many times
// as passes ended (give or take the pass under way), not once per engine
// and pass, and both engines take part.
func TestTwoEnginesShareTheReview(t *testing.T) {
	const records = 600 // three slices of 256: passes take claims from both engines
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	ms := joinAll(t, db.URL, pgstate.Options{LeasePeriod: 10 * time.Second}, "agbot-1", "agbot-2")
	store := memory.New()
	_, err := store.Put(ctx, &secretstore.Secret{Name: "org/db", Data: edgesecrets.Data{"password": []byte("v1")}}, secretstore.PutOptions{})
	require.NoError(t, err)
	s, err := store.Get(ctx, "org/db")
	require.NoError(t, err)
	c := state.Content{StoreName: "org/db", Tag: s.ContentTag()}
	now := time.Now()
	require.NoError(t, ms[0].PutObservations(ctx, ms[0].id, state.Observation{Name: "org/db", State: state.Present, Tag: c.Tag, Since: now, CheckedAt: now}))
	for i := range records {
		r := newRecord(fmt.Sprintf("agr-%04d", i), time.Time{}, "org/db")
		r.Slots[0].Desired, r.Slots[0].Acked, r.Proposed = c, c, true
		require.NoError(t, ms[0].Create(ctx, r))
	}
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)

	tl := &tally{per: map[string]int{}, by: map[string]int{}}
	runCtx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	for _, m := range ms {
		st, ok := m.sharedState.(reviewState)
		require.True(t, ok, "the PostgreSQL state splits the review")
		e, err := delivery.New(delivery.Options{
			Store: store, State: &reviewCount{reviewState: st, member: m.id, tally: tl}, Keys: keys,
			Agents: noAgents{}, Transport: noAgents{},
			Interval: time.Second, ResyncPeriod: 10 * time.Second, Member: m.id,
		})
		require.NoError(t, err)
		running.Go(func() { _ = e.Run(runCtx) })
	}
	time.Sleep(6 * time.Second)
	cancel()
	running.Wait()

	tl.mu.Lock()
	defer tl.mu.Unlock()
	require.GreaterOrEqual(t, tl.passes, 4, "passes ended")
	assert.Positive(t, tl.by["agbot-1"], "agbot-1 reviewed a part")
	assert.Positive(t, tl.by["agbot-2"], "agbot-2 reviewed a part")
	require.Len(t, tl.per, records, "every record reviewed")
	for id, n := range tl.per {
		assert.InDelta(t, tl.passes, n, 1, "reviews of %s in %d passes", id, tl.passes)
	}
}

// Names applies name_owner's rule: each member's names are exactly those
// name_owner gives it, and every bound name is some member's.
func TestNamesFollowNameOwner(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	ms := joinAll(t, db.URL, pgstate.Options{}, "agbot-1", "agbot-2", "agbot-3")
	createRecords(t, ms[0], 300, time.Time{}, storeNames(300))
	want := map[string][]string{}
	rows, err := db.Pool(t).Query(ctx, `SELECT store_name, edgesecrets_delivery.name_owner(store_name) FROM edgesecrets_delivery.bound_names ORDER BY store_name`)
	require.NoError(t, err)
	for rows.Next() {
		var n, owner string
		require.NoError(t, rows.Scan(&n, &owner))
		want[owner] = append(want[owner], n)
	}
	require.NoError(t, rows.Err())
	total := 0
	for _, m := range ms {
		got, err := m.Names(ctx, m.id)
		require.NoError(t, err)
		assert.Equal(t, want[m.id], got, "the names of %s", m.id)
		total += len(got)
	}
	assert.Equal(t, 300, total, "every name is polled by one member")
}

// A claim whose range holds no record (the pass's records all claimed
// already, or none at all) ends the pass and reads nothing.
func TestReviewNextOfAnEmptyRangeEndsThePass(t *testing.T) {
	const limit = 4
	db := pgtest.NewDatabase(t)
	m := joinAll(t, db.URL, pgstate.Options{}, "agbot-1")[0]
	sr := m.sharedState.(state.SharedReview)
	next := func() (from, through string, read []string) {
		t.Helper()
		from, through, err := sr.ReviewNext(t.Context(), m.id, limit, func(r state.Record) bool {
			read = append(read, r.ID)
			return true
		})
		require.NoError(t, err)
		return from, through, read
	}

	from, through, read := next()
	assert.Equal(t, [3]any{"", "", []string(nil)}, [3]any{from, through, read}, "no records: the pass ends at once")

	ids := createRecords(t, m, limit, time.Time{}, storeNames(1))
	from, through, read = next()
	assert.Equal(t, [3]any{"", ids[limit-1], ids}, [3]any{from, through, read}, "a full slice")
	from, through, read = next()
	assert.Equal(t, [3]any{ids[limit-1], "", []string(nil)}, [3]any{from, through, read}, "nothing after it: the pass ends")
	from, through, read = next()
	assert.Equal(t, [3]any{"", ids[limit-1], ids}, [3]any{from, through, read}, "the next pass starts over")
}
