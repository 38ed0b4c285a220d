//go:build !broken_give_up

package delivery

// brokenGiveUp is false in every build but the simulation's broken
// variant (build tag broken_give_up, internal/testkit/sim), which shows that a
// message whose sending failed must be tried again.
const brokenGiveUp = false
