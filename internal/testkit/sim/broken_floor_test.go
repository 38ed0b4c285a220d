//go:build broken_forget_floor

package sim_test

import "testing"

// The model's broken variant "forgotten floor", built into the real agent
// by the build tag broken_forget_floor: the agent forgets the floor of an
// agreement whose instances it removed, so an old envelope of it is
// applied again. The simulation catches it within 20 seeds (first at seed 7, three agbots: a replayed
// envelope applied after the cancellation, as content going back or
// content while the secret stayed gone):
//
//	go test -tags broken_forget_floor -run TestBrokenVariant ./internal/testkit/sim
func TestBrokenVariantForgottenFloorIsCaught(t *testing.T) {
	catch(t, 20, agbotsFor, "went back", "after its agreement was cancelled")
}
