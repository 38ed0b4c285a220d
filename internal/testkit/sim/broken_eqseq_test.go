//go:build broken_equal_sequences

package sim_test

import "testing"

// The model's broken variant "equal sequences", built into the real
// engine by the build tag broken_equal_sequences: a new message of an
// agreement reuses the sequence of the last one. The simulation catches
// it within 20 seeds (first at seed 2, two agbots: an agent went back
// from version 2 to 1, the older envelope, replayed, sharing the newer
// one's sequence and taken for the same message again):
//
//	go test -tags broken_equal_sequences -run TestBrokenVariant ./internal/testkit/sim
func TestBrokenVariantEqualSequencesIsCaught(t *testing.T) {
	catch(t, 20, agbotsFor, "went back", "not current")
}
