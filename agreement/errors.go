package agreement

import (
	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/errkind"
)

// Error kinds. Every error Seal, Open, PeekHeader and the key functions
// return matches at most one of them with errors.Is (a guard's own failure
// is passed through unchanged); the error text says what exactly failed.
// Error texts name fields, sizes, key ids and agreement ids, never
// plaintext or key material.
//
// Bad input is the module's edgesecrets.ErrInvalid: an envelope, message,
// key text or key file that is malformed (syntax, unknown or missing
// fields, bad base64), over the size limit, of a version this package does
// not speak, or breaks a rule (missing agreement id, bad secret name,
// agreement ids of message and envelope differ, another message type than
// the one opened, a key of an unknown or disallowed suite, a private key
// file group or others may access, ...). The two kinds of this package
// refine the module's: they match it too.
var (
	// ErrNotAuthentic: the envelope was not sealed by the expected sender
	// to the recipient's key in an allowed suite, or was altered: another
	// recipient or sender key id, a suite outside the allow-list, a
	// signature that does not verify or a ciphertext that does not decrypt
	// (each a refinement below). It refines edgesecrets.ErrPermission.
	ErrNotAuthentic = errkind.New("not authentic", edgesecrets.ErrPermission)
	// ErrReplay: the sequence is not above the last one accepted for the
	// same agreement and message type. It refines edgesecrets.ErrConflict.
	ErrReplay = errkind.New("replayed or out-of-order sequence", edgesecrets.ErrConflict)
)

// cause is the precise reason behind an error kind: its text says what
// failed and it matches its kind with errors.Is.
type cause struct {
	kind error
	text string
}

func (c *cause) Error() string { return c.text }
func (c *cause) Unwrap() error { return c.kind }

// The causes this package reports.
var (
	errTooLarge           = &cause{edgesecrets.ErrInvalid, "too large"}
	errMalformed          = &cause{edgesecrets.ErrInvalid, "malformed"}
	errUnsupportedVersion = &cause{edgesecrets.ErrInvalid, "unsupported version"}
	errUnexpectedType     = &cause{edgesecrets.ErrInvalid, "unexpected message type"}
	errInvalidMessage     = &cause{edgesecrets.ErrInvalid, "invalid message"}
	errInvalidKey         = &cause{edgesecrets.ErrInvalid, "invalid key"}
	errUnknownSuite       = &cause{edgesecrets.ErrInvalid, "suite not supported or not allowed"}
	errInsecureKeyFile    = &cause{edgesecrets.ErrInvalid, "insecure key file"}
)

// The refinements of ErrNotAuthentic: each matches ErrNotAuthentic and
// itself with errors.Is, so a caller that must tell the failures apart
// (a message sealed to this agent's old keys, a message from another
// agbot) need not read the error's text.
var (
	// ErrSuiteNotAllowed: the envelope's suite is outside
	// Options.AllowedSuites.
	ErrSuiteNotAllowed error = &cause{ErrNotAuthentic, "suite not allowed"}
	// ErrWrongRecipient: the envelope is sealed to another key id than the
	// recipient's.
	ErrWrongRecipient error = &cause{ErrNotAuthentic, "wrong recipient"}
	// ErrWrongSender: the envelope names another sender key id than the
	// expected sender's.
	ErrWrongSender error = &cause{ErrNotAuthentic, "wrong sender"}
	// ErrBadSignature: the sender's signature does not verify: the
	// envelope was altered, or signed by another key.
	ErrBadSignature error = &cause{ErrNotAuthentic, "bad signature"}
	// ErrDecrypt: the ciphertext does not decrypt with the recipient's
	// key.
	ErrDecrypt error = &cause{ErrNotAuthentic, "decryption failed"}
)
