// Committing what became of the messages sent, and applying the agents'
// replies to the records.

package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// commitLoop records what the transport did with each envelope, in
// batches, until outcomes is closed.
func (e *Engine) commitLoop(ctx context.Context, outcomes <-chan outcome) {
	for o := range outcomes {
		batch := []outcome{o}
	drain:
		for len(batch) < e.cfg.batch {
			select {
			case o, ok := <-outcomes:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		e.commit(ctx, batch)
	}
}

// commit records a batch of outcomes: the replies of synchronous
// transports and the failed sends. It finishes after ctx ends, so that
// answers already received are not lost.
func (e *Engine) commit(ctx context.Context, batch []outcome) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	now := time.Now()
	byID := map[string]outcome{}
	var recs []*state.Record
	for _, o := range batch {
		if o.err == nil && o.reply == nil {
			continue // the reply comes through HandleReply
		}
		if o.err != nil && ctx.Err() != nil {
			continue // shutting down: the next run sends again
		}
		// Of two messages of one agreement, the later one is current.
		if prev, ok := byID[o.rec.ID]; !ok || prev.sequence < o.sequence {
			byID[o.rec.ID] = o
		}
	}
	for _, o := range byID {
		recs = append(recs, o.rec)
	}
	if len(recs) == 0 {
		return
	}
	fx := newReplyEffects()
	unreachable := map[string]*state.Record{}
	err := e.edit(cctx, recs, func(r *state.Record) action {
		o := byID[r.ID]
		if o.err != nil {
			if r.InFlight == nil || r.InFlight.Sequence != o.sequence {
				return keep
			}
			// The agent may have applied the message and its answer been
			// lost: a slot it changed holds either content now, so the
			// desired content is sent again even if it comes back to what
			// was acknowledged (found by the fault simulation, seeds 557
			// and 4435 of three agbots: a fallback sent while the
			// node-level secret was denied, unanswered, stayed on the node
			// once the node-level secret was back).
			forgetUnanswered(r)
			r.InFlight = nil
			r.LastError = clip("sending to the agent on node " + strconv.Quote(r.Node) + ": " + o.err.Error())
			unreachable[r.ID] = r
			if brokenGiveUp {
				r.NextAttempt = now.AddDate(100, 0, 0)
				return save
			}
			settle(r, now.Add(e.backoff(r.Attempts)), now)
			e.log.Debug("could not send to the agent; will try again", slog.String("agreement", r.ID), slog.String("node", r.Node),
				slog.Int("attempt", r.Attempts), slog.String("err", r.LastError))
			return save
		}
		a, err := e.applyReply(cctx, r, o.keys, o.reply, now, fx)
		if errors.Is(err, errLateReply) {
			e.log.Debug("the agent answered an earlier message", slog.String("agreement", r.ID), slog.String("err", err.Error()))
		} else if err != nil {
			e.log.Warn("ignoring the agent's reply", slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("err", err.Error()))
		}
		return a
	})
	if err != nil {
		e.log.Error("could not record the agents' replies; the messages will be sent again", slog.String("err", err.Error()))
		return
	}
	notes := e.reasonNotes()
	for _, r := range unreachable {
		notes.note(r.ID, r.Node, &Reason{Code: ReasonAgentUnreachable, Message: r.LastError}, now)
		e.track(r, now)
	}
	notes.flush()
	e.finishReplies(cctx, fx, now)
}

// replyGuard is the replay guard of one agreement's replies: the record's
// ReplySequence, advanced by storing the record.
type replyGuard struct{ floor uint64 }

// Accept implements agreement.ReplayGuard.
func (g replyGuard) Accept(_ context.Context, id string, typ agreement.MessageType, seq uint64) error {
	if seq <= g.floor {
		return fmt.Errorf("%w: %s sequence %d of agreement %q is not above %d", agreement.ErrReplay, typ, seq, id, g.floor)
	}
	return nil
}

// errLateReply: an authentic reply to a message that is no longer the one
// in flight.
var errLateReply = errors.New("the reply answers an earlier message")

// applyReply opens an agent's sealed reply to r and applies it. An
// accepted message becomes what the agent holds (for a proposal: the
// agreement is proposed; for a cancellation: the record is removed); a
// rejected one is tried again after a backoff, never cancelled. A reply
// that does not open, is replayed or answers an earlier message changes
// nothing else.
func (e *Engine) applyReply(ctx context.Context, r *state.Record, keys *agreement.PublicKeys, envelope []byte, now time.Time, fx *replyEffects) (action, error) {
	h, reply, err := agreement.Open[agreement.Reply](ctx, e.keys, keys, envelope, replyGuard{floor: r.ReplySequence}, e.cfg.EnvelopeOptions)
	if err != nil {
		return keep, fmt.Errorf("delivery: reply of agreement %q: %w", r.ID, err)
	}
	if h.AgreementID != r.ID {
		return keep, fmt.Errorf("delivery: reply of agreement %q: %w: it is for agreement %q", r.ID, edgesecrets.ErrInvalid, h.AgreementID)
	}
	r.ReplySequence = h.Sequence
	r.LastReply = now
	in := r.InFlight
	if in == nil || reply.InReplyTo != (agreement.MessageRef{Type: in.Type, Sequence: in.Sequence}) {
		return save, fmt.Errorf("delivery: reply of agreement %q to %s %d: %w", r.ID, reply.InReplyTo.Type, reply.InReplyTo.Sequence, errLateReply)
	}
	r.InFlight, r.Unanswered = nil, time.Time{}
	fx.answered(r, in, reply.Accepted)
	e.clearReason(r.ID, r.Node, ReasonAgentUnreachable, now) // it answered
	if !reply.Accepted && reply.Unknown && in.Type == agreement.TypeUpdate && in.Kind == agreement.UpdateKindSecrets {
		// The agent lost the agreement (its files and replay state) but
		// kept its keys: propose it again, now (seed 7 of the fault
		// simulation retried the update forever).
		e.log.Info("the agent holds nothing of the agreement; proposing it again", slog.String("agreement", r.ID), slog.String("node", r.Node))
		forgetAgentHolds(r)
		r.Attempts, r.NextAttempt = 0, now
		return save, nil
	}
	if !reply.Accepted {
		level := slog.LevelDebug // the same refusal again
		if prev := r.Rejection; prev != clip(reply.Reason) {
			level = slog.LevelWarn
		}
		r.Rejection = clip(reply.Reason)
		r.LastError = ""
		settle(r, now.Add(e.backoff(r.Attempts)), now)
		e.log.Log(ctx, level, "the agent rejected a message; will try again", slog.String("agreement", r.ID), slog.String("node", r.Node),
			slog.String("reason", string(rejectionCode(r.Rejection))), slog.String("why", r.Rejection),
			slog.String("type", string(in.Type)), slog.String("kind", in.Kind), slog.Int("attempt", r.Attempts))
		return save, nil
	}
	if r.Rejection != "" {
		e.log.Info("agreement no longer held back", slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("was", string(rejectionCode(r.Rejection))))
	}
	if in.Kind == agreement.UpdateKindCancel {
		e.log.Info("the agent removed the agreement's secrets; agreement ended", slog.String("agreement", r.ID), slog.String("node", r.Node))
		if hookPending(r) {
			// Kept for the cancel hook, which reads it, and removed once the
			// hook returned (notifyCancels); a crash before then calls the
			// hook again.
			r.Phase, r.Attempts, r.NextAttempt = state.PhaseCancelled, 0, time.Time{}
			return save, nil
		}
		return remove, nil
	}
	if in.Type == agreement.TypeProposal {
		r.Proposed, r.AgentKey = true, in.AgentKey
	}
	for i, c := range in.Contents {
		if i < len(r.Slots) {
			r.Slots[i].Acked = c
		}
	}
	// A secret held back while the others were sent keeps its reason
	// until the next prepare finds it again or sends it.
	heldBack := !inSync(r) && e.reasonOf(r) != nil && r.Rejection == ""
	r.Attempts, r.Rejection = 0, ""
	if !heldBack {
		r.LastError = ""
	}
	if inSync(r) {
		settle(r, time.Time{}, now)
	} else {
		r.NextAttempt = now
	}
	e.log.Info("the agent accepted", slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("type", string(in.Type)),
		slog.Any("secrets", slotNames(r, in.Contents)))
	return save, nil
}

// settle sets r's next attempt to next, unless r is already due: then
// something asked for it to be looked at (MarkDue) and that stays.
func settle(r *state.Record, next, now time.Time) {
	if !r.NextAttempt.IsZero() && !r.NextAttempt.After(now) {
		return
	}
	r.NextAttempt = next
}

// inSync reports whether the agent acknowledged the stored desired content
// of every slot of an active agreement, with nothing in flight.
func inSync(r *state.Record) bool {
	if r.Phase != state.PhaseActive || !r.Proposed || r.InFlight != nil {
		return false
	}
	for _, s := range r.Slots {
		if s.Desired.IsZero() || s.Desired != s.Acked {
			return false
		}
	}
	return true
}

// forgetAgentHolds makes r as to an agent that holds nothing of it (new
// keys, or its files lost): the engine proposes it again, with every
// secret's content, and a message in flight is not waited for.
func forgetAgentHolds(r *state.Record) {
	r.Proposed, r.AgentKey, r.Rejection, r.LastError = false, "", "", ""
	r.InFlight, r.Unanswered = nil, time.Time{}
	for i := range r.Slots {
		r.Slots[i].Acked = state.Content{}
	}
}
