//go:build broken_no_lease_check

package sim_test

import "testing"

// The model's broken variant "no lease check", built into the
// simulation's shared state by the build tag broken_no_lease_check: Due
// and Update ignore the claims of other members. The simulation of several
// agbots catches it, as two agbots holding a valid claim on one
// agreement, within 20 seeds (first at seed 1, three agbots):
//
//	go test -tags broken_no_lease_check -run TestBrokenVariant ./internal/testkit/sim
func TestBrokenVariantNoLeaseCheckIsCaught(t *testing.T) {
	catch(t, 20, agbotsFor, "claimed by")
}
