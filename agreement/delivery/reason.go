package delivery

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// ReasonCode says, from a small closed set, why the engine cannot deliver
// an agreement now. Codes are stable: tools, metrics (the "reason"
// attribute of edgesecrets.delivery.agreements) and alerts match on them.
// A new cause (code and message) of an agreement is logged once, at WARN,
// and its clearing at INFO; several agreements with one code in one batch
// of work are one line with their count. The passing codes
// (ReasonStoreUnavailable and ReasonStateUnavailable, which Health reports
// once for all, and ReasonObservationBehind) are logged at DEBUG.
type ReasonCode string

// Reason codes.
const (
	// ReasonAgentUnverified: the engine cannot verify the node's agent:
	// Options.Agents.Keys failed (no identity record for it, a certificate
	// refused, revoked or expired). Nothing is sealed to it until it can.
	ReasonAgentUnverified ReasonCode = "AgentUnverified"
	// ReasonFormatUnrenderable: a bound secret's content cannot be rendered
	// in the format its service declares (agreement.ContentKey), such as a
	// "raw" secret with several keys. The agreement waits until the secret
	// is rewritten or bound with another format.
	ReasonFormatUnrenderable ReasonCode = "FormatUnrenderable"
	// ReasonSecretAbsent: every store secret a binding names is missing or
	// forbidden to the agbot.
	ReasonSecretAbsent ReasonCode = "SecretAbsent"
	// ReasonStoreUnavailable: the store did not answer a read of a bound
	// secret.
	ReasonStoreUnavailable ReasonCode = "StoreUnavailable"
	// ReasonObservationBehind: in a shared State, the store holds content
	// the member polling the secret has not observed yet; it does within
	// one interval.
	ReasonObservationBehind ReasonCode = "ObservationBehind"
	// ReasonSealFailed: the message could not be sealed (its size over the
	// envelope limit, the agent's keys refused by the suite options).
	ReasonSealFailed ReasonCode = "SealFailed"
	// ReasonAgentRejected: the agent refused the last message; the engine
	// sends it again after a backoff. The message is the agent's reason
	// (Status.Rejection).
	ReasonAgentRejected ReasonCode = "AgentRejected"
	// ReasonTemplateFailed: the agent refused the last message because a
	// secret file's template (or ready output format) on the node could
	// not render the secret's content (agreement.RejectedTemplateFailed);
	// the node keeps its last good file, and the engine sends the message
	// again after a backoff.
	ReasonTemplateFailed ReasonCode = ReasonCode(agreement.RejectedTemplateFailed)
	// ReasonAgentUnreachable: the last message could not be handed to the
	// agent (the transport failed or timed out); the engine sends it again
	// after a backoff, and the reason holds until the agent answers.
	ReasonAgentUnreachable ReasonCode = "AgentUnreachable"
	// ReasonStoreCredentials: the store refused the agbot a bound secret's
	// value; with Health.StoreProblem set, its own credentials or access
	// are at fault.
	ReasonStoreCredentials ReasonCode = "StoreCredentials"
	// ReasonStateUnavailable: the state could not be read or written
	// (Health.StateProblem); nothing is delivered until it is back. It is
	// an engine-wide problem (the edgesecrets.delivery.problems gauge),
	// never an agreement's.
	ReasonStateUnavailable ReasonCode = "StateUnavailable"
	// ReasonDiverged: the agent has left a message unanswered for longer
	// than Options.DivergedAfter (ConditionDiverged); the engine keeps
	// trying.
	ReasonDiverged ReasonCode = "Diverged"
	// ReasonCancellationHeld: a cancellation was decided and held by the
	// budget (ConditionCancellationHeld) until the secret returns or
	// Engine.ReleaseHeld.
	ReasonCancellationHeld ReasonCode = "CancellationHeld"
)

// level is the log level of a new cause of the code.
func (c ReasonCode) level() slog.Level {
	switch c {
	case ReasonStoreUnavailable, ReasonObservationBehind, ReasonStateUnavailable:
		return slog.LevelDebug // passing, or reported once for all (Health)
	}
	return slog.LevelWarn
}

// rank orders the codes of one agreement's problems: the one reported is
// the one someone must act on first.
func (c ReasonCode) rank() int {
	switch c {
	case ReasonAgentUnverified:
		return 0
	case ReasonFormatUnrenderable:
		return 1
	case ReasonSealFailed:
		return 2
	case ReasonSecretAbsent:
		return 3
	case ReasonStoreCredentials:
		return 4
	case ReasonStoreUnavailable:
		return 5
	}
	return 6
}

// Reason is why the engine cannot deliver an agreement (or part of it)
// now: a code and a message naming what is wrong (store names, formats,
// key counts; never values).
type Reason struct {
	Code    ReasonCode
	Message string
	// Since is when this engine first found the code for the agreement.
	Since time.Time
}

// ReasonCount is one code of Health.Reasons: how many agreements it holds
// back, with one of them as an example.
type ReasonCount struct {
	Code       ReasonCode
	Agreements int
	// Example is one of the agreements (the one with the lowest id) and
	// its reason's message.
	Example, Message string
}

// reasonEntry is what the engine knows of one agreement's reason.
type reasonEntry struct {
	Reason
	node string
	// seen is when a reconcile last found it.
	seen time.Time
}

// reasonNotes collects the reasons one batch of work found, and logs
// their changes once it is done: each new cause (code and message) at its
// code's level, and its clearing at INFO after a WARN; several agreements
// with the same code in one batch are one line with their count.
type reasonNotes struct {
	e    *Engine
	new  map[ReasonCode][]reasonEntryLog
	gone map[ReasonCode][]reasonEntryLog
}

type reasonEntryLog struct{ id, node, why string }

func (e *Engine) reasonNotes() *reasonNotes {
	return &reasonNotes{e: e, new: map[ReasonCode][]reasonEntryLog{}, gone: map[ReasonCode][]reasonEntryLog{}}
}

// note records what working on agreement id (on node) found: its reason,
// or none (nil).
func (n *reasonNotes) note(id, node string, rs *Reason, now time.Time) {
	e := n.e
	e.mu.Lock()
	old, had := e.reasons[id]
	switch {
	case rs == nil:
		delete(e.reasons, id)
	case had && old.Code == rs.Code:
		ent := old
		ent.Message, ent.seen = rs.Message, now
		e.reasons[id] = ent
	default:
		e.reasons[id] = reasonEntry{Reason: Reason{Code: rs.Code, Message: rs.Message, Since: now}, node: node, seen: now}
	}
	e.mu.Unlock()
	switch {
	case rs == nil && had && old.Code.level() >= slog.LevelWarn:
		n.gone[old.Code] = append(n.gone[old.Code], reasonEntryLog{id: id, node: node})
	case rs != nil && (!had || old.Code != rs.Code || old.Message != rs.Message):
		n.new[rs.Code] = append(n.new[rs.Code], reasonEntryLog{id: id, node: node, why: rs.Message})
	}
}

// aggregateAbove is how many agreements of one code a batch logs one by
// one; more are one line with their count.
const aggregateAbove = 3

// flush logs what the batch changed.
func (n *reasonNotes) flush() {
	log := n.e.log
	ctx := context.Background()
	for _, code := range slices.Sorted(maps.Keys(n.new)) {
		ents := n.new[code]
		if len(ents) <= aggregateAbove {
			for _, x := range ents {
				log.Log(ctx, code.level(), "agreement cannot be delivered now; will try again",
					slog.String("agreement", x.id), slog.String("node", x.node), slog.String("reason", string(code)), slog.String("why", x.why))
			}
			continue
		}
		log.Log(ctx, code.level(), "agreements cannot be delivered now; will try again",
			slog.Int("agreements", len(ents)), slog.String("reason", string(code)),
			slog.Any("examples", examples(ents)), slog.String("why", ents[0].why))
	}
	for _, code := range slices.Sorted(maps.Keys(n.gone)) {
		ents := n.gone[code]
		if len(ents) <= aggregateAbove {
			for _, x := range ents {
				log.Info("agreement no longer held back", slog.String("agreement", x.id), slog.String("node", x.node), slog.String("was", string(code)))
			}
			continue
		}
		log.Info("agreements no longer held back", slog.Int("agreements", len(ents)), slog.String("was", string(code)), slog.Any("examples", examples(ents)))
	}
}

// examples names the first few agreements of ents.
func examples(ents []reasonEntryLog) []string {
	out := make([]string, 0, aggregateAbove)
	for _, x := range ents[:min(len(ents), aggregateAbove)] {
		out = append(out, x.id)
	}
	return out
}

// reasonCode returns the code of the reason this engine holds for id.
func (e *Engine) reasonCode(id string) ReasonCode {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reasons[id].Code
}

// clearReason forgets id's reason if it has code, and logs that it cleared.
func (e *Engine) clearReason(id, node string, code ReasonCode, now time.Time) {
	if e.reasonCode(id) != code {
		return
	}
	n := e.reasonNotes()
	n.note(id, node, nil, now)
	n.flush()
}

// reasonOf returns the reason this engine last found for r, if the record
// still says so (another member of a shared State may have taken it on
// since): its LastError is the reason's message. Otherwise a rejection by
// the agent is the reason.
func (e *Engine) reasonOf(r *state.Record) *Reason {
	e.mu.Lock()
	ent, ok := e.reasons[r.ID]
	e.mu.Unlock()
	switch {
	case ok && r.LastError == ent.Message:
		rs := ent.Reason
		return &rs
	case r.Rejection != "":
		return &Reason{Code: rejectionCode(r.Rejection), Message: r.Rejection, Since: r.LastReply}
	}
	return nil
}

// rejectionCode is the reason code of an agent's rejection: the code the
// reason starts with where the agent gave one, else ReasonAgentRejected.
func rejectionCode(reason string) ReasonCode {
	if strings.HasPrefix(reason, agreement.RejectedTemplateFailed+":") {
		return ReasonTemplateFailed
	}
	return ReasonAgentRejected
}

// pruneReasons forgets the reasons of agreements that are gone, and of
// those whose record says otherwise and that no reconcile of this engine
// found for longer than an interval (taken on by another member), among
// the agreements the review's slice covered (reviewed). live maps each
// reviewed record's id to its LastError.
func (e *Engine) pruneReasons(live map[string]string, now time.Time, reviewed func(id string) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, ent := range e.reasons {
		if !reviewed(id) {
			continue
		}
		last, ok := live[id]
		if !ok || last != ent.Message && now.Sub(ent.seen) > e.cfg.Interval {
			delete(e.reasons, id)
		}
	}
}

// reasonCounts summarises the reasons, one entry per code, in code order.
// e.mu must be held.
func (e *Engine) reasonCounts() []ReasonCount {
	byCode := map[ReasonCode]*ReasonCount{}
	for id, ent := range e.reasons {
		c := byCode[ent.Code]
		if c == nil {
			c = &ReasonCount{Code: ent.Code}
			byCode[ent.Code] = c
		}
		c.Agreements++
		if c.Example == "" || id < c.Example {
			c.Example, c.Message = id, ent.Message
		}
	}
	out := make([]ReasonCount, 0, len(byCode))
	for _, c := range byCode {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ReasonCount) int { return cmp.Compare(a.Code, b.Code) })
	if len(out) == 0 {
		return nil
	}
	return out
}
