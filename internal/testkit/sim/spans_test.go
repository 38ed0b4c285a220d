package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// allGoneFor, the test of the cancellation invariant, holds only when
// every candidate of a binding was unreadable at once for the period: a
// node-level secret gone while its organisation-level fallback is readable
// allows no cancellation.
func TestAllGoneForNeedsEveryCandidateAtOnce(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	now := at(100)
	for _, tc := range []struct {
		name       string
		node, base secret
		want       bool
	}{
		{"node-level gone, fallback readable", secret{goneSince: at(0)}, secret{exists: true}, false},
		{"both gone long enough, going on", secret{goneSince: at(0)}, secret{goneSince: at(90)}, true},
		{"both gone, not long enough", secret{goneSince: at(0)}, secret{goneSince: at(97)}, false},
		{"gone in turn, never together", secret{exists: true, spans: [][2]time.Time{{at(10), at(20)}}},
			secret{exists: true, spans: [][2]time.Time{{at(20), at(30)}}}, false},
		{"overlap of ended spans shorter than the period", secret{exists: true, spans: [][2]time.Time{{at(10), at(20)}}},
			secret{exists: true, spans: [][2]time.Time{{at(17), at(30)}}}, false},
		{"overlap of ended spans as long as the period", secret{exists: true, spans: [][2]time.Time{{at(10), at(20)}}},
			secret{exists: true, spans: [][2]time.Time{{at(16), at(30)}}}, true},
		{"one ended span within the other's open one", secret{exists: true, spans: [][2]time.Time{{at(40), at(50)}}},
			secret{goneSince: at(30)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &World{secrets: []*secret{&tc.node, &tc.base}}
			assert.Equal(t, tc.want, w.allGoneFor([]int{0, 1}, now, 4*time.Second))
		})
	}
}

// A binding resolves to its first readable candidate, none when all are
// gone.
func TestCurrentIsTheFirstReadableCandidate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		node, base secret
		want       int
	}{
		{"node-level readable", secret{exists: true}, secret{exists: true}, 0},
		{"node-level missing", secret{}, secret{exists: true}, 1},
		{"node-level denied", secret{exists: true, denied: true}, secret{exists: true}, 1},
		{"none", secret{}, secret{exists: true, denied: true}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &World{secrets: []*secret{&tc.node, &tc.base}}
			assert.Equal(t, tc.want, w.current([]int{0, 1}))
		})
	}
}
