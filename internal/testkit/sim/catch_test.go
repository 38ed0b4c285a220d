package sim_test

import (
	"strings"
	"testing"

	"github.com/edgesecrets/edgesecrets/internal/testkit/sim"
)

// catch runs seeds 1 to n (with agbots(seed) agbots when agbots is not
// nil) until one breaks an invariant whose sentence holds one of want,
// logs the first failing seed and the invariant, and fails when none does:
// a broken variant built in by a build tag must be caught.
func catch(t *testing.T, n uint64, agbots func(uint64) int, want ...string) {
	t.Helper()
	for seed := uint64(1); seed <= n; seed++ {
		var edit []func(*sim.Config)
		if agbots != nil {
			edit = append(edit, withAgbots(agbots(seed)))
		}
		_, problems := simulate(t, seed, edit...)
		for _, p := range problems {
			for _, w := range want {
				if strings.Contains(p, w) {
					t.Logf("caught at seed %d: %s", seed, p)
					return
				}
			}
		}
		if len(problems) > 0 {
			t.Logf("seed %d broke other invariants: %s", seed, strings.Join(problems, "; "))
		}
	}
	t.Fatalf("no seed of %d caught the broken variant", n)
}
