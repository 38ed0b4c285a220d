package delivery

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// Condition is where an agreement stands, from a small closed set: the
// "condition" attribute of the edgesecrets.delivery.agreements gauge and
// the filter of Engine.Agreements.
type Condition string

// Conditions, in the order an operator reads them: the first that applies
// is the agreement's.
const (
	// ConditionCancellationHeld: a cancellation decided but held by the
	// budget (Engine.ReleaseHeld).
	ConditionCancellationHeld Condition = "cancellation_held"
	// ConditionWaiting: the engine cannot deliver it now; Listed.Reason
	// says why.
	ConditionWaiting Condition = "waiting"
	// ConditionDiverged: its agent has left a message unanswered for
	// longer than Options.DivergedAfter.
	ConditionDiverged Condition = "diverged"
	// ConditionInFlight: a message was sent and not answered yet.
	ConditionInFlight Condition = "in_flight"
	// ConditionDue: behind the store, to be sent (or a cancellation to be
	// sent).
	ConditionDue Condition = "due"
	// ConditionInSync: its agent acknowledged the content of every secret.
	ConditionInSync Condition = "in_sync"
)

// conditionOrder lists the conditions in the order they are reported.
var conditionOrder = []Condition{ConditionCancellationHeld, ConditionWaiting, ConditionDiverged, ConditionInFlight, ConditionDue, ConditionInSync}

// condKey is an agreement's condition with its reason code (waiting only).
type condKey struct {
	c      Condition
	reason ReasonCode
}

// attrs returns the gauge's attribute set of k.
func (k condKey) attrs() metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("condition", string(k.c)), attribute.String("reason", string(k.reason))))
}

// conditions is the engine's view of the agreements' conditions, updated
// as the engine works on each (reconcile, replies, edits, the review), so
// that counting and listing them never walks the state. It holds the
// agreements this engine worked on or reviewed since it started: all of
// them after one full review pass (Options.ResyncPeriod).
type conditions struct {
	mu   sync.Mutex
	of   map[string]condEntry
	by   map[condKey]map[string]struct{}
	pass uint64 // the review pass under way; entries not seen by the last full one are gone
}

type condEntry struct {
	key  condKey
	node string
	pass uint64
}

func newConditions() *conditions {
	c := &conditions{of: map[string]condEntry{}, by: map[condKey]map[string]struct{}{}}
	for _, cond := range conditionOrder {
		if cond != ConditionWaiting {
			c.by[condKey{c: cond}] = map[string]struct{}{}
		}
	}
	return c
}

// set records agreement id's condition.
func (c *conditions) set(id, node string, k condKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.of[id]
	if had && old.key != k {
		delete(c.by[old.key], id)
	}
	set := c.by[k]
	if set == nil {
		set = map[string]struct{}{}
		c.by[k] = set
	}
	set[id] = struct{}{}
	c.of[id] = condEntry{key: k, node: node, pass: c.pass}
}

// drop forgets agreement id (ended, removed).
func (c *conditions) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, had := c.of[id]; had {
		delete(c.by[old.key], id)
		delete(c.of, id)
	}
}

// passEnded forgets the agreements that neither the review pass that just
// ended nor any work since it began saw: removed by another member of a
// shared State, or behind the engine's back. Once per pass.
func (c *conditions) passEnded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, ent := range c.of {
		if ent.pass < c.pass {
			delete(c.by[ent.key], id)
			delete(c.of, id)
		}
	}
	c.pass++
}

// counts returns the number of agreements per condition and reason; the
// conditions (and reasons) seen once stay, at zero.
func (c *conditions) counts() map[condKey]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[condKey]int64, len(c.by))
	for k, set := range c.by {
		out[k] = int64(len(set))
	}
	return out
}

// conditionOf works out r's condition from the record and what this engine
// found reconciling it; inSync says whether its agent holds what the store
// holds now (inSync(r) when the observations are not at hand).
func (e *Engine) conditionOf(r *state.Record, inSync bool, now time.Time) condKey {
	switch {
	case r.Held != nil:
		return condKey{c: ConditionCancellationHeld}
	}
	if rs := e.reasonOf(r); rs != nil {
		return condKey{c: ConditionWaiting, reason: rs.Code}
	}
	switch {
	case e.diverged(r, now):
		return condKey{c: ConditionDiverged}
	case r.InFlight != nil:
		return condKey{c: ConditionInFlight}
	case !inSync:
		return condKey{c: ConditionDue}
	}
	return condKey{c: ConditionInSync}
}

// track records r's condition as the engine left it.
func (e *Engine) track(r *state.Record, now time.Time) {
	e.conds.set(r.ID, r.Node, e.conditionOf(r, inSync(r), now))
}

// ListOptions selects a page of Engine.Agreements.
type ListOptions struct {
	// Condition keeps only the agreements in this condition; empty: every
	// condition but ConditionInSync.
	Condition Condition
	// Reason keeps only the agreements waiting for this reason (it implies
	// ConditionWaiting).
	Reason ReasonCode
	// After is the ID of the last agreement of the previous page (Page.Next);
	// empty for the first page.
	After string
	// Limit is the page's size: default 100, at most 1000.
	Limit int
}

// reasonCodes are every ReasonCode.
var reasonCodes = []ReasonCode{ReasonAgentUnverified, ReasonFormatUnrenderable, ReasonSecretAbsent, ReasonStoreUnavailable,
	ReasonObservationBehind, ReasonSealFailed, ReasonAgentRejected, ReasonTemplateFailed, ReasonAgentUnreachable, ReasonStoreCredentials,
	ReasonStateUnavailable, ReasonDiverged, ReasonCancellationHeld}

// Check reports options naming an unknown condition or reason code, or a
// reason with a condition other than ConditionWaiting, as an error
// matching edgesecrets.ErrInvalid.
func (o ListOptions) Check() error {
	var problems []string
	if o.Condition != "" && !slices.Contains(conditionOrder, o.Condition) {
		problems = append(problems, fmt.Sprintf("unknown condition %.40q (want one of %v)", o.Condition, conditionOrder))
	}
	if o.Reason != "" && !slices.Contains(reasonCodes, o.Reason) {
		problems = append(problems, fmt.Sprintf("unknown reason %.40q (want one of %v)", o.Reason, reasonCodes))
	}
	if o.Reason != "" && o.Condition != "" && o.Condition != ConditionWaiting {
		problems = append(problems, fmt.Sprintf("reason %q with condition %q: a reason is for agreements waiting", o.Reason, o.Condition))
	}
	if len(problems) > 0 {
		return fmt.Errorf("delivery: list agreements: %w: %s", edgesecrets.ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

// Listed is one agreement of a Page.
type Listed struct {
	ID        string
	Node      string
	Condition Condition
	// Reason is why it waits (ConditionWaiting, with the message), or
	// ReasonDiverged or ReasonCancellationHeld (the code alone); nil
	// otherwise.
	Reason *Reason
}

// Page is a page of agreements, in ID order.
type Page struct {
	Agreements []Listed
	// Next is the After of the next page; empty on the last.
	Next string
}

// Agreements lists the agreements this engine knows in a condition, by
// default every one not in sync, with why each waits: a page at a time,
// in ID order. It reads the engine's own record of conditions, kept as it
// works on each agreement, never the whole state: the cost follows the
// agreements in the conditions asked for. In a shared State an engine
// knows the agreements it worked on and those its review saw (all of them
// once a review pass completes, Options.ResyncPeriod).
func (e *Engine) Agreements(_ context.Context, opts ListOptions) Page {
	limit := opts.Limit
	switch {
	case limit <= 0:
		limit = 100
	case limit > 1000:
		limit = 1000
	}
	// The conditions that have a reason code of their own.
	switch opts.Reason {
	case ReasonDiverged:
		opts.Condition, opts.Reason = ConditionDiverged, ""
	case ReasonCancellationHeld:
		opts.Condition, opts.Reason = ConditionCancellationHeld, ""
	}
	c := e.conds
	c.mu.Lock()
	var ids []string
	for k, set := range c.by {
		switch {
		case opts.Reason != "" && (k.c != ConditionWaiting || k.reason != opts.Reason):
			continue
		case opts.Condition != "" && k.c != opts.Condition:
			continue
		case opts.Condition == "" && k.c == ConditionInSync:
			continue
		}
		for id := range set {
			if id > opts.After {
				ids = append(ids, id)
			}
		}
	}
	// The smallest limit+1 ids, in order.
	slices.Sort(ids)
	more := len(ids) > limit
	ids = ids[:min(len(ids), limit)]
	page := Page{Agreements: make([]Listed, 0, len(ids))}
	for _, id := range ids {
		ent := c.of[id]
		page.Agreements = append(page.Agreements, Listed{ID: id, Node: ent.node, Condition: ent.key.c})
	}
	c.mu.Unlock()
	e.mu.Lock()
	for i := range page.Agreements {
		l := &page.Agreements[i]
		switch l.Condition {
		case ConditionDiverged:
			l.Reason = &Reason{Code: ReasonDiverged}
		case ConditionCancellationHeld:
			l.Reason = &Reason{Code: ReasonCancellationHeld}
		}
		if l.Condition == ConditionWaiting {
			if ent, ok := e.reasons[l.ID]; ok {
				rs := ent.Reason
				l.Reason = &rs
			} else if k := c.keyOf(l.ID); k.reason != "" {
				l.Reason = &Reason{Code: k.reason}
			}
		}
	}
	e.mu.Unlock()
	if more && len(ids) > 0 {
		page.Next = ids[len(ids)-1]
	}
	return page
}

// keyOf returns the recorded condition of id.
func (c *conditions) keyOf(id string) condKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.of[id].key
}

// ConditionCount is one line of Health.Conditions.
type ConditionCount struct {
	Condition Condition
	// Reason is set for ConditionWaiting.
	Reason     ReasonCode
	Agreements int
}

// conditionCounts returns the non-zero counts in report order.
func (e *Engine) conditionCounts() []ConditionCount {
	var out []ConditionCount
	for k, n := range e.conds.counts() {
		if n > 0 {
			out = append(out, ConditionCount{Condition: k.c, Reason: k.reason, Agreements: int(n)})
		}
	}
	slices.SortFunc(out, func(a, b ConditionCount) int {
		return cmp.Or(cmp.Compare(slices.Index(conditionOrder, a.Condition), slices.Index(conditionOrder, b.Condition)), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// trackAll tracks the records stored by one Update, all but those that
// conflicted.
func (e *Engine) trackAll(saved []*state.Record, conflicted []string) {
	now := time.Now()
	for _, r := range saved {
		if !slices.Contains(conflicted, r.ID) {
			e.track(r, now)
		}
	}
}
