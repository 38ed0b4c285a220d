package demo_test

import (
	"context"
	"fmt"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
)

// The agent makes a demo attestation with the bootstrap token it shares
// with the hub; the hub's attestor checks it.
func ExampleAttest() {
	id := identity.Identity{Provider: "demo", Org: "myorg", Node: "node-1", InstanceID: "node-1"}
	doc := demo.Attest("shared-bootstrap-token", id, time.Unix(1_800_000_000, 0))
	fmt.Println(doc) // an attestation never prints

	issuedAt, err := demo.NewAttestor("shared-bootstrap-token")(context.Background(),
		identity.AttestationRequest{Instance: id, Attestation: doc})
	fmt.Println(issuedAt.UTC(), err)
	// Output:
	// [redacted]
	// 2027-01-15 08:00:00 +0000 UTC <nil>
}
