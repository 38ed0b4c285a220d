package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/storewatch"
)

// watchLoop runs a watcher cycle at once and then every Interval until ctx
// ends.
func (e *Engine) watchLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.Interval)
	defer t.Stop()
	for {
		e.cycle(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.cycleNow:
		}
	}
}

// cycleReport is what one watcher cycle learnt about the store.
type cycleReport struct {
	watched     int
	present     []string        // reported Appeared or Changed
	unavailable map[string]bool // not checked this cycle
	outage      bool
	storeErr    error
	forbidden   int   // checked and forbidden
	fine        int   // checked and present or missing: definite answers
	fineAlone   int   // of fine, answered when asked about alone, not only listed
	credErr     error // the store's credential check, when it has one
}

// healthy reports whether the cycle may confirm a revocation: the store's
// credential check passed (or it has none), at least one name got a
// definite answer, and, when names were refused, at least one name asked
// about alone was answered (a listing shows secrets the agbot may not
// read, so names only listed say nothing of its access).
func (c cycleReport) healthy() bool {
	if brokenCancelOnForbidden {
		return c.credErr == nil
	}
	return c.credErr == nil && c.fine > 0 && (c.forbidden == 0 || c.fineAlone > 0)
}

// credentials reports whether the cycle's problem is the agbot's own
// credentials or access, not the store's availability.
func (c cycleReport) credentials() bool {
	return c.credErr != nil || c.watched > 0 && c.fine == 0 && c.forbidden > 0 || c.forbidden > 0 && c.fineAlone == 0
}

// problem says why the store is not healthy, or what part of it failed.
func (c cycleReport) problem() string {
	switch {
	case c.credErr != nil && errors.Is(c.credErr, edgesecrets.ErrPermission):
		return "the store rejects the agbot's own credentials; nothing is cancelled until it accepts them: " + c.credErr.Error()
	case c.credErr != nil:
		return "the store's credential check failed; nothing is cancelled until it passes: " + c.credErr.Error()
	case c.outage:
		return "the store is unavailable: " + errText(c.storeErr)
	case c.watched > 0 && c.fine == 0 && c.forbidden > 0:
		return fmt.Sprintf("the store refuses the agbot every watched secret (%d): the agbot's own access, not a revocation; nothing is cancelled", c.forbidden)
	case c.forbidden > 0 && c.fineAlone == 0:
		return fmt.Sprintf("the store refuses the agbot every secret it asked about alone (%d), though its listing shows them: the agbot's own access, not a revocation; nothing is cancelled", c.forbidden)
	case len(c.unavailable) > 0:
		return fmt.Sprintf("the store did not answer for %d of %d secrets: %s", len(c.unavailable), c.watched, errText(c.storeErr))
	}
	return ""
}

func errText(err error) string {
	if err == nil {
		return "no answer"
	}
	return err.Error()
}

// cycle runs one watcher cycle: it brings the watched names in step with
// the state, checks the store's credentials, polls every name, records
// what changed, marks the agreements concerned due, tells waiting
// deployments their secrets exist, and reviews every agreement (counts,
// revocations, missed work).
func (e *Engine) cycle(ctx context.Context) {
	// The names the previous cycle saw absent, if it ended about an
	// interval ago: a cycle that stops early sees none.
	seenBefore := e.absentSeen
	e.absentSeen = nil
	if time.Since(e.cycleEnded) > e.continuity() {
		seenBefore = nil // not looking for too long: paused, or a slow cycle
	}
	defer func() { e.cycleEnded = time.Now() }()
	if !e.member.entitled() {
		e.owned.Store(nil) // whatever it polls once entitled again is new to it
		return             // the names this member polls are not its own now
	}
	waits, err := e.syncNames(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("could not read the names to watch from the state; retrying next cycle", slog.String("err", err.Error()))
		}
		return
	}
	asked := time.Now()
	c := e.watcher.Poll(ctx)
	if ctx.Err() != nil {
		return
	}
	// The cycle's time is when the store answered, not when the cycle
	// began: a cycle held up (by the state, a slow store, a paused
	// process) must not date an absence before the read that found it,
	// or the grace period ends early (found by the fault simulation,
	// seed 6 of two agbots).
	// An absence is confirmed as of when the store was asked, a read
	// answered late having been made any time after (found by the fault
	// simulation, seed 6199 of three agbots over Secrets Manager).
	now := time.Now()
	rep := e.applyCycle(c)
	e.inst.changes.Add(ctx, int64(len(c.Events)))
	e.setStoreProblem(rep)
	e.observe(ctx, asked, now, rep, seenBefore)
	e.redeploy(ctx, e.readyWaits(ctx, waits))
	e.scan(ctx, asked, now, rep.healthy(), rep.present)
	e.inst.cycle(rep, time.Since(now))
}

// syncNames makes the watcher watch exactly the names the state binds and
// the waits wait for, and returns the waits.
func (e *Engine) syncNames(ctx context.Context) ([]state.Wait, error) {
	names, err := e.state.Names(ctx, e.cfg.Member)
	if err != nil {
		e.owned.Store(nil) // its share may change meanwhile: all new to it then
		return nil, err
	}
	waits, err := e.state.Waits(ctx)
	if err != nil {
		return nil, err
	}
	if len(waits) == 0 && slices.Equal(names, e.synced) && e.owned.Load() != nil && e.member.joins.Load() == e.ownedJoins {
		return waits, nil // the watcher watches them already
	}
	e.synced = nil
	// A name that becomes this member's to poll is reported again by the
	// next cycle even if its watcher saw no change: what it saw before
	// was not its to record, and another member may have recorded
	// otherwise meanwhile (found by the fault simulation, seed 6215 of
	// three agbots over Secrets Manager). Retry ignores names not watched
	// yet; those get a first report anyway.
	was := e.polled()
	if joins := e.member.joins.Load(); joins != e.ownedJoins {
		was, e.ownedJoins = nil, joins // a new incarnation: its share is all new to it
	}
	owned := make(map[string]bool, len(names))
	var gained []string
	for _, n := range names {
		owned[n] = true
		if !was[n] {
			gained = append(gained, n)
		}
	}
	e.owned.Store(&owned)
	e.watcher.Retry(gained...)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, w := range waits {
		for _, n := range w.StoreNames {
			want[n] = true
		}
	}
	var add, drop []string
	for _, n := range e.watcher.Names() {
		if !want[n] {
			drop = append(drop, n)
		}
		delete(want, n)
	}
	for n := range want {
		add = append(add, n)
	}
	if err := e.watcher.Watch(add...); err != nil {
		return nil, err
	}
	e.watcher.Unwatch(drop...)
	for _, n := range drop {
		delete(e.absent, n)
		e.reader.Invalidate(n)
	}
	if len(waits) == 0 {
		e.synced = names
	}
	return waits, nil
}

// applyCycle updates the engine's view of the absent names from one
// watcher cycle and reports what it learnt.
func (e *Engine) applyCycle(c storewatch.Cycle) cycleReport {
	rep := cycleReport{
		watched: c.Watched, fine: c.Answered, fineAlone: c.AnsweredAlone, forbidden: c.Forbidden, credErr: c.Credentials,
		unavailable: map[string]bool{},
	}
	seen := map[string]bool{}
	for _, ev := range c.Events {
		switch ev.Kind {
		case storewatch.Appeared, storewatch.Changed:
			delete(e.absent, ev.Name)
			if !seen[ev.Name] {
				seen[ev.Name] = true
				rep.present = append(rep.present, ev.Name)
			}
		case storewatch.Deleted:
			e.absent[ev.Name] = state.Missing
		case storewatch.Forbidden:
			e.absent[ev.Name] = state.Forbidden
		case storewatch.Unavailable:
			for _, n := range ev.Names {
				rep.unavailable[n] = true
			}
			rep.outage = ev.Outage
			rep.storeErr = ev.Err
		}
	}
	return rep
}

// setStoreProblem records the cycle's store problem for Health, and logs
// it loudly when it starts or changes.
func (e *Engine) setStoreProblem(rep cycleReport) {
	problem := rep.problem()
	e.mu.Lock()
	was := e.health.StoreProblem
	e.health.StoreProblem = problem
	e.credProblem = problem != "" && rep.credentials()
	e.mu.Unlock()
	switch {
	case problem != "" && problem != was:
		e.log.Error("secret store problem", slog.String("problem", problem), slog.Bool("cancellations_allowed", rep.healthy()))
	case problem == "" && was != "":
		e.log.Info("secret store healthy again")
	}
}

// observe records the cycle's observations in the state: every name seen
// present with new content, and, in a healthy cycle only, every name found
// missing or forbidden (the first such cycle starts its grace period,
// later ones confirm it, if seenBefore, the previous cycle's absent
// names, has them or the record is recent). The agreements bound to names
// whose observation changed are marked due.
func (e *Engine) observe(ctx context.Context, asked, now time.Time, rep cycleReport, seenBefore map[string]bool) {
	healthy := rep.healthy()
	look := slices.Clone(rep.present)
	var absent []string
	if healthy {
		for _, n := range slices.Sorted(maps.Keys(e.absent)) {
			if !rep.unavailable[n] {
				absent = append(absent, n)
			}
		}
		look = append(look, absent...)
	}
	// What the next cycle needs to know, whatever becomes of this
	// cycle's records.
	if healthy {
		e.absentSeen = make(map[string]bool, len(absent))
		for _, n := range absent {
			e.absentSeen[n] = true
		}
	}
	if len(look) == 0 {
		return
	}
	stored, err := e.state.Observations(ctx, look)
	if err != nil {
		e.log.Error("could not read the stored observations; retrying next cycle", slog.String("err", err.Error()))
		e.watcher.Retry(rep.present...)
		return
	}
	put, due, back := e.observedPresent(rep.present, stored, now)
	put2, due2 := e.observedAbsent(absent, stored, asked, now, seenBefore)
	put, due = append(put, put2...), append(due, due2...)
	if len(put) > 0 {
		err := e.state.PutObservations(ctx, e.cfg.Member, put...)
		var ce *state.ConflictError
		switch {
		case errors.As(err, &ce):
			// A shared State moved some names to another member since
			// this cycle began: theirs are its to record. The rest are
			// stored.
			// This member may be theirs to poll by the next cycle (a
			// member left), with the content unchanged: the watcher
			// reports them again then.
			lost := map[string]bool{}
			for _, n := range ce.IDs {
				lost[n] = true
			}
			due = slices.DeleteFunc(due, func(n string) bool { return lost[n] })
			back = slices.DeleteFunc(back, func(n string) bool { return lost[n] })
			e.watcher.Retry(ce.IDs...)
			e.log.Debug("names polled by another member now; their observations are its to record", slog.Any("secrets", ce.IDs))
		case err != nil:
			e.log.Error("could not store the cycle's observations; retrying next cycle", slog.String("err", err.Error()))
			e.watcher.Retry(rep.present...)
			return
		}
	}
	for _, n := range back {
		e.log.Info("store secret is back", slog.String("secret", n))
	}
	if len(due) > 0 {
		n, err := e.state.MarkDue(ctx, state.Selector{StoreNames: due}, now, false)
		if err != nil {
			e.log.Error("could not mark the agreements of changed secrets due; the next cycle finds them", slog.String("err", err.Error()))
		}
		e.log.Debug("secrets changed", slog.Any("secrets", due), slog.Int("agreements", n))
		e.notify()
	}
	e.changedNow()
}

// observedPresent returns the observations of present names whose
// content differs from the stored one (put), the names whose agreements
// are due for it, and those of them that were missing or forbidden
// (back). It invalidates the reader's copy of each.
func (e *Engine) observedPresent(present []string, stored map[string]state.Observation, now time.Time) (put []state.Observation, due, back []string) {
	for _, n := range present {
		tag, ok := e.watcher.Observed(n)
		if !ok {
			continue
		}
		o, had := stored[n]
		if had && o.State == state.Present && o.Tag == tag {
			continue // as recorded (a restart, or a read already found it)
		}
		// Since is when this content was first observed: the start of
		// its convergence (edgesecrets.delivery.convergence.duration).
		fresh := state.Observation{Name: n, State: state.Present, Tag: tag, Since: now, CheckedAt: now}
		if had && o.State != state.Unknown && o.State != state.Present {
			back = append(back, n)
		}
		e.reader.Invalidate(n)
		put = append(put, fresh)
		due = append(due, n)
	}
	return put, due, back
}

// observedAbsent returns the observations of the names found missing or
// forbidden (put), their grace period going on from the stored sighting
// when it is continuous, and the names newly absent, whose agreements are
// due (they fall back to another candidate).
func (e *Engine) observedAbsent(absent []string, stored map[string]state.Observation, asked, now time.Time, seenBefore map[string]bool) (put []state.Observation, due []string) {
	for _, n := range absent {
		st := e.absent[n]
		o, had := stored[n]
		fresh := state.Observation{Name: n, State: st, Since: now, CheckedAt: asked}
		if had && (o.State == state.Missing || o.State == state.Forbidden) && (seenBefore[n] || now.Sub(o.CheckedAt) <= e.continuity()) {
			fresh.Since = o.Since // the grace period goes on
		} else {
			e.log.Warn("store secret missing or forbidden; its agreements fall back to the next candidate or are cancelled after the grace period",
				slog.String("secret", n), slog.String("state", st.String()), slog.Duration("grace", e.cfg.grace))
			e.reader.Invalidate(n)
			due = append(due, n)
		}
		put = append(put, fresh)
	}
	return put, due
}

// continuity is the longest time between the recorded sighting of a
// name missing or forbidden and a cycle seeing it so again for its grace
// period to go on when this engine's previous cycle did not see it (a
// restart, the name moved from another member): about one interval. After
// a longer gap (a store outage, the name unreadable, the state down, a
// paused process) the secret may have been written and deleted again
// unseen, so the grace period starts afresh (found by the fault
// simulation, seed 5341 of three agbots): never a cancellation sooner,
// at worst one grace period later.
func (e *Engine) continuity() time.Duration { return 2 * e.cfg.Interval }

// readyWaits calls OnReady for each waiting deployment one of whose
// secrets exists (or leaves it to redeploy, for a deployment Deploy
// remembers), and forgets it. It returns the ids of the waits still on.
func (e *Engine) readyWaits(ctx context.Context, waits []state.Wait) (waiting map[string]bool) {
	waiting = map[string]bool{}
	for _, w := range waits {
		ready := slices.ContainsFunc(w.StoreNames, func(n string) bool {
			_, ok := e.watcher.Observed(n)
			return ok
		})
		if !ready {
			waiting[w.ID] = true
			continue
		}
		e.log.Info("a secret a deployment waited for exists", slog.String("deployment", w.ID), slog.Any("secrets", w.StoreNames))
		if e.cfg.OnReady != nil && !e.remembers(w.ID) {
			e.cfg.OnReady(ctx, w.ID)
		}
		err := e.state.DeleteWait(ctx, w.ID)
		if err != nil {
			e.log.Error("could not forget a deployment's wait; its hook may be called again", slog.String("deployment", w.ID), slog.String("err", err.Error()))
		}
	}
	return waiting
}

// minReview is the fewest agreements the anti-entropy review looks at in
// a cycle: a small fleet is reviewed whole every cycle. firstReview is
// how many it looks at per cycle before its first pass completes, so that
// a restarted engine counts and repairs its fleet soon, holding a bounded
// slice in memory.
const (
	minReview   = 256
	firstReview = 10_000
)

// review is the anti-entropy cursor: where the review stands in its pass
// through the agreements and what the pass counted so far. The watcher
// cycle owns it.
type review struct {
	after   string            // the last id reviewed; "" at the start of a pass
	total   int               // agreements counted by the last complete pass; 0 before one
	counts  Health            // what this pass counted so far
	checked int               // agreements reviewed by this pass so far
	live    map[string]string // this slice's agreements and their LastError, for pruneReasons
	// claimed is where this member's last claim of a shared review
	// started; nil when it ended the pass (see reviewSlice).
	claimed *string
	// buf holds a slice's records, emptied after its cycle and reused by
	// the next: made afresh each cycle it was a tenth of what an idle
	// interval allocates on PostgreSQL (BENCHMARKS.md).
	buf []state.Record
}

// sliceSize is how many agreements one cycle reviews so that a pass takes
// about one ResyncPeriod: before the first pass completes, firstReview.
func (v *review) sliceSize(interval, resync time.Duration) int {
	if v.total == 0 {
		return firstReview
	}
	n := max(v.total, v.checked)
	return max(minReview, int((int64(n)*int64(interval)+int64(resync)-1)/int64(resync)))
}

// scan does a cycle's work on the agreements, in proportion to what
// changed and to the fleet over the resync period rather than to the
// fleet: it decides the cancellations of agreements bound to a name
// missing or forbidden for the grace period (all of them, or, beyond the
// budget, none: they are held) and releases held cancellations whose
// secrets are back, finding both through the state's name index; and it
// reviews the next slice of agreements (the anti-entropy cursor, a full
// pass every ResyncPeriod): it counts them for Health, marks due those
// whose agent lacks the observed content but that wait for nothing (work
// a crash or a lost mark left undone), decides or releases as above, and
// calls the cancel hook for decisions not yet notified.
func (e *Engine) scan(ctx context.Context, asked, now time.Time, healthy bool, back []string) {
	// The review's slice first: its records say which observations the
	// cycle needs.
	v := &e.review
	limit := v.sliceSize(e.cfg.Interval, e.cfg.resync)
	slice, from, toEnd, passEnd, err := e.reviewSlice(ctx, limit)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("could not review the agreements; retrying next cycle", slog.String("err", err.Error()))
		}
		return
	}
	defer func() { clear(slice); v.buf = slice[:0] }() // the records themselves go
	// The observations of the names the slice binds, of those this
	// engine finds absent (which may decide cancellations) and of those
	// back this cycle (which may release held ones): not every stored
	// one. In a shared State the names another member finds absent are
	// its to decide on; the slice's agreements bound to them are decided
	// here too.
	want := map[string]struct{}{}
	for _, n := range back {
		want[n] = struct{}{}
	}
	for n := range e.absent {
		want[n] = struct{}{}
	}
	for i := range slice {
		addNames(want, slice[i].Services)
	}
	obs, err := e.state.Observations(ctx, keysOf(want))
	if err != nil {
		return
	}
	c := &scanCycle{
		e: e, now: now, healthy: healthy, obs: obs, confirmed: e.confirmation(asked, now),
		unnotified: map[string]state.Cancellation{}, decided: map[string]state.Cancellation{}, seen: map[string]bool{},
	}
	if err := c.lookBound(ctx, back, want); err != nil {
		if ctx.Err() == nil {
			e.log.Error("could not review the agreements of revoked secrets; retrying next cycle", slog.String("err", err.Error()))
		}
		return
	}

	if v.live == nil {
		v.live = make(map[string]string, len(slice))
	}
	clear(v.live)
	last := ""
	for _, r := range slice {
		last = r.ID
		delete(c.seen, r.ID) // reviewed above as bound to a name: count it here
		c.look(r, true)
	}
	v.checked += len(slice)
	if passEnd {
		v.after = ""
	} else {
		v.after = last
	}
	e.pruneReasons(v.live, now, func(id string) bool { return id > from && (toEnd || id <= last) })

	c.markStale(ctx)
	c.release(ctx)
	heldNow := c.decide(ctx)
	e.notifyCancels(ctx, c.unnotified)
	e.endReview(passEnd, heldNow)
}

// scanCycle is what one scan read and what it decided on the agreements
// it looked at.
type scanCycle struct {
	e         *Engine
	now       time.Time
	healthy   bool // the cycle may decide cancellations
	obs       map[string]state.Observation
	confirmed func(state.Observation) bool

	stale      []string // agreements behind the store with nothing scheduled
	unheld     []string // held cancellations whose secrets are back
	unnotified map[string]state.Cancellation
	decided    map[string]state.Cancellation
	seen       map[string]bool
}

// look decides on one agreement; counting says whether it belongs to the
// review's slice.
func (c *scanCycle) look(r state.Record, counting bool) {
	e, now := c.e, c.now
	if c.seen[r.ID] {
		return
	}
	c.seen[r.ID] = true
	counts := &Health{}
	if counting {
		counts = &e.review.counts
		counts.Agreements++
		e.review.live[r.ID] = r.LastError
	}
	if r.Phase != state.PhaseActive {
		e.conds.set(r.ID, r.Node, e.conditionOf(&r, false, now))
		counts.Pending++
		if e.diverged(&r, now) {
			counts.Diverged++
		}
		if counting && r.Cancel != nil && !r.Cancel.Notified && r.Cancel.StoreName != "" {
			c.unnotified[r.ID] = *r.Cancel
		}
		return
	}
	ev := evaluate(&r, c.obs, now, c.confirmed)
	e.conds.set(r.ID, r.Node, e.conditionOf(&r, ev.inSync, now))
	if !ev.inSync {
		counts.Pending++
		if e.diverged(&r, now) {
			counts.Diverged++
		}
		if counting && r.NextAttempt.IsZero() {
			c.stale = append(c.stale, r.ID)
		}
	}
	switch {
	case r.Held != nil && ev.lost == nil:
		c.unheld = append(c.unheld, r.ID)
	case r.Held != nil:
		counts.Held++
	case c.healthy && ev.lost != nil && ev.lostConfirmed && ev.lostChecked.Sub(ev.lostSince) >= e.cfg.grace:
		c.decided[r.ID] = *ev.lost
	}
}

// lookBound looks at the agreements bound to the names that may decide
// something now: those gone for the grace period, and those back this
// cycle; want are the names whose observations c holds already.
func (c *scanCycle) lookBound(ctx context.Context, back []string, want map[string]struct{}) error {
	e := c.e
	hot := slices.Clone(back)
	for n, o := range c.obs {
		if (o.State == state.Missing || o.State == state.Forbidden) && o.CheckedAt.Sub(o.Since) >= e.cfg.grace {
			hot = append(hot, n)
		}
	}
	if len(hot) == 0 {
		return nil
	}
	slices.Sort(hot)
	var bound []state.Record
	if err := e.state.RecordsBound(ctx, hot, func(r state.Record) bool { bound = append(bound, r); return true }); err != nil {
		return err
	}
	// Their other names' observations too.
	more := map[string]struct{}{}
	for i := range bound {
		addNames(more, bound[i].Services)
	}
	for n := range more {
		if _, ok := want[n]; ok {
			delete(more, n)
		}
	}
	extra, err := e.state.Observations(ctx, keysOf(more))
	if err != nil {
		return err
	}
	maps.Copy(c.obs, extra)
	for _, r := range bound {
		c.look(r, false)
	}
	return nil
}

// markStale marks due the agreements behind the store with nothing
// scheduled.
func (c *scanCycle) markStale(ctx context.Context) {
	if len(c.stale) == 0 {
		return
	}
	e := c.e
	// A failure is noted for Health; the next pass finds them again.
	_, _ = e.state.MarkDue(ctx, state.Selector{IDs: c.stale}, c.now, false)
	e.log.Info("agreements behind the store with nothing scheduled; marked due", slog.Int("agreements", len(c.stale)))
	e.notify()
}

// release releases the held cancellations whose secrets are back.
func (c *scanCycle) release(ctx context.Context) {
	if len(c.unheld) == 0 {
		return
	}
	e, now := c.e, c.now
	slices.Sort(c.unheld)
	unheld := slices.Compact(c.unheld)
	n, _ := e.editIDs(ctx, unheld, func(r *state.Record) action {
		if r.Held == nil {
			return keep
		}
		r.Held = nil
		settle(r, now, now)
		return save
	})
	e.inst.cancellation(eventReleased, n)
	e.log.Info("held cancellations released: their secrets are back", slog.Int("agreements", n))
}

// decide records the cycle's cancellations, or holds them all when they
// are beyond the budget, and returns how many it held. Those recorded
// join unnotified, for the cancel hook.
func (c *scanCycle) decide(ctx context.Context) (heldNow int) {
	if len(c.decided) == 0 {
		return 0
	}
	e, v := c.e, &c.e.review
	total := max(v.total, v.counts.Agreements)
	allowed := max(e.cfg.budget.Count, int(e.cfg.budget.Percent*float64(total)/100))
	if len(c.decided) > allowed {
		n, err := e.hold(ctx, c.decided)
		e.log.Error("revocations beyond the cancellation budget: every cancellation of this cycle is held; release them with ReleaseHeld once checked",
			slog.Int("held", n), slog.Int("budget", allowed), slog.Int("agreements", total), slog.Any("err", err))
		return n
	}
	ids, err := e.cancel(ctx, c.decided, c.now)
	if err != nil {
		e.log.Error("could not record cancellations; retrying next cycle", slog.String("err", err.Error()))
	}
	for _, id := range ids {
		c.unnotified[id] = c.decided[id]
	}
	return 0
}

// endReview updates Health with the cancellations held now and, at the end
// of a pass, with the pass's counts, and starts the next pass's.
func (e *Engine) endReview(passEnd bool, heldNow int) {
	v := &e.review
	e.mu.Lock()
	if passEnd {
		// Held counted by the pass; those held now were active when
		// counted.
		c := v.counts
		e.health.Agreements, e.health.Pending, e.health.Diverged, e.health.Held = c.Agreements, c.Pending, c.Diverged, c.Held+heldNow
	} else {
		e.health.Held += heldNow
	}
	e.mu.Unlock()
	if passEnd {
		v.total = max(v.counts.Agreements, 1)
		v.counts, v.checked = Health{}, 0
		e.conds.passEnded()
	}
}

// hold marks the decided cancellations held, and returns how many.
func (e *Engine) hold(ctx context.Context, decided map[string]state.Cancellation) (int, error) {
	held := map[string]bool{}
	_, err := e.editIDs(ctx, slices.Sorted(maps.Keys(decided)), func(r *state.Record) action {
		if r.Phase != state.PhaseActive || r.Held != nil {
			return keep
		}
		c := decided[r.ID]
		r.Held = &c
		held[r.ID] = true
		return save
	})
	e.inst.cancellation(eventHeld, len(held))
	return len(held), err
}

// cancel turns active agreements into cancellations, and returns the ids
// it changed.
func (e *Engine) cancel(ctx context.Context, decided map[string]state.Cancellation, now time.Time) ([]string, error) {
	changed := map[string]bool{}
	_, err := e.editIDs(ctx, slices.Sorted(maps.Keys(decided)), func(r *state.Record) action {
		if r.Phase != state.PhaseActive {
			return keep
		}
		c := decided[r.ID]
		r.Phase, r.Cancel, r.Held = state.PhaseCancelling, &c, nil
		r.Attempts, r.NextAttempt = 0, now
		changed[r.ID] = true
		return save
	})
	ids := slices.Sorted(maps.Keys(changed))
	e.inst.cancellation(eventDecided, len(ids))
	for _, id := range ids {
		c := decided[id]
		e.log.Warn("agreement cancelled: its secret was revoked", slog.String("agreement", id), slog.String("reason", c.Reason))
	}
	if len(ids) > 0 {
		e.notify()
	}
	return ids, err
}

// notifyCancels calls the cancel hook for each decision and records that
// it returned, so that it is called once per decision (again only after a
// crash in between).
func (e *Engine) notifyCancels(ctx context.Context, cancels map[string]state.Cancellation) {
	if len(cancels) == 0 {
		return
	}
	ids := slices.Sorted(maps.Keys(cancels))
	if e.cfg.OnCancel != nil {
		for _, id := range ids {
			e.cfg.OnCancel(ctx, id, cancels[id])
		}
	}
	removable := false
	_, err := e.editIDs(ctx, ids, func(r *state.Record) action {
		c, ok := cancels[r.ID]
		if r.Cancel == nil || r.Cancel.Notified || !ok || !r.Cancel.DecidedAt.Equal(c.DecidedAt) {
			return keep
		}
		r.Cancel.Notified = true
		if r.Phase != state.PhaseActive && !agentToBeTold(r) {
			// Kept for the hook (prepare): removed now.
			r.NextAttempt = time.Now()
			removable = true
		}
		return save
	})
	if err != nil {
		e.log.Error("could not record that the cancel hook was called; it may be called again", slog.String("err", err.Error()))
	}
	if removable {
		e.notify()
	}
}

// notifyPending calls the cancel hook for every decided cancellation it
// has not returned for.
func (e *Engine) notifyPending(ctx context.Context) {
	pending := map[string]state.Cancellation{}
	err := e.state.Records(ctx, func(r state.Record) bool {
		if r.Cancel != nil && !r.Cancel.Notified && r.Cancel.StoreName != "" {
			pending[r.ID] = *r.Cancel
		}
		return true
	})
	if err != nil {
		// The cycles' reviews find them.
		e.log.Error("could not look for cancellations to notify", slog.String("err", err.Error()))
		return
	}
	e.notifyCancels(ctx, pending)
}

// addNames adds every candidate store name of services to set.
func addNames(set map[string]struct{}, services []binding.ServiceBinding) {
	for _, sb := range services {
		for _, b := range sb.Secrets {
			for _, n := range b.StoreNames {
				set[n] = struct{}{}
			}
		}
	}
}

// keysOf returns set's keys, never nil (a nil slice asks Observations for
// every name).
func keysOf(set map[string]struct{}) []string {
	return slices.AppendSeq(make([]string, 0, len(set)), maps.Keys(set))
}

// evaluation is an agreement as the observations show it.
type evaluation struct {
	// desired is each slot's content: the first candidate observed
	// present, or the stored Desired when the observations do not decide.
	desired []state.Content
	inSync  bool
	// lost is the cancellation a slot whose every candidate is observed
	// missing or forbidden would make (the one lost longest); lostSince is
	// when its last candidate went; lostChecked when the earliest of the
	// reads that confirm its candidates were asked; lostConfirmed that
	// those reads are recent enough to decide on.
	lost          *state.Cancellation
	lostSince     time.Time
	lostChecked   time.Time
	lostConfirmed bool
}

// confirmation returns the test of a missing or forbidden observation
// being confirmed by a healthy cycle recent enough to decide on now: for
// the names this engine polls, its cycle that asked the store at asked;
// for names another member of a shared State polls, one of its cycles
// within the last two intervals (only healthy cycles record an absence).
func (e *Engine) confirmation(asked, now time.Time) func(state.Observation) bool {
	var mine map[string]bool // read at the first absence: most cycles have none
	return func(o state.Observation) bool {
		if mine == nil {
			mine = e.polled()
		}
		if mine[o.Name] {
			return !o.CheckedAt.Before(asked.Truncate(statePrecision))
		}
		return now.Sub(o.CheckedAt) <= 2*e.cfg.Interval
	}
}

// statePrecision is the coarsest a State may keep times to (PostgreSQL's
// timestamps): a sighting this cycle recorded comes back up to that much
// earlier than the read that made it, and is still this cycle's (found by
// the fault simulation over PostgreSQL, seed 10 of two agbots: read back
// before asked, no absence this engine polled was ever confirmed, and a
// deleted secret stayed on its nodes).
const statePrecision = time.Microsecond

// polled returns the names this engine polls for the state: in a shared
// State, its share. Not every name its watcher watches: a name watched
// for a waiting deployment may be another member's, whose observations
// alone count (found by the fault simulation, seed 61 of three agbots:
// taken for this member's, an absence was never confirmed and the
// agreement never cancelled). The result is not to be changed.
func (e *Engine) polled() map[string]bool {
	if owned := e.owned.Load(); owned != nil {
		return *owned
	}
	return nil
}

// evaluate compares r with the observations at now; confirmed tells whether an
// absence was confirmed recently enough to decide on (for lostConfirmed).
func evaluate(r *state.Record, obs map[string]state.Observation, now time.Time, confirmed func(state.Observation) bool) evaluation {
	ev := evaluation{desired: make([]state.Content, len(r.Slots))}
	ev.inSync = r.Phase == state.PhaseActive && r.Proposed && r.InFlight == nil
	for i, s := range r.Slots {
		names := slotBinding(r, s).StoreNames
		d := s.Desired
		absent, allConfirmed := true, true
		var since time.Time
		var last state.Observation
		var states []string
		for _, n := range names {
			o := obs[n]
			if o.State == state.Present {
				d, absent = state.Content{StoreName: n, Tag: o.Tag}, false
				break
			}
			if o.State != state.Missing && o.State != state.Forbidden {
				absent = false // not observed: undecided
				break
			}
			if !o.Since.Before(since) {
				since, last = o.Since, o
			}
			if !confirmed(o) {
				allConfirmed = false
			}
			states = append(states, fmt.Sprintf("%q %s", n, o.State))
		}
		ev.desired[i] = d
		if d.IsZero() || d != s.Acked {
			ev.inSync = false
		}
		if absent && (ev.lost == nil || since.Before(ev.lostSince)) {
			kind := state.Missing
			if last.State == state.Forbidden {
				kind = state.Forbidden
			}
			ev.lost = &state.Cancellation{
				Reason: fmt.Sprintf("secret %q of service %s: store secret %s since %s",
					s.Name, r.Services[s.Service].Service, strings.Join(states, ", "), since.UTC().Format(time.RFC3339)),
				StoreName: last.Name,
				Kind:      kind,
				DecidedAt: now,
			}
			ev.lostSince, ev.lostChecked, ev.lostConfirmed = since, earliestCheck(names, obs), allConfirmed
		}
	}
	return ev
}

// earliestCheck returns when the earliest of the reads that last
// confirmed the names' observations was asked.
func earliestCheck(names []string, obs map[string]state.Observation) time.Time {
	var at time.Time
	for _, n := range names {
		if c := obs[n].CheckedAt; at.IsZero() || c.Before(at) {
			at = c
		}
	}
	return at
}

// diverged reports whether r's agent has left a message unanswered for
// longer than DivergedAfter.
func (e *Engine) diverged(r *state.Record, now time.Time) bool {
	return !r.Unanswered.IsZero() && now.Sub(r.Unanswered) > e.cfg.DivergedAfter
}
