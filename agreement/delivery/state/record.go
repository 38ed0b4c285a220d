package state

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Phase is where an agreement stands in its life.
type Phase uint8

// Phases.
const (
	// PhaseActive: the agent is to hold the desired content of every bound
	// secret. This is the phase of a registered agreement.
	PhaseActive Phase = iota + 1
	// PhaseCancelling: the agreement is ending; the agent is to remove its
	// secrets. The engine sends the cancellation until the agent
	// acknowledges it, then deletes the record, or, while the cancel hook
	// has not returned for it, keeps it as PhaseCancelled.
	PhaseCancelling
	// PhaseCancelled: the agent acknowledged the cancellation (it removed
	// the agreement's secrets) before the cancel hook returned. The record
	// stays, for the hook to read (the agbot's reads the node and the
	// binding's candidates) and for a restarted engine to call the hook
	// again, and is deleted once the hook returned. Nothing more is sent.
	PhaseCancelled
)

// Content identifies one revision of one store secret without holding it:
// which candidate store name it came from and its content tag.
type Content struct {
	// StoreName is the store path the content was read from (one of the
	// binding's candidates).
	StoreName string
	// Tag is the content's tag (secretstore.Secret.ContentTag). The zero
	// Tag means none: nothing desired yet, or nothing acknowledged.
	Tag secretstore.ContentTag
}

// IsZero reports whether c names no content.
func (c Content) IsZero() bool { return c.StoreName == "" && c.Tag == (secretstore.ContentTag{}) }

// Slot is one service secret of an agreement: the content the agent should
// hold and the content it last acknowledged.
type Slot struct {
	// Service indexes Record.Services.
	Service int
	// Name is the service secret name (its file name on the node).
	Name string
	// Desired is the content the agent should hold: the first candidate
	// store name that exists, with the tag the engine last saw for it.
	Desired Content
	// Acked is the content the agent acknowledged holding; zero before
	// the proposal was accepted.
	Acked Content
}

// Sent is a message sent to the agent and not yet answered.
type Sent struct {
	// Type is agreement.TypeProposal or agreement.TypeUpdate.
	Type agreement.MessageType
	// Kind is the update kind (agreement.UpdateKindSecrets or
	// agreement.UpdateKindCancel); empty for a proposal.
	Kind string
	// Sequence is the envelope sequence the message was sealed with. Only
	// a reply naming this sequence (Reply.InReplyTo) answers it.
	Sequence uint64
	// Contents are the slots the message carried, by index into
	// Record.Slots, with the content it carried for each: what becomes
	// Acked when the agent accepts.
	Contents map[int]Content
	// AgentKey is the agent's encryption key id the message was sealed to.
	AgentKey agreement.KeyID
	// At is when it was sent.
	At time.Time
}

// Cancellation says why an agreement is being cancelled.
type Cancellation struct {
	// Reason is a sentence for logs and status, naming secrets, never
	// values.
	Reason string
	// StoreName is the store secret whose revocation decided it; empty
	// when the embedder ended the agreement (delivery.Engine.End).
	StoreName string
	// Kind is what the watcher found of StoreName for a revocation:
	// Missing (deleted) or Forbidden (access denied); zero (Unknown) when
	// the embedder ended the agreement.
	Kind ObservedState
	// DecidedAt is when the engine decided it.
	DecidedAt time.Time
	// Notified is set once the embedder's cancel hook returned for this
	// decision, so a restarted engine does not call it again.
	Notified bool
}

// Record is everything the engine keeps about one agreement. It holds
// names, content tags and sequences, never a secret value. Records are
// values: Backend implementations copy them in and out.
type Record struct {
	// ID is the agreement id.
	ID string
	// Node identifies the agreement's agent to the engine's Agents and
	// Transport.
	Node string
	// Services are the agreement's services and their bindings. Update
	// never changes them; Records.Rebind replaces their store names when
	// the agreement is registered again with other candidates.
	Services []binding.ServiceBinding
	// Slots has one entry per service secret, sorted by (Service, Name).
	Slots []Slot

	Phase Phase
	// Cancel is set in PhaseCancelling.
	Cancel *Cancellation
	// Held marks a cancellation the engine decided but holds because it
	// would exceed the cancellation budget; see delivery.Engine.ReleaseHeld.
	Held *Cancellation

	// Proposed is true once the agent accepted a proposal of this
	// agreement (sealed to AgentKey); until then the engine sends
	// proposals, afterwards updates. Cleared when the agent's keys change
	// (a new agent on the node knows nothing of the agreement).
	Proposed bool
	// AgentKey is the encryption key id of the agent that accepted the
	// proposal.
	AgentKey agreement.KeyID

	// Epoch and Counter make envelope sequences: Epoch<<32 | Counter.
	// Epoch comes from Epochs.NewEpoch (above every epoch handed out
	// before, by any member), Counter counts the messages sent within it.
	// So every message of an agreement gets a higher sequence than every
	// earlier one, across restarts and takeovers, without a write per
	// sequence.
	Epoch   uint64
	Counter uint32
	// InFlight is the last message sent and not yet answered, if any.
	InFlight *Sent
	// ReplySequence is the highest reply sequence accepted from the agent:
	// the agbot's replay guard for this agreement's replies.
	ReplySequence uint64

	// Attempts counts sends since the last accepted reply; it drives the
	// backoff.
	Attempts int
	// Unanswered is when the oldest message the agent has not answered
	// was sent; zero once the agent answered (accepting or rejecting).
	// An agent silent for longer than delivery.Options.DivergedAfter is
	// reported diverged.
	Unanswered time.Time
	// NextAttempt is when the engine next looks at the agreement; zero
	// means nothing to do until something changes.
	NextAttempt time.Time
	// LastError is the last delivery problem (a send that failed, no
	// reply in time, the store unavailable), for status; no values.
	LastError string
	// Rejection is the reason the agent gave for refusing the last
	// message, if it did.
	Rejection string
	// LastReply is when the agent last answered.
	LastReply time.Time
	CreatedAt time.Time
	UpdatedAt time.Time

	// Revision is maintained by the Backend for compare-and-set: 0 for a
	// record not yet stored.
	Revision uint64
}

// Observation is what the engine last learnt of one store secret.
type Observation struct {
	// Name is the store path.
	Name string
	// State is Present, Missing or Forbidden.
	State ObservedState
	// Tag is the content tag when Present.
	Tag secretstore.ContentTag
	// Since is when the name entered State (for Missing and Forbidden,
	// the start of the grace period); for Present, when its current
	// content (Tag) was first observed.
	Since time.Time
	// CheckedAt is the last time a watcher cycle confirmed State.
	CheckedAt time.Time
}

// ObservedState is what a look at a store secret found.
type ObservedState uint8

// Observed states.
const (
	// Unknown: never looked at, or the store did not answer.
	Unknown ObservedState = iota
	// Present: the secret exists; Observation.Tag says which content.
	Present
	// Missing: the store says it does not exist.
	Missing
	// Forbidden: the store denies the agbot access to it.
	Forbidden
)

// Wait is a deployment that was refused because store secrets it binds do
// not exist yet. The engine calls its ready hook once any of them exists
// (see delivery.Engine.WaitForSecrets).
type Wait struct {
	// ID identifies the deployment (the embedder's choice, e.g. a node).
	ID string
	// StoreNames are the secrets it waits for.
	StoreNames []string
	CreatedAt  time.Time
}

// Selector picks agreements for Schedule.MarkDue: those with any of the IDs,
// on any of the Nodes, or bound (as any candidate) to any of the
// StoreNames.
type Selector struct {
	IDs        []string
	Nodes      []string
	StoreNames []string
}

// Clone returns a deep copy of r.
func (r Record) Clone() Record {
	r.Services = cloneServices(r.Services)
	r.Slots = slices.Clone(r.Slots)
	if r.Cancel != nil {
		c := *r.Cancel
		r.Cancel = &c
	}
	if r.Held != nil {
		c := *r.Held
		r.Held = &c
	}
	if r.InFlight != nil {
		s := *r.InFlight
		s.Contents = maps.Clone(s.Contents)
		r.InFlight = &s
	}
	return r
}

func cloneServices(services []binding.ServiceBinding) []binding.ServiceBinding {
	if services == nil {
		return nil
	}
	out := make([]binding.ServiceBinding, len(services))
	for i, sb := range services {
		secrets := make(map[string]binding.BoundSecret, len(sb.Secrets))
		for name, b := range sb.Secrets {
			b.StoreNames = slices.Clone(b.StoreNames)
			secrets[name] = b
		}
		out[i] = binding.ServiceBinding{Service: sb.Service, Secrets: secrets}
	}
	return out
}

// joinIDs lists ids for an error message, at most ten of them.
func joinIDs(ids []string) string {
	const most = 10
	if len(ids) <= most {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:most], ", ") + ", …"
}

// String returns the state's lower-case name.
func (s ObservedState) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Present:
		return "present"
	case Missing:
		return "missing"
	case Forbidden:
		return "forbidden"
	}
	return fmt.Sprintf("ObservedState(%d)", s)
}

// String returns the phase's lower-case name.
func (p Phase) String() string {
	switch p {
	case PhaseActive:
		return "active"
	case PhaseCancelling:
		return "cancelling"
	case PhaseCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("Phase(%d)", p)
}
