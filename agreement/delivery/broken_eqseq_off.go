//go:build !broken_equal_sequences

package delivery

// brokenEqualSequences is false in every build but the simulation's broken
// variant (build tag broken_equal_sequences, internal/testkit/sim), which shows
// that every message of an agreement needs a sequence of its own.
const brokenEqualSequences = false
