package identity

import (
	"errors"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/errkind"
)

// Error kinds. Every error of this package matches exactly one of the
// module-wide kinds of package secretstore with errors.Is (a context error
// matches the context error instead): edgesecrets.ErrInvalid for malformed
// input — a bad CSR, a bad name, a bad body (HTTP 400);
// edgesecrets.ErrPermission for a refusal (401 or 403); edgesecrets.ErrNotFound
// when there is no record for the instance (404); edgesecrets.ErrConflict when
// a concurrent update of the same instance record won (409);
// edgesecrets.ErrUnavailable when the record store or the signer failed
// (503). The HTTP handler maps them to status codes and the client maps the
// codes back.
//
// Three refusals have a kind of their own, which also matches the module
// kind it refines.
var (
	// ErrUnauthenticated: the caller did not prove who it is — the presented
	// certificate is not from the hub CA or has expired, or the refresh
	// proof's signature or time is wrong (401). Also
	// edgesecrets.ErrPermission.
	ErrUnauthenticated = errkind.New("unauthenticated", edgesecrets.ErrPermission)
	// ErrForbidden: the caller is known but refused — attestation refused or
	// stale, identity mismatch, instance revoked, serial neither current nor
	// previous (403). Also edgesecrets.ErrPermission.
	ErrForbidden = errkind.New("forbidden", edgesecrets.ErrPermission)
	// ErrReplayed: the request carries a proof (register or refresh) that
	// the hub has already accepted once; it changes nothing (409, reason
	// "replayed"). An agent never sees it for its own requests: each one
	// carries a fresh nonce. Also edgesecrets.ErrConflict.
	ErrReplayed = errkind.New("replayed request", edgesecrets.ErrConflict)
)

// ErrIdentityLost matches every refusal that only a new registration
// fixes: the hub or an agbot has no record for the instance
// (ErrUnknownInstance), the instance is revoked (ErrRevoked), or its
// certificate expired (ErrExpired). An Agent given AgentOptions.Attest
// registers again on its own when a renewal, or an agbot through
// Agent.Refused, answers with it. It is a reason, not a kind: the
// refusal also matches its kind (edgesecrets.ErrNotFound, ErrForbidden or
// ErrUnauthenticated).
var ErrIdentityLost = errors.New("identity lost: register again")

// ErrRevoked is the reason, under ErrForbidden, for every refusal caused by
// a revoked instance: errors.Is(err, ErrRevoked) and errors.Is(err,
// ErrForbidden) both hold. The agbot uses it to stop sealing to the agent.
// It also matches ErrIdentityLost, though the hub refuses to register a
// revoked instance again until its record is removed.
var ErrRevoked = errkind.New("instance revoked", ErrIdentityLost)

// ErrExpired is the reason, under ErrUnauthenticated, when a certificate is
// past its NotAfter (the message says "certificate expired"; the HTTP
// handler sends reason "expired"): the agent must register again. It also
// matches ErrIdentityLost.
var ErrExpired = errkind.New("certificate expired", ErrIdentityLost)

// ErrUnknownInstance is the reason, under edgesecrets.ErrNotFound, when
// the hub's records hold no record for the instance (the HTTP handler
// sends reason "unknown"): it never registered there, or the record was
// lost. It also matches ErrIdentityLost.
var ErrUnknownInstance = errkind.New("no record for the instance", ErrIdentityLost)

// errorKinds lists the kinds in the order kindOf tries them: the
// refinements before the module kinds they refine.
var errorKinds = [...]error{ErrUnauthenticated, ErrForbidden, ErrReplayed,
	edgesecrets.ErrInvalid, edgesecrets.ErrNotFound, edgesecrets.ErrConflict, edgesecrets.ErrUnavailable}

// kindOf returns the error kind err matches, or nil if it matches none.
func kindOf(err error) error {
	for _, k := range errorKinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// Operation names used in Error.Op.
const (
	opRegister = "register"
	opRefresh  = "refresh"
	opRevoke   = "revoke"
	opVerify   = "verify"
	opInstall  = "install"
	opDecode   = "decode"
	opStore    = "store"
)

// Error is the error type of this package. It names the operation and the
// instance, carries one kind, says what was wrong, and may wrap a cause.
//
// Reason is written by this package and never holds key material or
// attestation data. Err may come from a plug-in (IssuerOptions.Attest, Signer,
// CertStore); the HTTP handler sends only the message without the
// cause to callers and logs the rest.
type Error struct {
	// Op is the operation: "register", "refresh", "revoke", "verify",
	// "install" (the agent's certificate and key files), "decode" (a name or
	// a body) or "store" (a CertStore).
	Op string
	// Instance is the instance the operation was for, when known.
	Instance Identity
	// Kind is one of the error kinds: ErrUnauthenticated, ErrForbidden,
	// ErrReplayed, or the module's edgesecrets.ErrInvalid, ErrNotFound,
	// ErrConflict or ErrUnavailable; nil for a context error.
	Kind error
	// Reason is a sentence saying what was wrong.
	Reason string
	// Err is the underlying cause, or nil. The reasons ErrRevoked,
	// ErrExpired and ErrUnknownInstance are carried here.
	Err error
}

func newError(op string, id Identity, kind error, reason string, cause error) *Error {
	return &Error{Op: op, Instance: id, Kind: kind, Reason: reason, Err: cause}
}

// public returns the message without the cause: "identity: <op>
// <instance>: <kind>: <reason>". It is what callers of the HTTP API see.
func (e *Error) public() string {
	var b strings.Builder
	b.WriteString("identity: ")
	b.WriteString(e.Op)
	if !e.Instance.isZero() {
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

// Error returns "identity: <op> <instance>: <kind>: <reason>" followed by
// the cause.
func (e *Error) Error() string {
	// A reason sentinel is already said by Reason.
	if e.Err == nil || e.Err == ErrRevoked || e.Err == ErrExpired || e.Err == ErrUnknownInstance || e.Err == errTooLarge { //nolint:errorlint // e.Err is compared as a value: which of these sentinels it is, unwrapped
		return e.public()
	}
	return e.public() + ": " + e.Err.Error()
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
		return e.public()
	}
	if k := kindOf(err); k != nil {
		return "identity: " + k.Error()
	}
	return "identity: internal error"
}
