package delivery

import (
	"context"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/errkind"
)

// ErrLeaseLost: the member can no longer prove its membership of a shared
// State (its heartbeat lapsed, it left, or another process joined under
// its id). Every lease it held is void; it must stop delivering and Join
// again. It refines edgesecrets.ErrConflict.
var ErrLeaseLost = errkind.New("delivery: membership lease lost", edgesecrets.ErrConflict)

// Membership is implemented by a State that several engines share
// (delivery/pgstate). The names a member polls (State.Names) and the
// observations it may store are its share among the live members, so an
// engine that finds this interface on its State must:
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
// others one Period after its last heartbeat, judged by the State's clock.
type Membership interface {
	// Join makes member live with a new incarnation, replacing an earlier
	// one of the same id (a restarted agbot), whose leases become void.
	Join(ctx context.Context, member string) (MemberLease, error)
	// Heartbeat renews member's lease. It fails with ErrLeaseLost when the
	// incarnation this State joined is no longer the live one.
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
	// renewal was sent plus Period. The State's own deadline is later.
	Until time.Time
}
