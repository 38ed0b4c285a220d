package agentapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// ReceiverOptions configures a Receiver.
type ReceiverOptions struct {
	// Keys are the agent's agreement keys: envelopes must be sealed to
	// them, and replies are signed with them. Required.
	Keys *agreement.PrivateKeys
	// Agbot holds the agbot's public keys, pinned: only envelopes it
	// signed open, and replies are sealed to it. Required.
	Agbot *agreement.PublicKeys
	// Assign chooses the instance that receives each service of a
	// proposal (see Instances). An error rejects the proposal with the
	// error's sentence when it matches edgesecrets.ErrInvalid, else with a
	// generic reason. Required.
	Assign func(ctx context.Context, p agreement.Proposal) (Instances, error)
	// Provision, when set, is called after a proposal's files are written
	// and before the reply is sealed: give each instance its token, start
	// or tell its container. An error rejects the proposal (generic
	// reason); the files stay, and the agbot's next attempt provisions
	// again. It must not call the Store's changing methods.
	Provision func(ctx context.Context, p agreement.Proposal, instances Instances) error
	// EnvelopeOptions are passed to the agreement package when opening
	// envelopes (agreement.Options.AllowedSuites and MaxSize).
	EnvelopeOptions agreement.Options
	// Logger receives agreement ids, message types, sequences and
	// outcomes, never values. Default: discard.
	Logger *slog.Logger
}

// Receiver is an agent's whole handling of the agbot's messages: it opens
// an envelope (proposal or update) with the agent's keys and a replay guard
// kept in the Store, applies it — a proposal's secrets, an update of kind
// agreement.UpdateKindSecrets, or agreement.UpdateKindCancel, which removes
// the agreement's instances and revokes their tokens when the Store has
// Options.Tokens — and returns the sealed reply to send back:
//
//	r, err := agentapi.NewReceiver(store, agentapi.ReceiverOptions{Keys: keys, Agbot: agbotKeys, Assign: assign})
//	for envelope := range messages {
//		got, err := r.Receive(ctx, envelope)
//		if err != nil {
//			continue // not authentic, not for this agent, or replayed: no reply
//		}
//		send(got.Reply)
//	}
//
// The replay guard keeps one sequence floor per agreement for every message
// the agbot sends (proposal and updates share it). It is persisted
// atomically, together with each instance's metadata; a message below the
// floor is refused without a reply; the message exactly at the floor (the
// agbot resending it because the reply was lost) is applied again, which
// changes nothing, and answered again. Reply sequences are persisted the
// same way and never reused. A Receiver is safe for concurrent use.
type Receiver struct {
	store     *Store
	keys      *agreement.PrivateKeys
	agbot     *agreement.PublicKeys
	assign    func(context.Context, agreement.Proposal) (Instances, error)
	provision func(context.Context, agreement.Proposal, Instances) error
	opts      agreement.Options
	log       *slog.Logger
}

// NewReceiver returns a Receiver applying messages to store.
func NewReceiver(store *Store, opts ReceiverOptions) (*Receiver, error) {
	switch {
	case store == nil:
		return nil, fmt.Errorf("agentapi: receiver: %w: store is nil", edgesecrets.ErrInvalid)
	case opts.Keys == nil || opts.Agbot == nil:
		return nil, fmt.Errorf("agentapi: receiver: %w: ReceiverOptions.Keys and Agbot are required", edgesecrets.ErrInvalid)
	case opts.Assign == nil:
		return nil, fmt.Errorf("agentapi: receiver: %w: ReceiverOptions.Assign is required", edgesecrets.ErrInvalid)
	}
	r := &Receiver{store: store, keys: opts.Keys, agbot: opts.Agbot, assign: opts.Assign, provision: opts.Provision, opts: opts.EnvelopeOptions, log: opts.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Received is the outcome of one message the Receiver opened.
type Received struct {
	// Header is the envelope's authentic header.
	Header agreement.Header
	// Kind is the update's kind; "" for a proposal.
	Kind string
	// Changes lists, per instance id, the service secret names whose files
	// were written (proposals and secrets updates), as
	// Store.ApplyProposal returns them.
	Changes map[string][]string
	// Removed lists the instances a cancellation removed.
	Removed []string
	// Err says why the message was not applied, or is nil: the reply
	// says the same (see ReplyFor). It never holds a value.
	Err error
	// Reply is the sealed reply to send to the agbot.
	Reply []byte
}

// Receive opens envelope, applies it and returns the sealed reply. An
// envelope that does not open — not signed by the agbot, not sealed to
// this agent, altered, malformed, a reply, or replayed below the
// agreement's floor (agreement.ErrReplay) — is an error and gets no reply;
// nothing is changed. Otherwise the error is nil, and Received.Err says
// whether the message was applied.
func (r *Receiver) Receive(ctx context.Context, envelope []byte) (Received, error) {
	peek, err := agreement.PeekHeader(envelope, r.opts)
	if err != nil {
		return Received{}, fmt.Errorf("agentapi: receive: %w", err)
	}
	guard := floorGuard{r.store}
	var got Received
	var apply func(seq uint64) (Received, error)
	switch peek.Type {
	case agreement.TypeProposal:
		h, p, err := agreement.Open[agreement.Proposal](ctx, r.keys, r.agbot, envelope, guard, r.opts)
		if err != nil {
			return Received{}, fmt.Errorf("agentapi: receive: %w", err)
		}
		got.Header = h
		apply = func(seq uint64) (Received, error) { return r.applyProposal(ctx, p, seq) }
	case agreement.TypeUpdate:
		h, u, err := agreement.Open[agreement.Update](ctx, r.keys, r.agbot, envelope, guard, r.opts)
		if err != nil {
			return Received{}, fmt.Errorf("agentapi: receive: %w", err)
		}
		got.Header, got.Kind = h, u.Kind
		apply = func(seq uint64) (Received, error) { return r.applyUpdate(ctx, u, seq) }
	default:
		return Received{}, fmt.Errorf("agentapi: receive: %w: an envelope holding a %.32q, not a proposal or update", edgesecrets.ErrInvalid, string(peek.Type))
	}
	h := got.Header

	s := r.store
	s.mu.Lock()
	defer s.mu.Unlock()
	// Checked again under the lock: a newer message may have been applied
	// since the envelope opened.
	if floor := s.floor(h.AgreementID); h.Sequence < floor {
		return Received{}, fmt.Errorf("agentapi: receive: %w: %s sequence %d of agreement %q is below %d", agreement.ErrReplay, h.Type, h.Sequence, h.AgreementID, floor)
	}
	if s.sealedBeforeStart(h.AgreementID, h.Time) {
		return Received{}, fmt.Errorf("agentapi: receive: %w: %s of agreement %q was sealed at %s, before this agent's replay state began (%s): its files were lost, not its keys",
			agreement.ErrReplay, h.Type, h.AgreementID, h.Time.UTC().Format(time.RFC3339Nano), s.since.UTC().Format(time.RFC3339Nano))
	}
	applied, applyErr := apply(h.Sequence)
	got.Changes, got.Removed = applied.Changes, applied.Removed

	// The floor and the reply sequence are saved before the reply goes
	// out: a reply sequence is never used twice, even across a crash.
	s.view.RLock()
	st := s.agreements[h.AgreementID]
	s.view.RUnlock()
	st.Sequence = max(st.Sequence, h.Sequence)
	st.Reply = max(st.Reply+1, uint64(max(time.Now().UnixMicro(), 1)))
	switch {
	case got.Kind == agreement.UpdateKindCancel && applyErr == nil:
		st.Ended = time.Now()
	case h.Type == agreement.TypeProposal && applyErr == nil:
		st.Ended = time.Time{}
	}
	if err := s.saveAgreements(s.withAgreement(h.AgreementID, st)); err != nil {
		s.view.Lock()
		s.agreements[h.AgreementID] = st // never reuse the reply sequence
		s.view.Unlock()
		applyErr = errors.Join(applyErr, err)
	}
	got.Err = applyErr
	outcome := ReplyFor(h.AgreementID, applyErr)
	reply := agreement.NewReply(h, outcome.Accepted, outcome.Reason)
	reply.Unknown = outcome.Unknown
	got.Reply, err = agreement.Seal(r.keys, r.agbot, reply, agreement.Header{Sequence: st.Reply}, agreement.Options{})
	if err != nil {
		return got, fmt.Errorf("agentapi: receive: sealing the reply: %w", err)
	}
	level := slog.LevelInfo
	if applyErr != nil {
		level = slog.LevelWarn
	}
	r.log.Log(ctx, level, "agreement message handled", "agreement", h.AgreementID, "type", string(h.Type), "kind", got.Kind,
		"sequence", h.Sequence, "accepted", outcome.Accepted, "written", got.Changes, "removed", got.Removed, "err", applyErr)
	return got, nil
}

// applyProposal assigns, writes and provisions a proposal. s.mu is held.
func (r *Receiver) applyProposal(ctx context.Context, p agreement.Proposal, seq uint64) (Received, error) {
	instances, err := r.assign(ctx, p)
	if err != nil {
		return Received{}, fmt.Errorf("agentapi: proposal of agreement %s: assigning instances: %w", quoteName(p.AgreementID), err)
	}
	changes, err := r.store.applyProposal(ctx, p, instances, seq)
	if err == nil && r.provision != nil {
		if err = r.provision(ctx, p, instances); err != nil {
			err = fmt.Errorf("agentapi: proposal of agreement %s: provisioning: %w", quoteName(p.AgreementID), err)
		}
	}
	return Received{Changes: changes}, err
}

// applyUpdate applies a secrets update or a cancellation. s.mu is held.
func (r *Receiver) applyUpdate(ctx context.Context, u agreement.Update, seq uint64) (Received, error) {
	switch u.Kind {
	case agreement.UpdateKindSecrets:
		changes, err := r.store.applyUpdate(ctx, u, seq)
		return Received{Changes: changes}, err
	case agreement.UpdateKindCancel:
		if p := bytes.TrimSpace(u.Payload); len(p) == 0 || p[0] != '{' {
			return Received{}, fmt.Errorf("agentapi: cancellation of agreement %s: %w: the payload is not a JSON object", quoteName(u.AgreementID), edgesecrets.ErrInvalid)
		}
		ids, err := r.store.removeAgreement(ctx, u.AgreementID)
		return Received{Removed: ids}, err
	}
	return Received{}, fmt.Errorf("agentapi: update of agreement %s: %w: unknown update kind %.64q", quoteName(u.AgreementID), edgesecrets.ErrInvalid, u.Kind)
}

// floorGuard is the agreement.ReplayGuard Receive opens envelopes with: it
// refuses a sequence below the agreement's floor and records nothing;
// Receive records the sequence together with what the message changed.
type floorGuard struct{ s *Store }

// Accept implements agreement.ReplayGuard.
func (g floorGuard) Accept(ctx context.Context, agreementID string, typ agreement.MessageType, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if floor := g.s.floor(agreementID); seq < floor {
		return fmt.Errorf("%w: %s sequence %d of agreement %q is below %d, the newest accepted", agreement.ErrReplay, typ, seq, agreementID, floor)
	}
	return nil
}
