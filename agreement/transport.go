package agreement

import (
	"context"
	"errors"
	"fmt"
)

// EnvelopeSender carries a sealed envelope to the agent of an agreement over
// any link (the exchange, a message queue, HTTP) and returns the envelope
// the agent answered with. The link need not be trusted: envelopes are
// encrypted and signed end to end.
type EnvelopeSender interface {
	// Send delivers envelope to the agent of agreementID and returns the
	// agent's sealed reply. An error means no reply: the send failed or no
	// reply came within the sender's own timeout.
	Send(ctx context.Context, agreementID string, envelope []byte) ([]byte, error)
}

// SealingTransportOptions configure a SealingTransport. Keys, AgentKeys and
// Sender are required.
type SealingTransportOptions struct {
	// Keys are the agbot's: updates are signed with them and replies are
	// sealed to them.
	Keys *PrivateKeys
	// AgentKeys returns the public keys of the agent of an agreement, from
	// its identity certificate. It must fail for an identity that is
	// revoked or expired: the agbot never seals to one.
	AgentKeys func(ctx context.Context, agreementID string) (*PublicKeys, error)
	// Sender carries the envelopes.
	Sender EnvelopeSender
	// ReplyGuard rejects replayed replies; nil means a new
	// MemoryReplayGuard. Replies must also name the update they answer
	// (Reply.InReplyTo), so a reply replayed after a restart of the agbot
	// still answers nothing the outbox sends.
	ReplyGuard ReplayGuard
	// EnvelopeOptions are passed to SealUpdate and OpenReply, for example
	// WithAllowedSuites to insist on the post-quantum suite.
	EnvelopeOptions []Option
}

// SealingTransport is the Transport that carries updates in envelopes: for
// each attempt it seals the update to the agent's keys with the attempt's
// sequence (SealUpdate), hands the envelope to an EnvelopeSender, and opens
// the agent's reply (OpenReply).
//
// The agent opens the update with OpenUpdate and its replay guard, applies
// it, and answers with SealReply(NewReply(header, accepted, reason)) sealed
// to the agbot's keys, with a sequence above its earlier replies for the
// agreement (the update's own sequence serves when it answers each update
// once). A reply that does not name the update it answers is refused.
type SealingTransport struct {
	keys      *PrivateKeys
	agentKeys func(context.Context, string) (*PublicKeys, error)
	sender    EnvelopeSender
	guard     ReplayGuard
	opts      []Option
}

// NewSealingTransport returns a SealingTransport, or an error naming every
// missing option.
func NewSealingTransport(opts SealingTransportOptions) (*SealingTransport, error) {
	var missing []error
	if opts.Keys == nil {
		missing = append(missing, errors.New("missing Keys"))
	}
	if opts.AgentKeys == nil {
		missing = append(missing, errors.New("missing AgentKeys"))
	}
	if opts.Sender == nil {
		missing = append(missing, errors.New("missing Sender"))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("agreement: sealing transport: %w", errors.Join(missing...))
	}
	t := &SealingTransport{
		keys:      opts.Keys,
		agentKeys: opts.AgentKeys,
		sender:    opts.Sender,
		guard:     opts.ReplyGuard,
		opts:      opts.EnvelopeOptions,
	}
	if t.guard == nil {
		t.guard = NewMemoryReplayGuard()
	}
	return t, nil
}

// Deliver implements Transport. Its errors name the agreement and the step
// that failed, never the update's content.
func (t *SealingTransport) Deliver(ctx context.Context, d Delivery) (Reply, error) {
	id := d.Update.AgreementID
	agent, err := t.agentKeys(ctx, id)
	if err != nil {
		return Reply{}, fmt.Errorf("agreement %q: agent keys: %w", id, err)
	}
	if agent == nil {
		return Reply{}, fmt.Errorf("agreement %q: agent keys: %w: none found", id, ErrInvalidKey)
	}
	envelope, err := SealUpdate(t.keys, agent, d.Update, Header{Sequence: d.Sequence}, t.opts...)
	if err != nil {
		return Reply{}, err
	}
	answer, err := t.sender.Send(ctx, id, envelope)
	if err != nil {
		return Reply{}, fmt.Errorf("agreement %q: sending update %d: %w", id, d.Sequence, err)
	}
	_, reply, err := OpenReply(ctx, t.keys, agent, answer, t.guard, t.opts...)
	if err != nil {
		return Reply{}, err
	}
	if reply.InReplyTo == (MessageRef{}) {
		return Reply{}, fmt.Errorf("agreement %q: %w: reply does not name the update it answers", id, ErrInvalidMessage)
	}
	return reply, nil
}
