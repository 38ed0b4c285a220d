//go:build !broken_no_lease_check

package sim

// brokenNoLeaseCheck is false in every build but the simulation's broken
// variant (build tag broken_no_lease_check), which shows that a claim
// another member holds must keep a record from being claimed or written.
const brokenNoLeaseCheck = false
