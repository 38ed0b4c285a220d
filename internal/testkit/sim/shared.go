package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// SharedState is a state.Backend in memory that several agbots share,
// with membership (state.Membership) and claims judged by its own clock
// (time.Now: the bubble's under testing/synctest), following pgstate's
// rules (pgstate/schema.go: member_live, claim_valid, may_write,
// name_owner, fence) so that the simulation runs several agbots without a
// database. The records, names, observations, waits and epochs are
// state.NewMemory's; SharedState adds the members and the claims.
//
// Each agbot process opens its own handle (Open), as each opens its own
// pgstate: a handle knows the incarnations its members joined under and
// fences their calls with them. Claims are kept as every grant Due made,
// not one per record, so that ClaimViolations can see two members holding
// a valid claim at once, which the rules forbid and the broken variant
// no-lease-check allows.
type SharedState struct {
	inner  state.Backend
	period time.Duration

	mu      sync.Mutex
	members map[string]memberRow
	nextInc uint64
	claims  map[string][]claim // by record id: the grants not released
	// overlaps are the claims Due granted while another member held a
	// valid claim on the record, for ClaimViolations.
	overlaps []string
}

type memberRow struct {
	inc     uint64
	expires time.Time
}

// claim is one grant of Due: member claimed the record until until.
type claim struct {
	member string
	until  time.Time
}

// NewSharedState returns an empty shared state whose members stay live
// for period after each heartbeat.
func NewSharedState(period time.Duration) *SharedState {
	return &SharedState{inner: state.NewMemory(), period: period,
		members: map[string]memberRow{}, claims: map[string][]claim{}}
}

// Open returns a new handle, one agbot process's connection.
func (s *SharedState) Open() *SharedHandle {
	return &SharedHandle{core: s, incarnations: map[string]uint64{}}
}

// Records calls fn with every record, unfenced (for the invariants).
func (s *SharedState) Records(ctx context.Context, fn func(state.Record) bool) error {
	return s.inner.Records(ctx, fn)
}

// ClaimViolations returns a sentence for each claim granted while another
// member held a valid claim on the record, since the last call, and for
// each record on which more than one member holds a valid claim now.
func (s *SharedState) ClaimViolations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := s.overlaps
	s.overlaps = nil
	for _, id := range slices.Sorted(maps.Keys(s.claims)) {
		var holders []string
		for _, c := range s.claims[id] {
			if s.valid(c, now) && !slices.Contains(holders, c.member) {
				holders = append(holders, c.member)
			}
		}
		if len(holders) > 1 {
			out = append(out, fmt.Sprintf("agreement %s claimed by %s at once", id, strings.Join(holders, " and ")))
		}
	}
	return out
}

// live reports whether member is live in incarnation inc; s.mu held.
func (s *SharedState) live(member string, inc uint64, now time.Time) bool {
	row, ok := s.members[member]
	return ok && row.inc == inc && row.expires.After(now)
}

// valid is claim_valid: not expired, and its holder not a member whose
// membership lapsed or ended; s.mu held.
func (s *SharedState) valid(c claim, now time.Time) bool {
	if !c.until.After(now) {
		return false
	}
	row, ok := s.members[c.member]
	return !ok || row.expires.After(now)
}

// mayWrite is may_write: nobody but member holds a valid claim on id, and
// member does not write under a claim of its own that lapsed; s.mu held.
func (s *SharedState) mayWrite(id, member string, now time.Time) bool {
	if brokenNoLeaseCheck {
		return true
	}
	for _, c := range s.claims[id] {
		if (c.member == member) != s.valid(c, now) {
			return false
		}
	}
	return true
}

// owner is name_owner: the live member with the highest rendezvous hash
// of (member, name); s.mu held.
func (s *SharedState) owner(name string, now time.Time) string {
	var best string
	var bestHash uint64
	for _, m := range slices.Sorted(maps.Keys(s.members)) {
		if !s.members[m].expires.After(now) {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(m))
		h.Write([]byte{0})
		h.Write([]byte(name))
		if v := h.Sum64(); best == "" || v > bestHash {
			best, bestHash = m, v
		}
	}
	return best
}

// SharedHandle is one agbot's connection to a SharedState: a
// state.Backend and state.Membership.
type SharedHandle struct {
	core *SharedState

	mu           sync.Mutex
	incarnations map[string]uint64
	closed       bool
}

var (
	_ state.Backend    = (*SharedHandle)(nil)
	_ state.Membership = (*SharedHandle)(nil)
)

// errNotLive is the lease-lost error of a fenced call.
func errNotLive(what, member string) error {
	return fmt.Errorf("sim: %s: member %q is not live: %w", what, member, state.ErrLeaseLost)
}

func (h *SharedHandle) incarnation(member string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.incarnations[member]
}

// fence fails unless member, when it joined through h, is live in that
// incarnation; joined requires that it did. s.mu held.
func (h *SharedHandle) fence(what, member string, joined bool, now time.Time) error {
	inc := h.incarnation(member)
	if inc == 0 && !joined {
		return nil
	}
	if inc == 0 || !h.core.live(member, inc, now) {
		return errNotLive(what, member)
	}
	return nil
}

// Join implements state.Membership.
func (h *SharedHandle) Join(ctx context.Context, member string) (state.MemberLease, error) {
	if err := h.check(ctx); err != nil {
		return state.MemberLease{}, err
	}
	if member == "" {
		return state.MemberLease{}, errors.New("sim: Join: the member id is empty")
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.nextInc++
	s.members[member] = memberRow{inc: s.nextInc, expires: now.Add(s.period)}
	h.mu.Lock()
	h.incarnations[member] = s.nextInc
	h.mu.Unlock()
	return state.MemberLease{Member: member, Incarnation: s.nextInc, Period: s.period, Until: now.Add(s.period)}, nil
}

// Heartbeat implements state.Membership: a lapsed lease is not renewed.
func (h *SharedHandle) Heartbeat(ctx context.Context, member string) (state.MemberLease, error) {
	if err := h.check(ctx); err != nil {
		return state.MemberLease{}, err
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	inc := h.incarnation(member)
	if inc == 0 || !s.live(member, inc, now) {
		return state.MemberLease{}, errNotLive("heartbeat", member)
	}
	s.members[member] = memberRow{inc: inc, expires: now.Add(s.period)}
	return state.MemberLease{Member: member, Incarnation: inc, Period: s.period, Until: now.Add(s.period)}, nil
}

// Leave implements state.Membership: the membership expires now, and
// its claims with it.
func (h *SharedHandle) Leave(ctx context.Context, member string) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	inc := h.incarnation(member)
	if inc == 0 {
		return nil
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	if row, ok := s.members[member]; ok && row.inc == inc {
		s.members[member] = memberRow{inc: inc, expires: time.Now()}
	}
	h.mu.Lock()
	if h.incarnations[member] == inc {
		delete(h.incarnations, member)
	}
	h.mu.Unlock()
	return nil
}

// Create implements state.Backend.
func (h *SharedHandle) Create(ctx context.Context, rec *state.Record) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	return h.core.inner.Create(ctx, rec)
}

// Get implements state.Backend.
func (h *SharedHandle) Get(ctx context.Context, id string) (state.Record, error) {
	if err := h.check(ctx); err != nil {
		return state.Record{}, err
	}
	return h.core.inner.Get(ctx, id)
}

// Update implements state.Backend: fenced, and each record stored only
// when may_write allows member; storing it releases its claims.
func (h *SharedHandle) Update(ctx context.Context, member string, recs ...*state.Record) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if err := h.fence("updating records", member, false, now); err != nil {
		return err
	}
	var conflicts []string
	for _, rec := range recs {
		if !s.mayWrite(rec.ID, member, now) {
			conflicts = append(conflicts, rec.ID)
			continue
		}
		if err := s.inner.Update(ctx, member, rec); err != nil {
			var ce *state.ConflictError
			if !errors.As(err, &ce) {
				return err
			}
			conflicts = append(conflicts, rec.ID)
			continue
		}
		delete(s.claims, rec.ID)
	}
	if len(conflicts) > 0 {
		return &state.ConflictError{IDs: conflicts}
	}
	return nil
}

// Rebind implements state.Backend, under Update's rules.
func (h *SharedHandle) Rebind(ctx context.Context, member string, rec *state.Record) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if err := h.fence("rebinding a record", member, false, now); err != nil {
		return err
	}
	if !s.mayWrite(rec.ID, member, now) {
		return &state.ConflictError{IDs: []string{rec.ID}}
	}
	if err := s.inner.Rebind(ctx, member, rec); err != nil {
		return err
	}
	delete(s.claims, rec.ID)
	return nil
}

// Delete implements state.Backend.
func (h *SharedHandle) Delete(ctx context.Context, ids ...string) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.inner.Delete(ctx, ids...); err != nil {
		return err
	}
	for _, id := range ids {
		delete(s.claims, id)
	}
	return nil
}

// Records implements state.Backend.
func (h *SharedHandle) Records(ctx context.Context, fn func(state.Record) bool) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	return h.core.inner.Records(ctx, fn)
}

// RecordsAfter implements state.Backend.
func (h *SharedHandle) RecordsAfter(ctx context.Context, after string, limit int, fn func(state.Record) bool) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	return h.core.inner.RecordsAfter(ctx, after, limit, fn)
}

// RecordsBound implements state.Backend.
func (h *SharedHandle) RecordsBound(ctx context.Context, names []string, fn func(state.Record) bool) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	return h.core.inner.RecordsBound(ctx, names, fn)
}

// Names implements state.Backend: the bound names whose owner among the
// live members is member, which must have joined through h and be live.
func (h *SharedHandle) Names(ctx context.Context, member string) ([]string, error) {
	if err := h.check(ctx); err != nil {
		return nil, err
	}
	all, err := h.core.inner.Names(ctx, member)
	if err != nil {
		return nil, err
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if err := h.fence("listing the names to poll", member, true, now); err != nil {
		return nil, err
	}
	var out []string
	for _, n := range all {
		if s.owner(n, now) == member {
			out = append(out, n)
		}
	}
	return out, nil
}

// MarkDue implements state.Backend.
func (h *SharedHandle) MarkDue(ctx context.Context, sel state.Selector, at time.Time, reset bool) (int, error) {
	if err := h.check(ctx); err != nil {
		return 0, err
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inner.MarkDue(ctx, sel, at, reset)
}

// Due implements state.Backend: fenced; it claims for member the records
// due by now, or whose claims are all void, that no other member holds a
// valid claim on, until now+lease.
func (h *SharedHandle) Due(ctx context.Context, member string, now time.Time, lease time.Duration, limit int) ([]state.Record, error) {
	if err := h.check(ctx); err != nil {
		return nil, err
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	clock := time.Now()
	if err := h.fence("claiming due records", member, false, clock); err != nil {
		return nil, err
	}
	var candidates []state.Record
	err := s.inner.Records(ctx, func(r state.Record) bool {
		if r.NextAttempt.IsZero() {
			return true
		}
		void, other := false, false
		for _, c := range s.claims[r.ID] {
			switch {
			case !s.valid(c, clock):
				void = true
			case c.member != member:
				other = true
			}
		}
		if brokenNoLeaseCheck {
			other = false
		}
		if (!r.NextAttempt.After(now) || void) && !other {
			candidates = append(candidates, r)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(candidates, func(a, b state.Record) int {
		return cmp.Or(a.NextAttempt.Compare(b.NextAttempt), strings.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(candidates) > limit {
		candidates = candidates[:limit]
	}
	out := candidates[:0]
	for _, r := range candidates {
		r.NextAttempt = now.Add(lease)
		if err := s.inner.Update(ctx, member, &r); err != nil {
			continue // changed meanwhile: not claimed
		}
		grants := slices.DeleteFunc(s.claims[r.ID], func(c claim) bool { return c.member == member || !s.valid(c, clock) })
		for _, c := range grants {
			s.overlaps = append(s.overlaps, fmt.Sprintf("agreement %s claimed by %s while %s held a valid claim until %s",
				r.ID, member, c.member, c.until.UTC().Format("15:04:05.000")))
		}
		s.claims[r.ID] = append(grants, claim{member: member, until: clock.Add(lease)})
		out = append(out, r)
	}
	return out, nil
}

// Observations implements state.Backend.
func (h *SharedHandle) Observations(ctx context.Context, names []string) (map[string]state.Observation, error) {
	if err := h.check(ctx); err != nil {
		return nil, err
	}
	return h.core.inner.Observations(ctx, names)
}

// PutObservations implements state.Backend: member, which must have
// joined through h and be live, stores the observations of the names it
// polls and of names no record binds; the others are refused.
func (h *SharedHandle) PutObservations(ctx context.Context, member string, obs ...state.Observation) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	if len(obs) == 0 {
		return ctx.Err()
	}
	bound, err := h.core.inner.Names(ctx, member)
	if err != nil {
		return err
	}
	s := h.core
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if err := h.fence("storing observations", member, true, now); err != nil {
		return err
	}
	var keep []state.Observation
	var refused []string
	for _, o := range obs {
		if _, found := slices.BinarySearch(bound, o.Name); found && s.owner(o.Name, now) != member {
			refused = append(refused, o.Name)
			continue
		}
		keep = append(keep, o)
	}
	if err := s.inner.PutObservations(ctx, member, keep...); err != nil {
		return err
	}
	if len(refused) > 0 {
		return &state.ConflictError{IDs: refused}
	}
	return nil
}

// PutWait implements state.Backend.
func (h *SharedHandle) PutWait(ctx context.Context, w state.Wait) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	return h.core.inner.PutWait(ctx, w)
}

// Waits implements state.Backend.
func (h *SharedHandle) Waits(ctx context.Context) ([]state.Wait, error) {
	if err := h.check(ctx); err != nil {
		return nil, err
	}
	return h.core.inner.Waits(ctx)
}

// DeleteWait implements state.Backend.
func (h *SharedHandle) DeleteWait(ctx context.Context, id string) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	return h.core.inner.DeleteWait(ctx, id)
}

// NewEpoch implements state.Backend.
func (h *SharedHandle) NewEpoch(ctx context.Context) (uint64, error) {
	if err := h.check(ctx); err != nil {
		return 0, err
	}
	return h.core.inner.NewEpoch(ctx)
}

// Close implements state.Backend: the handle's later calls fail with
// state.ErrStateUnavailable, and its members stay until their leases
// run out (a process that died); the shared storage stays.
func (h *SharedHandle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return nil
}

// check fails a call made after Close or with ctx ended.
func (h *SharedHandle) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("sim: the shared state's handle is closed: %w", state.ErrStateUnavailable)
	}
	return nil
}
