// Preparing a record's message: what it needs (a proposal, an update, a
// cancellation, or waiting), sealed with its next sequence.

package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// cancelPayload is the payload of a cancellation.
var cancelPayload = json.RawMessage(`{}`)

// errUnrenderable: a bound secret's content cannot be rendered in its
// declared format.
var errUnrenderable = errors.New("cannot be rendered in its declared format")

// prepare works out what record r needs and, when that is a message,
// seals it. r is changed in place to what is to be stored.
func (b *batch) prepare(ctx context.Context, r *state.Record) *job {
	j := &job{rec: r}
	r.UpdatedAt = b.now
	if r.Phase != state.PhaseActive {
		switch {
		case !agentToBeTold(r) && hookPending(r):
			// Nothing (more) to tell the agent, but the cancel hook has not
			// returned: the hook reads the record (the agbot's, for the
			// node and the binding's candidates), so it is removed once
			// notifyCancels marks it due again, and a crash before then
			// calls the hook again.
			r.NextAttempt = time.Time{}
			return j
		case !agentToBeTold(r):
			j.remove = true
			return j
		}
		b.prepareCancel(ctx, j)
		return j
	}
	b.prepareActive(ctx, j)
	return j
}

// prepareCancel prepares the cancellation of j's agreement for its
// agent, sealed as an update of kind cancel, unless one is in flight.
func (b *batch) prepareCancel(ctx context.Context, j *job) {
	r := j.rec
	keys, err := b.agentKeys(ctx, r.Node)
	if err != nil {
		b.wait(j, ReasonAgentUnverified, fmt.Sprintf("the agent on node %q cannot be verified: %v", r.Node, err))
		return
	}
	u := agreement.Update{AgreementID: r.ID, Kind: agreement.UpdateKindCancel, Payload: cancelPayload}
	if b.inFlight(r, agreement.TypeUpdate, agreement.UpdateKindCancel, nil, keys) {
		return
	}
	b.seal(ctx, j, keys, agreement.TypeUpdate, agreement.UpdateKindCancel, nil, func(h agreement.Header) ([]byte, error) {
		return agreement.Seal(b.e.keys, keys, u, h, b.e.cfg.EnvelopeOptions)
	})
}

// prepareActive prepares what j's active agreement needs: its proposal,
// or an update with the secrets whose content its agent lacks, unless
// the same message is in flight; or the reason it waits; or nothing, in
// sync.
func (b *batch) prepareActive(ctx context.Context, j *job) {
	e, r := b.e, j.rec
	keys, err := b.agentKeys(ctx, r.Node)
	if err != nil {
		b.wait(j, ReasonAgentUnverified, fmt.Sprintf("the agent on node %q cannot be verified: %v", r.Node, err))
		return
	}
	if r.Proposed && keys.EncryptionKeyID() != r.AgentKey {
		// A new agent on the node knows nothing of the agreement.
		e.log.Info("the agent has new keys; proposing the agreement again",
			slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("key", string(keys.EncryptionKeyID())))
		forgetAgentHolds(r)
		r.ReplySequence = 0
	}
	propose := !r.Proposed
	send, values, trouble := b.resolveSlots(ctx, r, propose)
	problems, code := trouble.problems, trouble.code
	switch {
	case len(problems) > 0 && (propose || len(send) == 0):
		// A proposal carries every secret; wait for them all.
		why := strings.Join(problems, "; ")
		if trouble.absent {
			why = "waiting: " + why
		}
		b.wait(j, code, why)
		return
	case len(send) == 0:
		// In sync.
		r.InFlight, r.Attempts, r.Unanswered = nil, 0, time.Time{}
		r.LastError, r.Rejection = "", ""
		r.NextAttempt = time.Time{}
		return
	}
	if len(problems) > 0 {
		// The others are sent; these wait.
		r.LastError = clip(strings.Join(problems, "; "))
		j.reason = &Reason{Code: code, Message: r.LastError}
	}

	contents := make(map[int]state.Content, len(send))
	for _, i := range send {
		contents[i] = r.Slots[i].Desired
	}
	if propose {
		p := agreement.Proposal{AgreementID: r.ID, Services: servicesOf(r, send, values)}
		if b.inFlight(r, agreement.TypeProposal, "", contents, keys) {
			return
		}
		b.seal(ctx, j, keys, agreement.TypeProposal, "", contents, func(h agreement.Header) ([]byte, error) {
			return agreement.Seal(e.keys, keys, p, h, e.cfg.EnvelopeOptions)
		})
		return
	}
	if b.inFlight(r, agreement.TypeUpdate, agreement.UpdateKindSecrets, contents, keys) {
		return
	}
	b.seal(ctx, j, keys, agreement.TypeUpdate, agreement.UpdateKindSecrets, contents, func(h agreement.Header) ([]byte, error) {
		// One buffer holds the values' encoding, cleared once sealed.
		return agreement.SealSecretsUpdate(e.keys, keys, r.ID, agreement.SecretsUpdate{Services: servicesOf(r, send, values)}, h, e.cfg.EnvelopeOptions)
	})
}

// slotTrouble is what kept slots of a record from being resolved: each
// problem, whether a secret is absent, and the reason code that ranks
// first among them.
type slotTrouble struct {
	problems []string
	absent   bool
	code     ReasonCode
}

// note adds the problem err.
func (t *slotTrouble) note(err error) {
	var ae *absentError
	c := ReasonStoreUnavailable
	switch {
	case errors.As(err, &ae):
		t.absent, c = true, ReasonSecretAbsent
	case errors.Is(err, errObservationBehind):
		c = ReasonObservationBehind
	case errors.Is(err, errUnrenderable):
		c = ReasonFormatUnrenderable
	case errors.Is(err, edgesecrets.ErrPermission):
		c = ReasonStoreCredentials
	}
	if len(t.problems) == 0 || c.rank() < t.code.rank() {
		t.code = c
	}
	t.problems = append(t.problems, err.Error())
}

// resolveSlots resolves each slot of r to the content it should hold and
// returns the slots to send with their values: every slot for a proposal,
// else those whose agent lacks the content (and no message in flight
// brings it). The slots that cannot be resolved are in the trouble.
func (b *batch) resolveSlots(ctx context.Context, r *state.Record, propose bool) (send []int, values map[int]*secretstore.Secret, trouble slotTrouble) {
	values = map[int]*secretstore.Secret{}
	for i := range r.Slots {
		s := &r.Slots[i]
		names := slotBinding(r, *s).StoreNames
		if !propose {
			c, _, err := b.resolve(ctx, names, false)
			if err != nil {
				trouble.note(err)
				continue
			}
			s.Desired = c
			if c == s.Acked && !inFlightOther(r, i, c) {
				continue
			}
		}
		c, v, err := b.resolve(ctx, names, true)
		if err != nil {
			trouble.note(err)
			continue
		}
		s.Desired = c
		if err := (agreement.SecretDetails{Format: slotBinding(r, *s).Format, Data: v.Data}).Validate(); err != nil {
			trouble.note(fmt.Errorf("service %s: secret %q: store secret %q %w: %w", r.Services[s.Service].Service, s.Name, c.StoreName, errUnrenderable, err))
			continue
		}
		send = append(send, i)
		values[i] = v
	}
	return send, values, trouble
}

// forgetUnanswered clears the acknowledged content of every slot the
// message in flight changes: whether the agent holds the old or the new
// content is unknown until it answers again.
func forgetUnanswered(r *state.Record) {
	if r.InFlight == nil {
		return
	}
	for i, c := range r.InFlight.Contents {
		if i >= 0 && i < len(r.Slots) && r.Slots[i].Acked != c {
			r.Slots[i].Acked = state.Content{}
		}
	}
}

// inFlightOther reports whether the message in flight carries other
// content than c for slot i: the agent may hold it, so c is sent again.
func inFlightOther(r *state.Record, i int, c state.Content) bool {
	if r.InFlight == nil {
		return false
	}
	sent, ok := r.InFlight.Contents[i]
	return ok && sent != c
}

// servicesOf returns the service secrets of the slots send, with values.
func servicesOf(r *state.Record, send []int, values map[int]*secretstore.Secret) []agreement.ServiceSecrets {
	var out []agreement.ServiceSecrets
	for _, i := range send {
		s := r.Slots[i]
		if len(out) == 0 || out[len(out)-1].Service != r.Services[s.Service].Service {
			out = append(out, agreement.ServiceSecrets{Service: r.Services[s.Service].Service, Secrets: map[string]agreement.SecretDetails{}})
		}
		out[len(out)-1].Secrets[s.Name] = agreement.SecretDetails{Format: slotBinding(r, s).Format, Data: values[i].Data}
	}
	return out
}

// inFlight reports whether the same message is already in flight and its
// answer not yet overdue; then r waits for it.
func (b *batch) inFlight(r *state.Record, typ agreement.MessageType, kind string, contents map[int]state.Content, keys *agreement.PublicKeys) bool {
	in := r.InFlight
	// Attempts is 0 with a message in flight only after Resync: the agent
	// is back and likely lost it.
	if in == nil || r.Attempts == 0 || in.Type != typ || in.Kind != kind || in.AgentKey != keys.EncryptionKeyID() ||
		!maps.Equal(in.Contents, contents) {
		return false
	}
	due := in.At.Add(b.e.cfg.ReplyTimeout)
	if !b.now.Before(due) {
		r.LastError = fmt.Sprintf("no reply within %s", b.e.cfg.ReplyTimeout)
		return false
	}
	r.NextAttempt = due
	return true
}

// seal gives r its next sequence, seals the message with it and records
// it in flight. A failure to seal is recorded and retried after a backoff.
func (b *batch) seal(ctx context.Context, j *job, keys *agreement.PublicKeys, typ agreement.MessageType, kind string, contents map[int]state.Content, seal func(agreement.Header) ([]byte, error)) {
	e, r := b.e, j.rec
	seq, err := e.nextSequence(ctx, r)
	if err == nil {
		start := time.Now()
		j.envelope, err = seal(agreement.Header{Sequence: seq, Time: b.now})
		e.inst.seal.Record(ctx, time.Since(start).Seconds())
	}
	if err != nil {
		b.wait(j, ReasonSealFailed, "sealing the "+string(typ)+": "+err.Error())
		return
	}
	e.inst.message(eventSealed)
	j.keys = keys
	// The message this one replaces may have been applied, its answer
	// lost: what it changed is unknown too (seed 1403 of three agbots).
	forgetUnanswered(r)
	r.InFlight = &state.Sent{Type: typ, Kind: kind, Sequence: seq, Contents: contents, AgentKey: keys.EncryptionKeyID(), At: b.now}
	r.Attempts++
	if r.Unanswered.IsZero() {
		r.Unanswered = b.now
	}
	r.NextAttempt = b.now.Add(max(e.cfg.ReplyTimeout, e.backoff(r.Attempts)))
	e.log.Debug("sending", slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("type", string(typ)),
		slog.String("kind", kind), slog.Uint64("sequence", seq), slog.Any("secrets", slotNames(r, contents)), slog.Int("attempt", r.Attempts))
}

// wait records why nothing is sent now (code and why) and when to try
// again.
func (b *batch) wait(j *job, code ReasonCode, why string) {
	r := j.rec
	r.Attempts++
	r.LastError = clip(why)
	j.reason = &Reason{Code: code, Message: r.LastError}
	r.NextAttempt = b.now.Add(b.e.backoff(r.Attempts))
	b.e.log.Debug("agreement waiting", slog.String("agreement", r.ID), slog.String("why", r.LastError),
		slog.Duration("retry_in", r.NextAttempt.Sub(b.now)))
}

// nextSequence returns the record's next envelope sequence, Epoch<<32 |
// Counter, moving it to the engine's epoch first.
func (e *Engine) nextSequence(ctx context.Context, r *state.Record) (uint64, error) {
	if epoch := e.epoch.Load(); r.Epoch < epoch {
		r.Epoch, r.Counter = epoch, 0
	}
	if r.Counter == math.MaxUint32 {
		// 4 billion messages within one epoch: take a fresh one.
		if err := e.renewEpoch(ctx); err != nil {
			return 0, err
		}
		r.Epoch, r.Counter = e.epoch.Load(), 0
	}
	if !brokenEqualSequences || r.Counter == 0 {
		r.Counter++
	}
	return r.Epoch<<32 | uint64(r.Counter), nil
}
