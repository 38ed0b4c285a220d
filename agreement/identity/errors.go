package identity

import (
	"errors"
	"strings"

	"github.com/edgesecrets/edgesecrets/internal/errkind"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Error kinds. Every error of this package matches exactly one of them with
// errors.Is (a context error matches the context error instead). The HTTP
// handler maps them to status codes and the client maps the codes back.
//
// Each kind is also one of the module's kinds (secretstore.ErrInvalid,
// ErrPermission, ErrNotFound, ErrConflict, ErrUnavailable), which it
// matches too, so that code handling errors from several packages needs
// only those: errors.Is(err, secretstore.ErrUnavailable) holds for an
// identity error of kind ErrUnavailable.
var (
	// ErrInvalid: malformed input — a bad CSR, a bad name, a bad body (400).
	ErrInvalid = errkind.New("invalid request", secretstore.ErrInvalid)
	// ErrUnauthenticated: the caller did not prove who it is — the presented
	// certificate is not from the hub CA or has expired, or the refresh
	// proof's signature or time is wrong (401). Also
	// secretstore.ErrPermission.
	ErrUnauthenticated = errkind.New("unauthenticated", secretstore.ErrPermission)
	// ErrForbidden: the caller is known but refused — attestation refused or
	// stale, identity mismatch, instance revoked, serial neither current nor
	// previous (403). Also secretstore.ErrPermission.
	ErrForbidden = errkind.New("forbidden", secretstore.ErrPermission)
	// ErrNotFound: no record for the instance (404).
	ErrNotFound = errkind.New("instance not found", secretstore.ErrNotFound)
	// ErrConflict: a concurrent update of the same instance record won (409).
	ErrConflict = errkind.New("conflict", secretstore.ErrConflict)
	// ErrUnavailable: the record store or the signer failed (503).
	ErrUnavailable = errkind.New("unavailable", secretstore.ErrUnavailable)
	// ErrReplayed: the request carries a proof (register or refresh) that
	// the hub has already accepted once; it changes nothing (409, reason
	// "replayed"). An agent never sees it for its own requests: each one
	// carries a fresh nonce. Also secretstore.ErrConflict.
	ErrReplayed = errkind.New("replayed request", secretstore.ErrConflict)
)

// ErrRevoked is the reason, under ErrForbidden, for every refusal caused by
// a revoked instance: errors.Is(err, ErrRevoked) and errors.Is(err,
// ErrForbidden) both hold. The agbot uses it to stop sealing to the agent.
var ErrRevoked = errors.New("instance revoked")

// ErrExpired is the reason, under ErrUnauthenticated, when a certificate is
// past its NotAfter: the agent must register again.
var ErrExpired = errors.New("certificate expired")

// errorKinds lists the kinds in the order KindOf tries them.
var errorKinds = [...]error{ErrInvalid, ErrUnauthenticated, ErrForbidden, ErrNotFound, ErrConflict, ErrUnavailable, ErrReplayed}

// KindOf returns the error kind err matches, or nil if it matches none.
func KindOf(err error) error {
	for _, k := range errorKinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// Operation names used in Error.Op.
const (
	OpRegister = "register"
	OpRefresh  = "refresh"
	OpRevoke   = "revoke"
	OpVerify   = "verify"
	OpInstall  = "install"
	OpDecode   = "decode"
	OpStore    = "store"
)

// Error is the error type of this package. It names the operation and the
// instance, carries one kind, says what was wrong, and may wrap a cause.
//
// Reason is written by this package and never holds key material or
// attestation data. Err may come from a plug-in (Attestor, Signer,
// CertStore); the HTTP handler sends only Public() to callers and logs the
// rest.
type Error struct {
	// Op is the operation, one of the Op constants.
	Op string
	// Instance is the instance the operation was for, when known.
	Instance Identity
	// Kind is one of the package's error kinds.
	Kind error
	// Reason is a sentence saying what was wrong.
	Reason string
	// Err is the underlying cause, or nil. ErrRevoked is carried here.
	Err error
}

func newError(op string, id Identity, kind error, reason string, cause error) *Error {
	return &Error{Op: op, Instance: id, Kind: kind, Reason: reason, Err: cause}
}

// Public returns the message without the cause: "identity: <op>
// <instance>: <kind>: <reason>". It is what callers of the HTTP API see.
func (e *Error) Public() string {
	var b strings.Builder
	b.WriteString("identity: ")
	b.WriteString(e.Op)
	if !e.Instance.IsZero() {
		b.WriteString(" ")
		b.WriteString(e.Instance.String())
	}
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(e.Kind.Error())
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Error returns Public() followed by the cause.
func (e *Error) Error() string {
	// A reason sentinel is already said by Reason.
	if e.Err == nil || e.Err == ErrRevoked || e.Err == ErrExpired || e.Err == errTooLarge {
		return e.Public()
	}
	return e.Public() + ": " + e.Err.Error()
}

// Unwrap returns the kind and the cause, so errors.Is matches either.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// publicMessage returns what may be shown to a remote caller for err.
func publicMessage(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Public()
	}
	if k := KindOf(err); k != nil {
		return "identity: " + k.Error()
	}
	return "identity: internal error"
}
