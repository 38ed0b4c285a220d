package pgstate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// Two agbots share one database: each joins, keeps its membership alive,
// polls its share of the store names, and claims its share of the due
// agreements: 10 names polled and 100 agreements claimed in all. (pgtest
// gives the example a throwaway server, so it has no checked output: it
// needs PostgreSQL; an agbot gives Open its database's URL.)
func ExampleOpen() {
	ctx := context.Background()
	srv, err := pgtest.StartServer(ctx, pgtest.Options{})
	if errors.Is(err, pgtest.ErrUnavailable) {
		fmt.Println("no PostgreSQL:", pgtest.HowToGet)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	agbots := map[string]state.Backend{}
	for _, id := range []string{"agbot-1", "agbot-2"} {
		st, _, err := pgstate.Open(ctx, pgstate.Options{URL: srv.URL, LeasePeriod: 30 * time.Second})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer st.Close()
		// The State is a state.Membership; an engine joins by itself.
		lease, err := st.Join(ctx, id)
		if err != nil {
			fmt.Println(err)
			return
		}
		// An engine heartbeats every lease.Period/3 and stops sending
		// when a heartbeat fails or lease.Until passes.
		fmt.Printf("%s joined, live for %s\n", id, lease.Period)
		agbots[id] = st
	}

	for i := range 100 {
		rec := newRecord(fmt.Sprintf("agr-%03d", i), time.Now(), fmt.Sprintf("org/secret-%02d", i%10))
		if err := agbots["agbot-1"].Create(ctx, rec); err != nil {
			fmt.Println(err)
			return
		}
	}
	polled, claimed := 0, 0
	for id, st := range agbots {
		names, err := st.Names(ctx, id)
		if err != nil {
			fmt.Println(err)
			return
		}
		recs, err := st.Due(ctx, id, time.Now(), time.Minute, 0)
		if err != nil {
			fmt.Println(err)
			return
		}
		polled += len(names)
		claimed += len(recs)
		for i := range recs {
			recs[i].NextAttempt = time.Time{} // delivered, say
		}
		if err := st.Update(ctx, id, slicePtrs(recs)...); err != nil && !errors.Is(err, state.ErrConflict) {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("names polled in all:", polled)
	fmt.Println("agreements claimed in all:", claimed)
}
