package pgstate_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

func memberIDs(n int) []string {
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("agbot-%d", i+1)
	}
	return ids
}

// TestClaimsNeverOverlap: members claiming at once take disjoint records,
// all of them, and only the holder of a valid claim stores the record.
func TestClaimsNeverOverlap(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			db := pgtest.NewDatabase(t)
			members := joinAll(t, db.URL, pgstate.Options{LeasePeriod: time.Minute}, memberIDs(n)...)
			ids := createRecords(t, members[0], 300, time.Now().Add(-time.Second), storeNames(20))

			claims := make([]map[string]state.Record, n)
			var wg sync.WaitGroup
			for i, m := range members {
				claims[i] = map[string]state.Record{}
				wg.Go(func() {
					for empty := 0; empty < 2; {
						recs, err := m.Due(t.Context(), m.id, time.Now(), time.Hour, 7)
						if !assert.NoError(t, err) {
							return
						}
						if len(recs) == 0 {
							empty++
						}
						for _, r := range recs {
							claims[i][r.ID] = r
						}
					}
				})
			}
			wg.Wait()

			holder := map[string]int{}
			for i, c := range claims {
				assert.NotEmpty(t, c, "member %d claimed some records", i)
				for id := range c {
					if prev, twice := holder[id]; twice {
						t.Errorf("record %s claimed by %s and %s while both claims are valid", id, members[prev].id, members[i].id)
					}
					holder[id] = i
				}
			}
			assert.ElementsMatch(t, ids, slices.Collect(maps.Keys(holder)), "every due record is claimed")

			for _, id := range ids[:30] {
				h := holder[id]
				other := members[(h+1)%n]
				rec := claims[h][id]
				theirs := rec.Clone()
				theirs.LastError = "written by a member without the claim"
				err := other.Update(t.Context(), other.id, &theirs)
				require.ErrorIs(t, err, state.ErrConflict, "%s updates %s, claimed by %s", other.id, id, members[h].id)
				rec.LastError = "written by the holder"
				require.NoError(t, members[h].Update(t.Context(), members[h].id, &rec), "the holder updates %s", id)
			}
		})
	}
}

// TestTakeoverWithinOneLeasePeriod: a member that stops heartbeating
// keeps its records and names until its membership lapses, judged by the
// database's clock, and loses them to the others within one lease period;
// whatever it still tries is refused; it comes back by joining again.
func TestTakeoverWithinOneLeasePeriod(t *testing.T) {
	const period = 2 * time.Second
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			ctx := t.Context()
			db := pgtest.NewDatabase(t)
			members := joinAll(t, db.URL, pgstate.Options{LeasePeriod: period}, memberIDs(n)...)
			victim, survivors := members[n-1], members[:n-1]
			stopVictim := heartbeat(t, victim, period)
			for _, m := range survivors {
				heartbeat(t, m, period)
			}
			names := storeNames(30)
			ids := createRecords(t, victim, 60, time.Now().Add(-time.Second), names)

			// The victim claims everything, for far longer than its
			// membership will last.
			held, err := victim.Due(ctx, victim.id, time.Now(), time.Hour, 0)
			require.NoError(t, err)
			require.Len(t, held, len(ids))
			victimNames, err := victim.Names(ctx, victim.id)
			require.NoError(t, err)
			require.NotEmpty(t, victimNames, "the victim polls a share of the names")
			assertPartition(t, members, names)

			stopVictim()
			lastSent := time.Now()
			_, err = victim.Heartbeat(ctx, victim.id)
			require.NoError(t, err, "the victim's last heartbeat")

			// Until its membership lapses nobody else takes its records or
			// names; right after, the survivors take all of them.
			var firstTaken time.Time
			taken := map[string]bool{}
			for len(taken) < len(ids) && time.Since(lastSent) < 3*period {
				for _, m := range survivors {
					recs, err := m.Due(ctx, m.id, time.Now(), time.Hour, 0)
					require.NoError(t, err)
					if len(recs) > 0 && firstTaken.IsZero() {
						firstTaken = time.Now()
					}
					for _, r := range recs {
						assert.False(t, taken[r.ID], "record %s taken twice", r.ID)
						taken[r.ID] = true
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			require.Len(t, taken, len(ids), "the survivors took every record of the victim")
			assert.GreaterOrEqual(t, firstTaken.Sub(lastSent), period, "no record was taken while the victim's membership was valid")
			assert.Less(t, firstTaken.Sub(lastSent), period+time.Second, "the records were taken within one lease period (and a poll)")
			t.Logf("%d members: the victim's records were taken %s after its last heartbeat (lease period %s)", n, firstTaken.Sub(lastSent).Round(time.Millisecond), period)

			assertPartition(t, survivors, names)

			// Whatever the victim still tries is refused, and stores nothing.
			stale := held[0]
			stale.LastError = "written by a member whose lease lapsed"
			for what, err := range map[string]error{
				"Heartbeat":       second(victim.Heartbeat(ctx, victim.id)),
				"Update":          victim.Update(ctx, victim.id, &stale),
				"Due":             second(victim.Due(ctx, victim.id, time.Now(), time.Hour, 0)),
				"Names":           second(victim.Names(ctx, victim.id)),
				"PutObservations": victim.PutObservations(ctx, victim.id, state.Observation{Name: victimNames[0], State: state.Missing}),
			} {
				assert.ErrorIs(t, err, state.ErrLeaseLost, what)
			}
			got, err := survivors[0].Get(ctx, stale.ID)
			require.NoError(t, err)
			assert.Empty(t, got.LastError, "the victim's Update stored nothing")
			obs, err := survivors[0].Observations(ctx, victimNames[:1])
			require.NoError(t, err)
			assert.Empty(t, obs, "the victim's PutObservations stored nothing")

			// It comes back by joining again, and gets a share again.
			_, err = victim.Join(ctx, victim.id)
			require.NoError(t, err)
			assertPartition(t, members, names)
		})
	}
}

func second[T any](_ T, err error) error { return err }

// assertPartition asserts the members' Names cover names, each once, and
// returns who polls what.
func assertPartition(t *testing.T, members []*member, names []string) map[string]string {
	t.Helper()
	owner := map[string]string{}
	for _, m := range members {
		share, err := m.Names(t.Context(), m.id)
		require.NoError(t, err, "Names(%s)", m.id)
		assert.True(t, slices.IsSorted(share), "Names is sorted")
		for _, n := range share {
			if prev, twice := owner[n]; twice {
				t.Errorf("name %s polled by %s and %s", n, prev, m.id)
			}
			owner[n] = m.id
		}
	}
	assert.ElementsMatch(t, names, slices.Collect(maps.Keys(owner)), "every name is polled by one live member")
	return owner
}

// TestNamesPartition: the live members' shares cover every bound name
// once, fairly; a member that leaves hands over its share only.
func TestNamesPartition(t *testing.T) {
	db := pgtest.NewDatabase(t)
	names := storeNames(300)
	seed := open(t, db.URL, pgstate.Options{})
	createRecords(t, seed, 600, time.Time{}, names)

	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			schemaMembers := joinAll(t, db.URL, pgstate.Options{}, memberIDs(n)...)
			owner := assertPartition(t, schemaMembers, names)
			counts := map[string]int{}
			for _, m := range owner {
				counts[m]++
			}
			for _, m := range schemaMembers {
				assert.Greater(t, counts[m.id], len(names)/n/2, "%s polls a fair share: %v", m.id, counts)
			}

			if n == 1 {
				return
			}
			leaver := schemaMembers[0]
			require.NoError(t, leaver.Leave(t.Context(), leaver.id))
			_, err := leaver.Names(t.Context(), leaver.id)
			require.ErrorIs(t, err, state.ErrLeaseLost, "a member that left polls nothing")
			after := assertPartition(t, schemaMembers[1:], names)
			for name, m := range owner {
				if m != leaver.id {
					assert.Equal(t, m, after[name], "a name of a member that stays stays with it")
				}
			}
			for _, m := range schemaMembers[1:] {
				require.NoError(t, m.Leave(t.Context(), m.id))
			}
		})
	}
}

// TestFencing: a member may store a record only under its own valid claim
// or no valid claim at all, and only the observations of its names.
func TestFencing(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	members := joinAll(t, db.URL, pgstate.Options{LeasePeriod: time.Minute}, "agbot-a", "agbot-b")
	a, b := members[0], members[1]
	const short = 300 * time.Millisecond

	t.Run("claim taken", func(t *testing.T) {
		mine := createAndClaim(t, a, "taken", short)
		time.Sleep(short + 100*time.Millisecond)
		theirs, err := b.Due(ctx, b.id, time.Now(), time.Hour, 0)
		require.NoError(t, err)
		require.Len(t, theirs, 1, "an expired claim is taken")
		mine.LastError = "stale"
		require.ErrorIs(t, a.Update(ctx, a.id, &mine), state.ErrConflict, "the member whose claim was taken stores nothing")
		require.NoError(t, b.Update(ctx, b.id, &theirs[0]), "the new holder stores")
	})

	t.Run("own claim lapsed", func(t *testing.T) {
		mine := createAndClaim(t, a, "lapsed", short)
		time.Sleep(short + 100*time.Millisecond)
		err := a.Update(ctx, a.id, &mine)
		assert.Equal(t, []string{"lapsed"}, conflictIDs(t, err), "a member does not store under a claim that lapsed, even when nobody took it")
		again, err := a.Due(ctx, a.id, time.Now(), time.Hour, 0)
		require.NoError(t, err)
		require.Len(t, again, 1, "it claims the record anew")
		require.NoError(t, a.Update(ctx, a.id, &again[0]))
	})

	t.Run("marked due while claimed", func(t *testing.T) {
		mine := createAndClaim(t, a, "marked", time.Hour)
		changed, err := b.MarkDue(ctx, state.Selector{StoreNames: []string{"org/marked"}}, time.Now(), false)
		require.NoError(t, err)
		require.Equal(t, 1, changed, "a change another member found marks the claimed record due")
		theirs, err := b.Due(ctx, b.id, time.Now(), time.Hour, 0)
		require.NoError(t, err)
		assert.Empty(t, theirs, "a record due but validly claimed is not claimed by another member")
		require.ErrorIs(t, a.Update(ctx, a.id, &mine), state.ErrConflict, "the holder's copy is stale after the mark")
		again, err := a.Due(ctx, a.id, time.Now(), time.Hour, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"marked"}, idsOf(again), "the holder claims it again at once")
		require.NoError(t, a.Update(ctx, a.id, &again[0]))
	})

	t.Run("unclaimed record", func(t *testing.T) {
		require.NoError(t, a.Create(ctx, newRecord("free", time.Time{}, "org/free")))
		r, err := b.Get(ctx, "free")
		require.NoError(t, err)
		r.LastReply = time.Now()
		require.NoError(t, b.Update(ctx, b.id, &r), "any member stores a record nobody claims (a reply)")
	})

	t.Run("update releases the claim", func(t *testing.T) {
		mine := createAndClaim(t, a, "released", time.Hour)
		mine.NextAttempt = time.Now().Add(-time.Millisecond)
		require.NoError(t, a.Update(ctx, a.id, &mine))
		theirs, err := b.Due(ctx, b.id, time.Now(), time.Hour, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"released"}, idsOf(theirs), "the holder's Update released its claim")
	})

	t.Run("observations of a lost name", func(t *testing.T) {
		require.NoError(t, a.Create(ctx, newRecord("bound", time.Time{}, storeNames(20)...)))
		aNames, err := a.Names(ctx, a.id)
		require.NoError(t, err)
		bNames, err := b.Names(ctx, b.id)
		require.NoError(t, err)
		require.NotEmpty(t, aNames)
		require.NotEmpty(t, bNames)
		theirs := state.Observation{Name: bNames[0], State: state.Present, Tag: tag(t, "7"), Since: time.Now(), CheckedAt: time.Now()}
		require.NoError(t, b.PutObservations(ctx, b.id, theirs))

		err = a.PutObservations(ctx, a.id,
			state.Observation{Name: bNames[0], State: state.Missing, Since: time.Now(), CheckedAt: time.Now()},
			state.Observation{Name: aNames[0], State: state.Present, Tag: tag(t, "1")},
			state.Observation{Name: "org/waited-for", State: state.Present, Tag: tag(t, "1")},
		)
		assert.Equal(t, []string{bNames[0]}, conflictIDs(t, err), "a member stores no observation of another member's name")
		got, err := a.Observations(ctx, []string{bNames[0], aNames[0], "org/waited-for"})
		require.NoError(t, err)
		assert.Equal(t, state.Present, got[bNames[0]].State, "the owner's observation stays")
		assert.Equal(t, tag(t, "7"), got[bNames[0]].Tag)
		assert.Contains(t, got, aNames[0], "the member's own name is stored")
		assert.Contains(t, got, "org/waited-for", "a name no record binds is stored by any live member")
	})

	t.Run("replaced incarnation", func(t *testing.T) {
		zombie := joinAll(t, db.URL, pgstate.Options{LeasePeriod: time.Minute}, "agbot-z")[0]
		held := createAndClaim(t, zombie, "zombie", time.Hour)
		restarted := joinAll(t, db.URL, pgstate.Options{LeasePeriod: time.Minute}, "agbot-z")[0]

		stale := held.Clone()
		for what, err := range map[string]error{
			"Heartbeat": second(zombie.Heartbeat(ctx, zombie.id)),
			"Update":    zombie.Update(ctx, zombie.id, &stale),
			"Due":       second(zombie.Due(ctx, zombie.id, time.Now(), time.Hour, 0)),
			"Names":     second(zombie.Names(ctx, zombie.id)),
		} {
			assert.ErrorIs(t, err, state.ErrLeaseLost, "the process whose incarnation was replaced: %s", what)
		}
		require.NoError(t, restarted.Update(ctx, restarted.id, &held), "the new incarnation of the id holds its claims")
	})
}

// createAndClaim creates a record due now, bound to "org/"+id, and has m
// claim it for lease.
func createAndClaim(t *testing.T, m *member, id string, lease time.Duration) state.Record {
	t.Helper()
	require.NoError(t, m.Create(t.Context(), newRecord(id, time.Now().Add(-time.Second), "org/"+id)))
	claimed, err := m.Due(t.Context(), m.id, time.Now(), lease, 0)
	require.NoError(t, err)
	require.Equal(t, []string{id}, idsOf(claimed))
	return claimed[0]
}

func idsOf(recs []state.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

func conflictIDs(t *testing.T, err error) []string {
	t.Helper()
	var ce *state.ConflictError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, state.ErrConflict)
	return ce.IDs
}

// TestConcurrentMembersNeverDeadlock: members updating overlapping sets of
// records in random orders, marking them due and claiming them at once
// get answers (stored, or conflicts), never a deadlock or another error,
// and no update of a revision is stored twice.
func TestConcurrentMembersNeverDeadlock(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	members := joinAll(t, db.URL, pgstate.Options{LeasePeriod: time.Minute}, memberIDs(3)...)
	names := storeNames(10)
	ids := createRecords(t, members[0], 100, time.Now(), names)
	var (
		mu     sync.Mutex
		stored = map[string]int{} // successful Updates per record
	)
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for w := range 6 {
		m := members[w%3]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for time.Now().Before(deadline) {
				switch rng.IntN(3) {
				case 0:
					var batch []*state.Record
					for _, i := range rng.Perm(len(ids))[:20] {
						r, err := m.Get(ctx, ids[i])
						if !assert.NoError(t, err) {
							return
						}
						r.ReplySequence++ // only this branch changes it
						batch = append(batch, &r)
					}
					err := m.Update(ctx, m.id, batch...)
					var ce *state.ConflictError
					if err != nil && !assert.ErrorAs(t, err, &ce, "Update answers stored or conflict") {
						return
					}
					mu.Lock()
					for _, r := range batch {
						if ce == nil || !slices.Contains(ce.IDs, r.ID) {
							stored[r.ID]++
						}
					}
					mu.Unlock()
				case 1:
					sel := state.Selector{StoreNames: []string{names[rng.IntN(len(names))], names[rng.IntN(len(names))]}, IDs: []string{ids[rng.IntN(len(ids))]}}
					_, err := m.MarkDue(ctx, sel, time.Now(), rng.IntN(2) == 0)
					if !assert.NoError(t, err, "MarkDue") {
						return
					}
				default:
					recs, err := m.Due(ctx, m.id, time.Now(), time.Minute, 10)
					if !assert.NoError(t, err, "Due") {
						return
					}
					for i := range recs {
						recs[i].NextAttempt = time.Now()
					}
					if err := m.Update(ctx, m.id, slicePtrs(recs)...); err != nil {
						assert.ErrorIs(t, err, state.ErrConflict)
					}
				}
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		got, err := members[0].Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, uint64(stored[id]), got.ReplySequence, "record %s: every stored Update counted once, none lost", id)
	}
}

// TestChangeReachesEveryAgreement: the member that polls a name finds it
// changed and marks its records due in the shared table; the members
// claiming work then deliver every record bound to it, whichever they
// are, and nothing else.
func TestChangeReachesEveryAgreement(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	members := joinAll(t, db.URL, pgstate.Options{LeasePeriod: time.Minute}, memberIDs(3)...)
	names := storeNames(5)
	createRecords(t, members[0], 150, time.Time{}, names) // in sync: nothing due
	owner := assertPartition(t, members, names)
	rotated := names[2]
	var finder *member
	for _, m := range members {
		if m.id == owner[rotated] {
			finder = m
		}
	}
	require.NoError(t, finder.PutObservations(ctx, finder.id, state.Observation{Name: rotated, State: state.Present, Tag: tag(t, "2"), Since: time.Now(), CheckedAt: time.Now()}))
	marked, err := finder.MarkDue(ctx, state.Selector{StoreNames: []string{rotated}}, time.Now(), false)
	require.NoError(t, err)
	assert.Equal(t, 30, marked, "every record bound to the rotated name is marked")

	claimedBy := map[string]int{}
	for round := 0; round < 10 && len(claimedBy) < marked; round++ {
		for i, m := range members {
			recs, err := m.Due(ctx, m.id, time.Now(), time.Minute, 4)
			require.NoError(t, err)
			for _, r := range recs {
				assert.Equal(t, rotated, r.Slots[0].Desired.StoreName, "only records bound to the rotated name are due")
				claimedBy[r.ID] = i
			}
		}
	}
	assert.Len(t, claimedBy, marked, "every marked record is claimed once")
	per := map[int]int{}
	for _, i := range claimedBy {
		per[i]++
	}
	assert.Len(t, per, 3, "each member delivers part of the change, whoever found it: %v", per)
}

// TestEngineKeepsItsMembership: an engine on the shared state joins before
// it does anything, heartbeats under one incarnation, joins again as a new
// one when its membership lapsed, and leaves when it stops.
func TestEngineKeepsItsMembership(t *testing.T) {
	const period = time.Second
	db := pgtest.NewDatabase(t)
	st := open(t, db.URL, pgstate.Options{LeasePeriod: period})
	other := joinAll(t, db.URL, pgstate.Options{LeasePeriod: time.Minute}, "agbot-2")[0]
	names := storeNames(40)
	createRecords(t, other, 40, time.Time{}, names)

	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	require.NoError(t, err)
	unreachable := noAgents{}
	engine, err := delivery.New(delivery.Options{
		Store: memory.New(), State: st, Keys: keys, Agents: unreachable, Transport: unreachable,
		Interval: time.Second, Member: "agbot-1",
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- engine.Run(ctx) }()

	pool := db.Pool(t)
	live := func() uint64 {
		var inc uint64
		err := pool.QueryRow(t.Context(), "SELECT incarnation FROM edgesecrets_delivery.members WHERE member = 'agbot-1' AND expires_at > now()").Scan(&inc)
		if err != nil {
			return 0
		}
		return inc
	}
	require.Eventually(t, func() bool { return live() != 0 }, 10*time.Second, 10*time.Millisecond, "joined")
	first := live()
	time.Sleep(2 * period)
	assert.Equal(t, first, live(), "heartbeats keep the same incarnation")
	share, err := st.Names(t.Context(), "agbot-1")
	require.NoError(t, err)
	assert.NotEmpty(t, share, "a live member polls a share")

	// The membership lapses (as during a long outage): the engine joins
	// again, as a new incarnation.
	_, err = pool.Exec(t.Context(), "UPDATE edgesecrets_delivery.members SET expires_at = now() WHERE member = 'agbot-1'")
	require.NoError(t, err)
	require.Eventually(t, func() bool { inc := live(); return inc != 0 && inc != first }, 10*time.Second, 10*time.Millisecond, "joined again")

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	all, err := other.Names(t.Context(), other.id)
	require.NoError(t, err)
	assert.Equal(t, names, all, "once the engine stopped, it left: the other polls every name at once")
}

// noAgents has no agent: every key lookup and send fails.
type noAgents struct{}

func (noAgents) Keys(context.Context, string) (*agreement.PublicKeys, error) {
	return nil, errors.New("no agent")
}

func (noAgents) Send(context.Context, delivery.Message) ([]byte, error) {
	return nil, errors.New("no agent")
}
