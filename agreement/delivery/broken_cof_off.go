//go:build !broken_cancel_on_forbidden

package delivery

// brokenCancelOnForbidden is false in every build but the simulation's
// broken variant (build tag broken_cancel_on_forbidden, internal/testkit/sim),
// which shows that a cycle in which no name was answered can no longer
// confirm a revocation.
const brokenCancelOnForbidden = false
