//go:build !broken_forget_floor

package agentapi

// brokenForgetFloor is false in every build but the simulation's broken variant
// (build tag broken_forget_floor, internal/testkit/sim), which shows that the
// floor of an ended agreement must be kept.
const brokenForgetFloor = false
