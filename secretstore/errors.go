package secretstore

import (
	"errors"
	"strconv"
)

// Error kinds. Every error a Store returns matches at most one of them with
// errors.Is; a context error (canceled, deadline) matches the context error
// instead.
var (
	// ErrNotFound: the secret does not exist (or its latest version is
	// deleted, or it is scheduled for deletion).
	ErrNotFound = errors.New("not found")
	// ErrPermission: the store refused the caller (HTTP 403, access denied).
	ErrPermission = errors.New("permission denied")
	// ErrUnavailable: the store could not be reached or could not serve the
	// request: absent, sealed, network failure, 5xx, throttled after retries.
	ErrUnavailable = errors.New("store unavailable")
	// ErrConflict: a compare-and-set or create-only write lost.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: a bad secret name, bad data or bad configuration.
	ErrInvalid = errors.New("invalid")
)

// Operation names used in Error.Op.
const (
	OpGet    = "get"
	OpStat   = "stat"
	OpPut    = "put"
	OpDelete = "delete"
	OpList   = "list"
	OpOpen   = "open"
	// OpCheckCredentials is a credential check (CredentialChecker).
	OpCheckCredentials = "check-credentials"
)

// Error is the error type stores return. It names the operation and the
// secret, carries one of the error kinds, and may wrap a cause.
//
// Backends build causes from status codes and error codes, never from request
// or response bodies, so an Error never holds a secret value or a token.
type Error struct {
	// Op is the operation, one of the Op constants.
	Op string
	// Name is the secret name (or list prefix) the operation was for.
	Name string
	// Kind is one of ErrNotFound, ErrPermission, ErrUnavailable,
	// ErrConflict, ErrInvalid, or nil for a context error.
	Kind error
	// Err is the underlying cause, or nil.
	Err error
}

// NewError returns an *Error. kind is one of the package's error kinds (or
// nil when cause is a context error); cause may be nil.
func NewError(op, name string, kind, cause error) error {
	return &Error{Op: op, Name: name, Kind: kind, Err: cause}
}

// Error returns "secretstore: <op> <name>: <kind>: <cause>".
func (e *Error) Error() string {
	s := "secretstore: " + e.Op
	if e.Name != "" {
		s += " " + strconv.Quote(e.Name)
	}
	if e.Kind != nil {
		s += ": " + e.Kind.Error()
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
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

// KindOf returns the error kind err matches, or nil if it matches none.
func KindOf(err error) error {
	for _, k := range []error{ErrNotFound, ErrPermission, ErrUnavailable, ErrConflict, ErrInvalid} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}
