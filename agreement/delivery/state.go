package delivery

import (
	"context"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/errkind"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Errors a State returns, matched with errors.Is. Each also matches the
// module-wide kind it refines (edgesecrets.ErrNotFound, ErrConflict,
// ErrUnavailable), but a store's error never matches them: an engine tells
// its state's trouble from its store's.
var (
	// ErrNotFound: no record (or wait) with that id. Also
	// edgesecrets.ErrNotFound.
	ErrNotFound = errkind.New("delivery: not found", edgesecrets.ErrNotFound)
	// ErrExists: Create of an id that is already stored. Also
	// edgesecrets.ErrConflict.
	ErrExists = errkind.New("delivery: already exists", edgesecrets.ErrConflict)
	// ErrConflict: Update of a record whose Revision is not the stored one
	// (someone else changed it since it was read), or, in a shared state,
	// whose lease this member no longer holds. Also edgesecrets.ErrConflict.
	ErrConflict = errkind.New("delivery: conflict", edgesecrets.ErrConflict)
	// ErrStateUnavailable: the state cannot be reached (a database down, a
	// disk failing). The engine stops delivering until it is back. Also
	// edgesecrets.ErrUnavailable.
	ErrStateUnavailable = errkind.New("delivery: state unavailable", edgesecrets.ErrUnavailable)
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
	// when the embedder ended the agreement (Engine.End).
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
// values: State implementations copy them in and out.
type Record struct {
	// ID is the agreement id.
	ID string
	// Node identifies the agreement's agent to Agents and Transport.
	Node string
	// Services are the agreement's services and their bindings. Update
	// never changes them; State.Rebind replaces their store names when
	// the agreement is registered again with other candidates.
	Services []binding.ServiceBinding
	// Slots has one entry per service secret, sorted by (Service, Name).
	Slots []Slot

	Phase Phase
	// Cancel is set in PhaseCancelling.
	Cancel *Cancellation
	// Held marks a cancellation the engine decided but holds because it
	// would exceed the cancellation budget; see Engine.ReleaseHeld.
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
	// Epoch comes from State.NewEpoch (above every epoch handed out
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
	// An agent silent for longer than Options.DivergedAfter is reported
	// diverged.
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

	// Revision is maintained by the State for compare-and-set: 0 for a
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
// (see Engine.WaitForSecrets).
type Wait struct {
	// ID identifies the deployment (the embedder's choice, e.g. a node).
	ID string
	// StoreNames are the secrets it waits for.
	StoreNames []string
	CreatedAt  time.Time
}

// Selector picks agreements for State.MarkDue: those with any of the IDs,
// on any of the Nodes, or bound (as any candidate) to any of the
// StoreNames.
type Selector struct {
	IDs        []string
	Nodes      []string
	StoreNames []string
}

// State is the engine's durable memory: agreements with their desired and
// acknowledged content tags and pending work, observations of store
// secrets, deployments waiting for secrets, and sequence epochs. No secret
// value is ever given to it.
//
// Implementations: NewMemoryState (tests), the embedded single-file state
// (delivery/boltstate) and PostgreSQL for several agbots. Every
// implementation passes delivery/statetest. All methods are safe for
// concurrent use; records go in and out by value (deep copies).
//
// A State may be shared by several engines (members, named by a member
// id): then Due leases the records it returns to the calling member, and
// Update of a record leased to another member fails with ErrConflict. A
// State for one engine may ignore member ids.
type State interface {
	// Create stores a new record with Revision 1 and sets rec.Revision.
	// An id already stored is ErrExists.
	Create(ctx context.Context, rec *Record) error
	// Get returns the record, or ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)
	// Update stores each record whose Revision equals the stored one,
	// incrementing it (and the caller's copy), in as few transactions as
	// the implementation can. A record whose Revision differs, or that is
	// leased to another member, is not stored; the error then matches
	// ErrConflict and, as a *ConflictError, lists those ids. Records
	// deleted meanwhile are reported the same way.
	Update(ctx context.Context, member string, recs ...*Record) error
	// Rebind stores rec as Update stores one record (the same
	// compare-and-set on Revision and the same lease rule, failing with a
	// *ConflictError), and also its Services: the store names the record
	// binds become those of rec.Services (for Names and MarkDue), the
	// names only the old Services bound no longer select it. An unknown id
	// is a conflict too: Rebind never creates.
	Rebind(ctx context.Context, member string, rec *Record) error
	// Delete removes the records; missing ids are not an error.
	Delete(ctx context.Context, ids ...string) error
	// Records calls fn with every stored record, in id order, until fn
	// returns false or an error occurs.
	Records(ctx context.Context, fn func(Record) bool) error
	// RecordsAfter calls fn with the records whose id sorts after after,
	// in id order, at most limit of them (limit must be positive), until
	// fn returns false or an error occurs. The engine's anti-entropy
	// review walks the records with it a slice per cycle.
	RecordsAfter(ctx context.Context, after string, limit int, fn func(Record) bool) error
	// RecordsBound calls fn with every record bound (as any candidate) to
	// any of names, in id order, until fn returns false or an error
	// occurs, finding them through an index from store name to records:
	// its cost follows the records returned, not the records stored.
	RecordsBound(ctx context.Context, names []string, fn func(Record) bool) error

	// Names returns the store names the member polls, sorted: every
	// candidate name bound by any record (in a shared state, the member's
	// share of them).
	Names(ctx context.Context, member string) ([]string, error)
	// MarkDue sets NextAttempt to at for every selected record whose
	// NextAttempt is zero or later than at, and with resetAttempts also
	// sets Attempts to 0. It returns how many records it changed.
	MarkDue(ctx context.Context, sel Selector, at time.Time, resetAttempts bool) (int, error)
	// Due returns up to limit records whose NextAttempt is not zero and
	// not after now, earliest first, and claims them for the member until
	// now+lease: their NextAttempt moves to now+lease, so another call
	// does not return them again before the member updates them (with
	// their real NextAttempt) or the lease runs out.
	Due(ctx context.Context, member string, now time.Time, lease time.Duration, limit int) ([]Record, error)

	// Observations returns the stored observation of each name that has
	// one; a nil names returns every stored observation (of every
	// member's names).
	Observations(ctx context.Context, names []string) (map[string]Observation, error)
	// PutObservations stores observations, replacing earlier ones of the
	// same names. In a shared state, the observations of names another
	// member polls now are not stored: the error then matches ErrConflict
	// and, as a *ConflictError, lists those names; the others are
	// stored.
	PutObservations(ctx context.Context, member string, obs ...Observation) error

	// PutWait stores (or replaces) a deployment's wait for secrets.
	PutWait(ctx context.Context, w Wait) error
	// Waits returns every stored wait, sorted by id.
	Waits(ctx context.Context) ([]Wait, error)
	// DeleteWait removes a wait; a missing id is not an error.
	DeleteWait(ctx context.Context, id string) error

	// NewEpoch returns a number above every number it returned before,
	// to any member, also across restarts of a durable state.
	NewEpoch(ctx context.Context) (uint64, error)

	// Close releases the state's resources.
	Close() error
}

// ConflictError lists the records an Update did not store. It matches
// ErrConflict.
type ConflictError struct {
	// IDs are the records not stored.
	IDs []string
}

// Error names the records not stored.
func (e *ConflictError) Error() string {
	return "delivery: conflict: " + joinIDs(e.IDs) + " changed since read or leased to another member"
}

// Is makes a *ConflictError match ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
