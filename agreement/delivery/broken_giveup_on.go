//go:build broken_give_up

package delivery

// brokenGiveUp, set by the build tag broken_give_up for internal/testkit/sim
// only, makes a message whose sending failed wait a century before it is tried
// again. Never build a release with the tag.
const brokenGiveUp = true
