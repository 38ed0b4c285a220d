//go:build broken_equal_sequences

package delivery

// brokenEqualSequences, set by the build tag broken_equal_sequences for
// internal/testkit/sim only, makes a new message of an agreement reuse the
// sequence of the last one within an epoch (the model's BROKEN_EQUAL_SEQ);
// the agent takes an equal sequence for the same message again. Never
// build a release with the tag.
const brokenEqualSequences = true
