package agreement

import (
	"context"
	"fmt"
)

// SealProposal validates p and seals it to recipient. h supplies the
// Sequence (and optionally Time); Type and AgreementID are taken from the
// message (a caller that sets them must set the same values). A Version of 0
// is written as MessageVersion.
func SealProposal(sender *PrivateKeys, recipient *PublicKeys, p Proposal, h Header, opts ...Option) ([]byte, error) {
	if p.Version == 0 {
		p.Version = MessageVersion
	}
	return sealMessage(sender, recipient, TypeProposal, p, h, opts)
}

// SealUpdate validates u and seals it to recipient; see SealProposal.
func SealUpdate(sender *PrivateKeys, recipient *PublicKeys, u Update, h Header, opts ...Option) ([]byte, error) {
	if u.Version == 0 {
		u.Version = MessageVersion
	}
	return sealMessage(sender, recipient, TypeUpdate, u, h, opts)
}

// SealReply validates r and seals it to recipient; see SealProposal.
func SealReply(sender *PrivateKeys, recipient *PublicKeys, r Reply, h Header, opts ...Option) ([]byte, error) {
	if r.Version == 0 {
		r.Version = MessageVersion
	}
	return sealMessage(sender, recipient, TypeReply, r, h, opts)
}

// OpenProposal opens an envelope that must hold a proposal (else
// ErrUnexpectedType), decodes and validates it, checks that its agreement id
// is the envelope's, and only then records the sequence in guard. Errors are
// those of Open and DecodeProposal.
func OpenProposal(ctx context.Context, recipient *PrivateKeys, sender *PublicKeys, envelope []byte, guard ReplayGuard, opts ...Option) (Header, Proposal, error) {
	return openMessage[Proposal](ctx, recipient, sender, envelope, guard, TypeProposal, opts)
}

// OpenUpdate opens an envelope that must hold an update; see OpenProposal.
// An update of a kind this package does not know opens fine: answer it
// with a rejecting Reply.
func OpenUpdate(ctx context.Context, recipient *PrivateKeys, sender *PublicKeys, envelope []byte, guard ReplayGuard, opts ...Option) (Header, Update, error) {
	return openMessage[Update](ctx, recipient, sender, envelope, guard, TypeUpdate, opts)
}

// OpenReply opens an envelope that must hold a reply; see OpenProposal.
func OpenReply(ctx context.Context, recipient *PrivateKeys, sender *PublicKeys, envelope []byte, guard ReplayGuard, opts ...Option) (Header, Reply, error) {
	return openMessage[Reply](ctx, recipient, sender, envelope, guard, TypeReply, opts)
}

func sealMessage(sender *PrivateKeys, recipient *PublicKeys, typ MessageType, m message, h Header, opts []Option) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("agreement: seal %s: %w", typ, err)
	}
	if h.Type != "" && h.Type != typ {
		return nil, fmt.Errorf("agreement: seal %s: %w: header type is %.40q", typ, ErrInvalidMessage, string(h.Type))
	}
	if h.AgreementID != "" && h.AgreementID != m.agreement() {
		return nil, fmt.Errorf("agreement: seal %s: %w: header agreement %.80q differs from the message's %q", typ, ErrInvalidMessage, h.AgreementID, m.agreement())
	}
	h.Type, h.AgreementID = typ, m.agreement()
	plaintext, err := m.encode()
	if err != nil {
		return nil, fmt.Errorf("agreement: seal %s of agreement %q: encoding: %w", typ, h.AgreementID, err)
	}
	defer clear(plaintext)
	return Seal(sender, recipient, h, plaintext, opts...)
}

// openMessage opens an envelope of type typ holding a message M.
func openMessage[M any, PM interface {
	*M
	decodable
}](ctx context.Context, recipient *PrivateKeys, sender *PublicKeys, envelope []byte, guard ReplayGuard, typ MessageType, opts []Option) (Header, M, error) {
	o := buildOptions(opts)
	var m M
	h, plaintext, err := open(ctx, recipient, sender, envelope, guard, o, typ, func(h Header, plaintext []byte) error {
		if err := decodeMessage(string(typ), plaintext, o.maxSize, PM(&m)); err != nil {
			return err
		}
		if got := PM(&m).agreement(); got != h.AgreementID {
			return fmt.Errorf("%w: message is for agreement %q, its envelope for %q", ErrInvalidMessage, got, h.AgreementID)
		}
		return nil
	})
	clear(plaintext)
	if err != nil {
		var zero M
		return h, zero, err
	}
	return h, m, nil
}
