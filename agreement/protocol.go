package agreement

import (
	"context"
	"fmt"
)

// Seal seals m to recipient, signs it with sender's key and returns the
// envelope's JSON wire form.
//
// m is one of the protocol's messages — a Proposal, Update or Reply: it is
// validated, encoded as JSON and sealed under its message type, with
// h.Type and h.AgreementID taken from it (a caller that sets them must set
// the same values) and a Version of 0 written as the current version, 1 —
// or raw bytes, sealed under the h.Type and h.AgreementID the caller sets.
// h supplies the Sequence and optionally the Time; Seal fills the rest from
// the keys (see Header).
//
// Seal fails with edgesecrets.ErrInvalid over the size limit (Options.MaxSize), when
// the recipient's suite is not allowed (Options.AllowedSuites) and for a
// bad header or message.
func Seal[M Proposal | Update | Reply | []byte](sender *PrivateKeys, recipient *PublicKeys, m M, h Header, opts Options) ([]byte, error) {
	switch m := any(m).(type) {
	case Proposal:
		if m.Version == 0 {
			m.Version = messageVersion
		}
		return sealMessage(sender, recipient, TypeProposal, m, h, opts)
	case Update:
		if m.Version == 0 {
			m.Version = messageVersion
		}
		return sealMessage(sender, recipient, TypeUpdate, m, h, opts)
	case Reply:
		if m.Version == 0 {
			m.Version = messageVersion
		}
		return sealMessage(sender, recipient, TypeReply, m, h, opts)
	default:
		return seal(sender, recipient, h, any(m).([]byte), opts)
	}
}

// Open verifies and decrypts an envelope sealed to recipient by sender,
// records its sequence in guard and returns the header and the message.
//
// For M a Proposal, Update or Reply the envelope must hold that message
// type (else edgesecrets.ErrInvalid); the message is decoded (strictly: no
// unknown fields) and validated, and its agreement id must be the
// envelope's. An update of a kind this package does not know opens fine:
// answer it with a rejecting Reply. For M []byte the plaintext is returned
// as is, whatever the message type.
//
// Checks run in this order: size, form and version (edgesecrets.ErrInvalid); suite
// allow-list, recipient key id, sender key id, signature over header,
// encapsulated key and ciphertext (ErrNotAuthentic); message type
// (edgesecrets.ErrInvalid); decryption (ErrNotAuthentic); the message itself
// (edgesecrets.ErrInvalid); and last the replay guard (ErrReplay), so a forged or
// unusable envelope never advances the guard. The error text names the
// check that failed. On ErrReplay the returned Header is authentic: an
// agent may answer that message again (its reply was probably lost).
func Open[M Proposal | Update | Reply | []byte](ctx context.Context, recipient *PrivateKeys, sender *PublicKeys, envelope []byte, guard ReplayGuard, opts Options) (Header, M, error) {
	var m M
	var h Header
	var err error
	switch p := any(&m).(type) {
	case *Proposal:
		h, err = openMessage(ctx, recipient, sender, envelope, guard, TypeProposal, p, opts)
	case *Update:
		h, err = openMessage(ctx, recipient, sender, envelope, guard, TypeUpdate, p, opts)
	case *Reply:
		h, err = openMessage(ctx, recipient, sender, envelope, guard, TypeReply, p, opts)
	case *[]byte:
		h, *p, err = open(ctx, recipient, sender, envelope, guard, opts, "", nil)
	}
	if err != nil {
		var zero M
		return h, zero, err
	}
	return h, m, nil
}

func sealMessage(sender *PrivateKeys, recipient *PublicKeys, typ MessageType, m message, h Header, opts Options) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("agreement: seal %s: %w", typ, err)
	}
	if h.Type != "" && h.Type != typ {
		return nil, fmt.Errorf("agreement: seal %s: %w: header type is %.40q", typ, errInvalidMessage, string(h.Type))
	}
	if h.AgreementID != "" && h.AgreementID != m.agreement() {
		return nil, fmt.Errorf("agreement: seal %s: %w: header agreement %.80q differs from the message's %q", typ, errInvalidMessage, h.AgreementID, m.agreement())
	}
	h.Type, h.AgreementID = typ, m.agreement()
	plaintext, err := m.encode()
	if err != nil {
		return nil, fmt.Errorf("agreement: seal %s of agreement %q: encoding: %w", typ, h.AgreementID, err)
	}
	defer clear(plaintext)
	return seal(sender, recipient, h, plaintext, opts)
}

// openMessage opens an envelope of type typ holding the message m decodes.
func openMessage(ctx context.Context, recipient *PrivateKeys, sender *PublicKeys, envelope []byte, guard ReplayGuard, typ MessageType, m decodable, opts Options) (Header, error) {
	h, plaintext, err := open(ctx, recipient, sender, envelope, guard, opts, typ, func(h Header, plaintext []byte) error {
		if err := decodeMessage(string(typ), plaintext, opts.maxSize(), m); err != nil {
			return err
		}
		if got := m.agreement(); got != h.AgreementID {
			return fmt.Errorf("%w: message is for agreement %q, its envelope for %q", errInvalidMessage, got, h.AgreementID)
		}
		return nil
	})
	clear(plaintext)
	return h, err
}
