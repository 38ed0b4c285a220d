//go:build broken_give_up

package sim_test

import (
	"strings"
	"testing"
)

// The model's broken variant "give up", built into the real engine by the
// build tag broken_give_up: a message whose sending failed is not tried
// again. The simulation catches it, as an agent not current once the
// faults stop, within 20 seeds:
//
//	go test -tags broken_give_up -run TestBrokenVariant ./internal/sim
func TestBrokenVariantGiveUpIsCaught(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		_, problems := simulate(t, seed)
		for _, p := range problems {
			if strings.Contains(p, "not current") {
				t.Logf("caught at seed %d: %s", seed, p)
				return
			}
		}
	}
	t.Fatal("no seed of 20 caught the broken variant")
}
