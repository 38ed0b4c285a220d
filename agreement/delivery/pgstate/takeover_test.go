package pgstate_test

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state/statetest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// TestAgbotsShareTheWorkAndTakeOver: two and three agbots (real engines)
// on one PostgreSQL, 1,000 agreements over 50 secrets. They deploy the
// agreements together; each secret is polled once per interval in all;
// then 5 secrets rotate and one agbot, a child process, is killed with
// SIGKILL in the middle of the fan-out. Every affected agreement
// converges, each agent applies each new content exactly once (duplicates
// across the takeover change nothing), nothing older is applied over
// newer, nothing is cancelled, and no secret value reaches the database.
func TestAgbotsShareTheWorkAndTakeOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 1,000 agreements through real engines; run without -short")
	}
	for _, agbots := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d agbots", agbots), func(t *testing.T) { agbotsTakeOver(t, agbots) })
	}
}

func agbotsTakeOver(t *testing.T, agbots int) {
	const (
		agreements = 1000
		nodes      = 100
		secrets    = 50
		rotated    = 5
		interval   = time.Second // the world's polling interval
		victim     = "agbot-victim"
	)
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	w := newWorld(t, secrets, nodes)
	store, writer, canary, names, fl := w.store, w.writer, w.canary, w.names, w.fleet
	cfg := func(member string) agbotConfig { return w.config(member, db.URL, 5*time.Second) }

	kill := startChildAgbot(t, cfg(victim))
	var survivors []*runningAgbot
	members := []string{victim}
	for i := range agbots - 1 {
		member := fmt.Sprintf("agbot-%d", i+1)
		a, err := startAgbot(ctx, cfg(member), slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		t.Cleanup(a.stop)
		survivors = append(survivors, a)
		members = append(members, member)
	}
	observer := open(t, db.URL, pgstate.Options{})

	// Deploy: any agbot registers, all of them deliver.
	all := testAgreements(agreements, nodes, names)
	for _, a := range all {
		require.NoError(t, survivors[0].engine.Register(ctx, a))
	}
	took := waitConverged(t, observer, fl, nil, 3*time.Minute)
	t.Logf("%d agbots deployed %d agreements (converged %s after the last registration); proposals applied per agbot: %v",
		agbots, agreements, took.Round(time.Millisecond), sentPer(fl, members))
	for _, m := range members {
		assert.Positive(t, fl.sentBy(m), "agbot %s took part in the deployment", m)
	}

	// Steady state: each secret polled once per interval, in all.
	from := time.Now()
	time.Sleep(4 * interval)
	requests, polled := store.polls(from, time.Now())
	assertPolledOnce(t, requests, polled, names, 4)

	// Rotate 5 secrets over a slow network, two of them polled by the
	// child agbot (so that it finds them and takes part in the fan-out at
	// once), and kill it in the middle of the fan-out.
	owners := nameOwners(t, db.Pool(t), names)
	var chosen []string
	for _, n := range names {
		if owners[n] == victim && len(chosen) < 2 {
			chosen = append(chosen, n)
		}
	}
	for _, n := range names {
		if owners[n] != victim && len(chosen) < rotated {
			chosen = append(chosen, n)
		}
	}
	require.Len(t, chosen, rotated)
	fl.reset()
	fl.throttle(4, 20*time.Millisecond)
	rotatedAt := time.Now()
	gens := map[string]int{}
	for _, n := range chosen {
		putSecret(t, writer, n, canary, 2)
		gens[n] = 2
	}
	want := wantGenerations(all, gens)
	require.Eventually(t, func() bool { return fl.sentBy(victim) >= 3 }, time.Minute, 5*time.Millisecond,
		"the child agbot delivers part of the fan-out")
	written, _ := fl.written()
	kill()
	killedAt := time.Now()
	require.Less(t, len(written), len(want), "the agbot was killed in the middle of the fan-out")
	t.Logf("killed %s after %s of the fan-out: %d of %d new contents applied, %d messages applied from it",
		victim, killedAt.Sub(rotatedAt).Round(time.Millisecond), len(written), len(want), fl.sentBy(victim))
	fl.throttle(0, 0)
	took = waitConverged(t, observer, fl, want, 3*time.Minute)
	t.Logf("converged %s after the kill (lease period %s)", took.Round(time.Millisecond), w.config(victim, "", 0).LeasePeriod)

	// Each agent applied each new content once, and nothing older over it.
	written, log := fl.written()
	assertAppliedOnce(t, written, want)
	duplicates := 0
	for _, r := range log {
		if len(r.changes) == 0 {
			duplicates++
		}
	}
	t.Logf("messages applied after the rotation: %d (%d changed nothing: sent again after a reply was lost to the slow network or the kill); per agbot: %v",
		len(log), duplicates, sentPer(fl, members))
	for _, a := range survivors {
		assert.Zero(t, a.cancels.Load(), "no agreement was cancelled")
		assert.Empty(t, a.engine.Health(ctx).StateProblem)
	}

	// Polls stayed once per secret per interval through the takeover; the
	// values were read when sealed, a few times per rotated secret.
	requests, polled = store.polls(rotatedAt, time.Now())
	assertPolledOnce(t, requests, polled, names, int(time.Since(rotatedAt)/interval)+1)
	values := store.requests("GetSecretValue", rotatedAt, time.Now())
	t.Logf("value reads during the fan-out, per rotated secret: %v", values)

	statetest.AssertNoCanary(t, []byte(db.Dump(t)), []byte(canary))
}

// nameOwners returns the member that polls each name, as the database
// says (name_owner).
func nameOwners(t *testing.T, pool *pgxpool.Pool, names []string) map[string]string {
	t.Helper()
	rows, err := pool.Query(t.Context(), "SELECT n, edgesecrets_delivery.name_owner(n) FROM unnest($1::text[]) AS n", names)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var n, owner string
		require.NoError(t, rows.Scan(&n, &owner))
		out[n] = owner
	}
	require.NoError(t, rows.Err())
	return out
}

// sentPer returns how many messages the agents applied from each member.
func sentPer(fl *fleet, members []string) map[string]int {
	out := map[string]int{}
	for _, m := range members {
		out[m] = fl.sentBy(m)
	}
	return out
}

// assertPolledOnce asserts that the agbots together polled every name in
// the window, and made at most one poll request per distinct secret per
// interval of the window (and one more for the window's edges), whatever
// their number. The watchers list their shares (ListSecrets pages, which
// may answer about more names than asked) and spot-check a few names with
// DescribeSecret, so the bound is on requests, the store's bill; that
// each name is in exactly one live member's share is TestNamesPartition's.
func assertPolledOnce(t *testing.T, requests int, polled map[string]int, names []string, intervals int) {
	t.Helper()
	for _, n := range names {
		assert.Positive(t, polled[n], "secret %s polled", n)
	}
	assert.LessOrEqual(t, requests, len(names)*(intervals+1), "at most one poll request per secret per interval, whatever the number of agbots")
	t.Logf("poll requests in %d intervals: %d for %d secrets (at most %d)", intervals, requests, len(names), len(names)*(intervals+1))
}

// TestAgbotsSurviveADatabaseOutage: two agbots, PostgreSQL stopped for
// 30 s in the middle of a rotation's fan-out, with more secrets rotating
// while it is down. The agbots say so in health, cancel nothing, and once
// the database is back (their memberships lapsed meanwhile: they join
// again) every agreement converges to the newest content, each agent
// applying each content once.
func TestAgbotsSurviveADatabaseOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s database outage; run without -short")
	}
	const (
		agreements = 200
		nodes      = 20
		secrets    = 20
		outage     = 30 * time.Second
	)
	ctx := t.Context()
	srv := pgtest.Start(t, pgtest.Options{})
	w := newWorld(t, secrets, nodes)
	writer, canary, names, fl := w.writer, w.canary, w.names, w.fleet
	var agbots []*runningAgbot
	for i := range 2 {
		a, err := startAgbot(ctx, w.config(fmt.Sprintf("agbot-%d", i+1), srv.URL, 2*time.Second), slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		t.Cleanup(a.stop)
		agbots = append(agbots, a)
	}
	observer := open(t, srv.URL, pgstate.Options{})
	all := testAgreements(agreements, nodes, names)
	for _, a := range all {
		require.NoError(t, agbots[0].engine.Register(ctx, a))
	}
	waitConverged(t, observer, fl, nil, 3*time.Minute)

	// Rotate, and stop the database while the fan-out runs.
	fl.reset()
	fl.throttle(2, 20*time.Millisecond)
	gens := map[string]int{}
	for _, n := range names[:5] {
		putSecret(t, writer, n, canary, 2)
		gens[n] = 2
	}
	require.Eventually(t, func() bool { w, _ := fl.written(); return len(w) > 0 }, time.Minute, 5*time.Millisecond, "the fan-out started")
	require.NoError(t, srv.Stop())
	stoppedAt := time.Now()
	fl.throttle(0, 0)
	// More rotations while the database is down, one of them again.
	time.Sleep(outage / 3)
	for _, n := range names[3:7] {
		putSecret(t, writer, n, canary, 3)
		gens[n] = 3
	}
	require.Eventually(t, func() bool {
		for _, a := range agbots {
			if a.engine.Health(ctx).StateProblem == "" {
				return false
			}
		}
		return true
	}, outage, 100*time.Millisecond, "the agbots say in health that the state is unavailable")
	time.Sleep(outage - time.Since(stoppedAt))
	require.NoError(t, srv.Start(ctx))
	want := wantGenerations(all, gens)
	took := waitConverged(t, observer, fl, want, 3*time.Minute)
	t.Logf("converged %s after a %s database outage", took.Round(time.Millisecond), outage)

	written, _ := fl.written()
	assertAppliedOnce(t, written, want)
	for _, a := range agbots {
		assert.Zero(t, a.cancels.Load(), "nothing was cancelled because of the outage")
		assert.Eventually(t, func() bool { return a.engine.Health(ctx).StateProblem == "" }, 10*time.Second, 100*time.Millisecond, "health is clear again")
	}
}

// wantGenerations returns the generation each slot of the agreements must
// hold after the rotations gens (store name → generation); slots whose
// secret did not rotate are left out.
func wantGenerations(all []delivery.Agreement, gens map[string]int) map[slotKey]int {
	want := map[slotKey]int{}
	for _, a := range all {
		for name, b := range a.Services[0].Secrets {
			if gen, ok := gens[b.StoreNames[0]]; ok {
				want[slotKey{a.ID + "-0", name}] = gen
			}
		}
	}
	return want
}

// assertAppliedOnce asserts that the agents wrote each new content once,
// in order, ending with the newest (no update lost, none applied twice,
// none older over newer), and wrote nothing to the other slots.
func assertAppliedOnce(t *testing.T, written map[slotKey][]string, want map[slotKey]int) {
	t.Helper()
	for k, gen := range want {
		var gens []int
		for _, c := range written[k] {
			gens = append(gens, generationOf(c))
		}
		if !assert.NotEmpty(t, gens, "slot %v was updated", k) {
			continue
		}
		assert.Equal(t, gen, gens[len(gens)-1], "slot %v holds the newest content", k)
		assert.True(t, slices.IsSorted(gens) && len(slices.Compact(slices.Clone(gens))) == len(gens),
			"slot %v: each content applied once, in order: %v", k, gens)
	}
	for k := range written {
		_, ok := want[k]
		assert.True(t, ok, "slot %v, whose secret did not rotate, was not written", k)
	}
}
