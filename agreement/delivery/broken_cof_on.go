//go:build broken_cancel_on_forbidden

package delivery

// brokenCancelOnForbidden, set by the build tag broken_cancel_on_forbidden for
// internal/testkit/sim only, makes every cycle whose credential check passed
// healthy: a spell in which the store refuses the agbot every read then
// confirms revocations. Never build a release with the tag.
const brokenCancelOnForbidden = true
