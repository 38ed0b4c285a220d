package sim_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/sim"
)

var pgFlag = flag.Int("sim.pg", 0, "run this many seeds with the agbots sharing a PostgreSQL state (pgstate), in real time")

// The simulation over PostgreSQL: one to three agbots, each with its own
// pgstate connection to one database (a schema per seed), so that a crash
// closes its pool and a restart opens another. It runs in real time
// (a real server cannot join a synctest bubble), about two minutes a
// seed, so only under -sim.pg=N (with -sim.seed=S, seed S alone; in real
// time a seed's run is not exactly the same twice):
//
//	EDGESECRETS_POSTGRES_BIN=/usr/lib/postgresql/15/bin go test -race -count=1 -timeout 30m -run TestSimulationPostgres ./internal/testkit/sim -sim.pg=3 -v
func TestSimulationPostgres(t *testing.T) {
	if *pgFlag <= 0 {
		t.Skip("real time, minutes a seed: run with -sim.pg=N")
	}
	db := pgtest.NewDatabase(t)
	var total sim.Stats
	start := time.Now()
	first, last := uint64(1), uint64(*pgFlag)
	if *seedFlag != 0 {
		first, last = *seedFlag, *seedFlag // replay one seed (real time: not exactly)
	}
	for seed := first; seed <= last; seed++ {
		schema := fmt.Sprintf("sim_%d", seed)
		open := func(ctx context.Context) (state.Backend, error) {
			st, _, err := pgstate.Open(ctx, pgstate.Options{URL: db.URL, Schema: schema, LeasePeriod: 6 * time.Second, MaxConns: 4})
			if err != nil {
				return nil, err // not a nil *State in a non-nil Backend
			}
			return st, nil
		}
		agbots := 1 + int(seed%3)
		stats, problems := run(t, seed, withAgbots(agbots), func(c *sim.Config) { c.OpenState = open })
		for _, p := range problems {
			t.Errorf("seed %d (%d agbots, PostgreSQL): %s", seed, agbots, p)
		}
		total.Add(stats)
	}
	t.Log(fmt.Sprintf("%v in %v", total, time.Since(start).Round(time.Millisecond)))
}
