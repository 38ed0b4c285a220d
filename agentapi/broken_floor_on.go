//go:build broken_forget_floor

package agentapi

// brokenForgetFloor, set by the build tag broken_forget_floor for
// internal/testkit/sim only, makes the agent forget the floor of an agreement
// whose instances it removed (the model's BROKEN_FORGET_FLOOR): an old envelope
// of the agreement is then applied again. Never build a release with the tag.
const brokenForgetFloor = true
