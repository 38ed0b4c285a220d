//go:build broken_give_up

package sim_test

import "testing"

// The model's broken variant "give up", built into the real engine by the
// build tag broken_give_up: a message whose sending failed is not tried
// again. The simulation catches it, as an agent not current once the
// faults stop, within 40 seeds (first at seed 2 or 4, one agbot: runs
// differ in which of the two catches it first):
//
//	go test -tags broken_give_up -run TestBrokenVariant ./internal/testkit/sim
func TestBrokenVariantGiveUpIsCaught(t *testing.T) {
	catch(t, 40, nil, "not current")
}
