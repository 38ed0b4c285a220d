package state

import (
	"context"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/errkind"
)

// Errors a Backend returns, matched with errors.Is. Each also matches the
// module-wide kind it refines (edgesecrets.ErrNotFound, ErrConflict,
// ErrUnavailable), but a store's error never matches them: an engine tells
// its state's trouble from its store's. Their texts keep the "delivery:"
// prefix they had before the contract had a package of its own, as logs
// and alerts may match it.
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

// Backend is the engine's durable memory: agreements with their desired
// and acknowledged content tags and pending work, observations of store
// secrets, deployments waiting for secrets, and sequence epochs. No secret
// value is ever given to it. It is the four concerns below, each an
// interface of its own so that a reader (and a test double) can name the
// part it needs, and Close.
//
// Implementations: NewMemory (tests), the embedded single-file state
// (delivery/boltstate) and PostgreSQL for several agbots
// (delivery/pgstate). Every implementation passes state/statetest. All
// methods are safe for concurrent use; records go in and out by value
// (deep copies; SharedReview.ReviewNext's may share their Services).
//
// A Backend may be shared by several engines (members, named by a member
// id): then Due leases the records it returns to the calling member, and
// Update of a record leased to another member fails with ErrConflict. A
// Backend for one engine may ignore member ids. A shared one also
// implements Membership and, optionally, SharedReview.
type Backend interface {
	Records
	Schedule
	Observations
	Waits
	Epochs

	// Close releases the state's resources.
	Close() error
}

// Records are the agreements' records, compare-and-set on their
// Revision.
type Records interface {
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
}

// Schedule is the due queue: the store names the members poll and the
// records whose NextAttempt has come.
type Schedule interface {
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
}

// Observations are what the engine last learnt of each store secret.
type Observations interface {
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
}

// Waits are the deployments waiting for store secrets to exist.
type Waits interface {
	// PutWait stores (or replaces) a deployment's wait for secrets.
	PutWait(ctx context.Context, w Wait) error
	// Waits returns every stored wait, sorted by id.
	Waits(ctx context.Context) ([]Wait, error)
	// DeleteWait removes a wait; a missing id is not an error.
	DeleteWait(ctx context.Context, id string) error
}

// Epochs hand out the sequence epochs of Record.Epoch.
type Epochs interface {
	// NewEpoch returns a number above every number it returned before,
	// to any member, also across restarts of a durable state.
	NewEpoch(ctx context.Context) (uint64, error)
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
