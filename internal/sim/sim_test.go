package sim_test

import (
	"flag"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgesecrets/edgesecrets/internal/sim"
)

var (
	seedFlag  = flag.Uint64("sim.seed", 0, "replay this one seed")
	seedsFlag = flag.Int("sim.seeds", 200, "seeds of the bounded run")
	soakFlag  = flag.Duration("sim.soak", 0, "run seeds for this long (a soak) instead of the bounded run")
)

// runSeed runs one seed in its own synctest bubble and returns its
// statistics; a violation fails the test with the command replaying it.
func runSeed(t *testing.T, seed uint64) sim.Stats {
	var stats sim.Stats
	var problems []string
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w, err := sim.New(ctx, sim.Config{Seed: seed, TempDir: t.TempDir})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var stepErr error
		for range 40 {
			if stepErr = w.Step(ctx); stepErr != nil {
				break
			}
			w.Check(ctx)
		}
		if stepErr == nil {
			w.Quiesce(ctx)
		}
		stats, problems = w.Close()
		if stepErr != nil {
			t.Errorf("seed %d: %v", seed, stepErr)
		}
	})
	for _, p := range problems {
		t.Errorf("seed %d: %s", seed, p)
	}
	if len(problems) > 0 {
		t.Errorf("replay: go test -race -count=1 -run 'TestSimulation' ./internal/sim -sim.seed=%d", seed)
	}
	return stats
}

// The bounded run of the test command: -sim.seeds seeds (or the one
// -sim.seed), every invariant after every step; -sim.soak=1h runs seeds
// for an hour instead.
func TestSimulation(t *testing.T) {
	var total sim.Stats
	start := time.Now()
	switch {
	case *seedFlag != 0:
		total.Add(runSeed(t, *seedFlag))
	case *soakFlag > 0:
		for seed := uint64(1); time.Since(start) < *soakFlag && !t.Failed(); seed++ {
			total.Add(runSeed(t, seed))
		}
	default:
		n := *seedsFlag
		if testing.Short() {
			n = 20
		}
		for seed := uint64(1); seed <= uint64(n); seed++ {
			total.Add(runSeed(t, seed))
		}
	}
	t.Log(fmt.Sprintf("%v in %v", total, time.Since(start).Round(time.Millisecond)))
}
