// Package relay is an agreement-message relay between an agbot and its
// agents, standing in for the Open Horizon exchange's messaging. The
// agbot front door (package agbot) serves it and the agent front door
// (package agent) polls it; an embedder with a transport of its own uses
// neither. The agbot posts sealed messages to a node's mailbox, the node's
// agent polls for them and posts its sealed replies, and the agent
// publishes its identity certificate chain there for the agbot to find.
//
// The relay is an untrusted transport on purpose: it sees only envelopes
// and public certificates. Confidentiality and integrity come from the
// agreement envelopes (sealed to the agent's certified key, signed by the
// sender) and trust in the agent from the identity Verifier the agbot calls
// before sealing. Still, it accepts writes only from whom they belong to,
// so that a stranger cannot disturb delivery:
//   - a certificate chain is accepted for a node only if it verifies against
//     the hub's identity CA (current, not revoked) and names that node, and
//     never replaces a newer one that still verifies;
//   - envelopes are posted only by the agbot, in process (Post);
//   - a reply is passed on only if it opens with the agbot's keys, was
//     sealed by the node's certified agent and answers that very message;
//     a refused reply changes nothing (the message stays for the agent);
//   - the node table and each mailbox are bounded and refuse clearly when
//     full.
//
// What the relay can still do is drop or delay messages, as any network
// can. A certificate chain is public, so whoever publishes it again for its
// node makes the agbot look at the node's agreements again, and with
// ?holds=nothing propose them again: the cost of one proposal a node per
// answer of its agent, never a value to anyone but the agent.
//
//	PUT  /relay/nodes/{org}/{node}/certificate     publish the agent's PEM certificate chain → 204 | 400 | 403 | 409 (older) | 503 (full)
//	     [?holds=nothing]                          (the agent holds no agreement's secrets: Publication.HoldsNothing)
//	                                               (a 403 body {"error","reason"}: reason "unknown", "revoked" or "expired"
//	                                               when the agent's identity is lost and it must register again)
//	GET  /relay/nodes/{org}/{node}/next?after=<id> the oldest message with an id above <id> → 200 Message | 204
//	                                               (header Relay-Certificate: missing when no certificate is published for the node)
//	POST /relay/messages/{id}/reply                a sealed reply to message <id> → 202 | 403 | 404 | 409 (another message)
package relay

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/edgesecrets/edgesecrets/internal/safename"
)

// Limits.
const (
	// MaxEnvelopeSize bounds a message or reply envelope: the agreement
	// package's 1 MiB plaintext limit, base64-encoded, with room for the
	// header.
	MaxEnvelopeSize = 2 << 20
	// MaxCertificateSize bounds a published certificate chain (the
	// identity package accepts at most 32 KiB of PEM).
	MaxCertificateSize = 32 << 10
	// maxMessageBodySize bounds the JSON of one Message: the envelope in
	// base64 and the id.
	maxMessageBodySize = (MaxEnvelopeSize+2)/3*4 + 1<<10
)

// certificateHeader is set to "missing" on a next answer when the relay
// holds no certificate for the node (the agbot restarted): the agent
// publishes its certificate again.
const certificateHeader = "Relay-Certificate"

// Node names an agent's node, the address of its mailbox.
type Node struct {
	Org  string
	Node string
}

// String returns "<org>/<node>".
func (n Node) String() string { return n.Org + "/" + n.Node }

// Validate checks that both parts are single safe path elements.
func (n Node) Validate() error {
	var problems []error
	if err := safename.Check(n.Org); err != nil {
		problems = append(problems, fmt.Errorf("org: %w", err))
	}
	if err := safename.Check(n.Node); err != nil {
		problems = append(problems, fmt.Errorf("node: %w", err))
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("relay: bad node: %w", err)
	}
	return nil
}

// Publication is an agent's certificate chain published for its node.
type Publication struct {
	// Node is the agent's node.
	Node Node
	// ChainPEM is the agent's PEM certificate chain.
	ChainPEM []byte
	// HoldsNothing says that the agent holds no agreement's secrets: it
	// started over empty files (new, or after losing them, perhaps with
	// the keys it had). The agbot proposes again the agreements it
	// believes the agent holds.
	HoldsNothing bool
}

// holdsQuery is the query that carries Publication.HoldsNothing.
const holdsQuery, holdsNothing = "holds", "nothing"

// Message is one sealed message in a mailbox. Its JSON form is
//
//	{"id": 7, "envelope": "<base64 of the agreement envelope>"}
type Message struct {
	// ID identifies the message; a reply names it. Ids increase.
	ID uint64 `json:"id"`
	// Envelope is the agreement envelope, as sealed (base64 in JSON: the
	// relay does not look inside).
	Envelope []byte `json:"envelope"`
}

func parseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errors.New("not a message id")
	}
	return id, nil
}
