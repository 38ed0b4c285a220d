//go:build broken_cancel_on_forbidden

package sim_test

import "testing"

// The model's broken variant "cancel on forbidden", built into the real
// engine by the build tag broken_cancel_on_forbidden: a cycle in which
// the store refused every read may confirm a revocation. The simulation
// catches it, as a cancellation without the secret alone unreadable over
// the grace period, within 20 seeds (first at seed 4, one agbot):
//
//	go test -tags broken_cancel_on_forbidden -run TestBrokenVariant ./internal/testkit/sim
func TestBrokenVariantCancelOnForbiddenIsCaught(t *testing.T) {
	catch(t, 20, nil, "cancelled")
}
