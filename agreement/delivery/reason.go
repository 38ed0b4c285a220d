package delivery

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"
)

// ReasonCode says, from a small closed set, why the engine cannot deliver
// an agreement now. Codes are stable: tools and metrics may match on them.
// Each code is logged once per agreement and cause (code and message): at
// WARN for the codes that need someone to act (ReasonAgentUnverified,
// ReasonFormatUnrenderable, ReasonSealFailed), at INFO for
// ReasonSecretAbsent and ReasonAgentRejected, at DEBUG for the passing ones
// (ReasonStoreUnavailable, which Health.StoreProblem reports once for all,
// and ReasonObservationBehind); again only when the cause changes or after
// it cleared.
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
)

// level is the log level of a new cause of the code.
func (c ReasonCode) level() slog.Level {
	switch c {
	case ReasonAgentUnverified, ReasonFormatUnrenderable, ReasonSealFailed:
		return slog.LevelWarn
	case ReasonSecretAbsent, ReasonAgentRejected:
		return slog.LevelInfo
	}
	return slog.LevelDebug
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
	case ReasonStoreUnavailable:
		return 4
	}
	return 5
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

// noteReason records what reconciling agreement id (on node) found: its
// reason, or none (nil). A new cause (code or message) is logged, at the
// code's level; one that goes away after a WARN is logged at INFO.
func (e *Engine) noteReason(id, node string, rs *Reason, now time.Time) {
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
		e.log.Info("agreement no longer held back", slog.String("agreement", id), slog.String("node", node), slog.String("was", string(old.Code)))
	case rs != nil && (!had || old.Code != rs.Code || old.Message != rs.Message):
		e.log.Log(context.Background(), rs.Code.level(), "agreement cannot be delivered now; will try again",
			slog.String("agreement", id), slog.String("node", node), slog.String("reason", string(rs.Code)), slog.String("why", rs.Message))
	}
}

// reasonOf returns the reason this engine last found for r, if the record
// still says so (another member of a shared State may have taken it on
// since): its LastError is the reason's message. Otherwise a rejection by
// the agent is the reason.
func (e *Engine) reasonOf(r *Record) *Reason {
	e.mu.Lock()
	ent, ok := e.reasons[r.ID]
	e.mu.Unlock()
	switch {
	case ok && r.LastError == ent.Message:
		rs := ent.Reason
		return &rs
	case r.Rejection != "":
		return &Reason{Code: ReasonAgentRejected, Message: r.Rejection, Since: r.LastReply}
	}
	return nil
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
