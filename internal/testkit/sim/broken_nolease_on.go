//go:build broken_no_lease_check

package sim

// brokenNoLeaseCheck, set by the build tag broken_no_lease_check, makes
// SharedState's Due and Update ignore the claims of other members (the
// model's BROKEN_NO_LEASE_CHECK): two agbots then deliver one agreement at
// once.
const brokenNoLeaseCheck = true
