package agreement

import "errors"

// Error kinds. Every error Open, the message decoders and the key functions
// return matches at most one of them with errors.Is (a guard's own failure is
// passed through unchanged). Error texts name fields, sizes, key ids and
// agreement ids, never plaintext or key material.
var (
	// ErrTooLarge: an envelope, plaintext or message is over the size limit.
	ErrTooLarge = errors.New("too large")
	// ErrMalformed: the input is not a well-formed envelope or message
	// (syntax, unknown or missing fields, bad base64).
	ErrMalformed = errors.New("malformed")
	// ErrUnsupportedVersion: the envelope or message has a version this
	// package does not speak.
	ErrUnsupportedVersion = errors.New("unsupported version")
	// ErrSuiteNotAllowed: the envelope's HPKE suite is unknown or not in the
	// allow-list (no downgrade).
	ErrSuiteNotAllowed = errors.New("suite not allowed")
	// ErrWrongRecipient: the envelope is sealed to another encryption key.
	ErrWrongRecipient = errors.New("wrong recipient")
	// ErrWrongSender: the envelope names a signing key other than the
	// expected sender's.
	ErrWrongSender = errors.New("wrong sender")
	// ErrBadSignature: the signature over header, encapsulated key and
	// ciphertext does not verify; the envelope was altered or forged.
	ErrBadSignature = errors.New("bad signature")
	// ErrDecrypt: a correctly signed envelope did not decrypt.
	ErrDecrypt = errors.New("decryption failed")
	// ErrReplay: the sequence is not above the last one accepted for the
	// same agreement and message type.
	ErrReplay = errors.New("replayed or out-of-order sequence")
	// ErrUnexpectedType: the envelope carries another message type than the
	// one asked for (OpenProposal on an update, ...).
	ErrUnexpectedType = errors.New("unexpected message type")
	// ErrInvalidMessage: a message or header breaks a rule (missing
	// agreement id, bad secret name, agreement id of message and envelope
	// differ, ...).
	ErrInvalidMessage = errors.New("invalid message")
	// ErrInvalidKey: a key or its text form is unusable.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInsecureKeyFile: a private key file is readable or writable by
	// group or others, or the path to write it to is not a regular file.
	ErrInsecureKeyFile = errors.New("insecure key file")
)
