// What a Backend that several agbots share implements besides Backend.
// The engine finds these interfaces with a type assertion on the Backend it
// is given (so a single-agbot Backend implements neither), and a shared
// Backend that lacks Membership would let members deliver one record
// twice: a shared state implements Membership; SharedReview is optional.

package state

import (
	"context"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/errkind"
)

// ErrLeaseLost: the member can no longer prove its membership of a shared
// Backend (its heartbeat lapsed, it left, or another process joined under
// its id). Every lease it held is void; it must stop delivering and Join
// again. It refines edgesecrets.ErrConflict.
var ErrLeaseLost = errkind.New("delivery: membership lease lost", edgesecrets.ErrConflict)

// Membership is implemented by a Backend that several engines share
// (delivery/pgstate); the engine finds it with a type assertion on the
// Backend it is given. The names a member polls (Schedule.Names) and the
// observations it may store are its share among the live members, so an
// engine that finds this interface on its Backend must:
//   - Join before its first call that names the member;
//   - Heartbeat well within MemberLease.Period (a third of it), and treat
//     an error, or MemberLease.Until passing without a renewal, as the end
//     of every lease it holds: send nothing more (a message already
//     sealed is dropped) until a Join succeeds;
//   - on ErrLeaseLost, Join again (a new incarnation: claims of the old one
//     are void);
//   - Leave when it stops, so that its share passes to the others at once.
//
// A member that stops heartbeating loses its records and names to the
// others one Period after its last heartbeat, judged by the Backend's clock.
type Membership interface {
	// Join makes member live with a new incarnation, replacing an earlier
	// one of the same id (a restarted agbot), whose leases become void.
	Join(ctx context.Context, member string) (MemberLease, error)
	// Heartbeat renews member's lease. It fails with ErrLeaseLost when the
	// incarnation this Backend joined is no longer the live one.
	Heartbeat(ctx context.Context, member string) (MemberLease, error)
	// Leave ends member's membership and releases its claims at once.
	Leave(ctx context.Context, member string) error
}

// MemberLease is a member's proof of membership.
type MemberLease struct {
	// Member is the member id.
	Member string
	// Incarnation identifies this Join of the member: claims made under
	// an earlier incarnation are void.
	Incarnation uint64
	// Period is how long a heartbeat keeps the member live.
	Period time.Duration
	// Until is, on the caller's clock (with its monotonic reading), the
	// latest time the member is certainly still live: the time the
	// renewal was sent plus Period. The Backend's own deadline is later.
	Until time.Time
}

// SharedReview is implemented by a Backend that several engines share
// (delivery/pgstate), found by the engine with a type assertion as
// Membership is, to split the anti-entropy review among its members:
// the pass through the agreements is one for all of them, and each cycle a
// member claims the next range of it, so that the agreements are reviewed
// once per ResyncPeriod in total rather than once per member. An engine
// whose Backend lacks it reviews every agreement itself.
type SharedReview interface {
	// ReviewNext claims for member the next range of the shared pass, of
	// at most limit records (limit must be positive), and calls fn with
	// each record of the range, in id order, until fn returns false: the
	// records whose id sorts after from, up to and including through. An
	// empty through means to the last record: the claim ends the pass,
	// and the next claim starts it again from the first record. Ranges
	// claimed by concurrent calls do not overlap. fn is not called when
	// the claim fails. Unlike the Records methods', the records fn gets
	// may share their Services with one another and with the Backend:
	// fn reads them and does not change them (the review only reads).
	ReviewNext(ctx context.Context, member string, limit int, fn func(Record) bool) (from, through string, err error)
}
