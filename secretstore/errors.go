package secretstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
)

// Error kinds. Every error a Store returns matches at most one of them with
// errors.Is; a context error (canceled, deadline) matches the context error
// instead. A backend's driver (package secretstore/driver) reports them the
// same way, in an *Error with Kind set.
var (
	// ErrNotFound: the secret does not exist (or its latest version is
	// deleted, or it is scheduled for deletion).
	ErrNotFound = errors.New("not found")
	// ErrPermission: the store refused the caller (HTTP 403, access denied).
	ErrPermission = errors.New("permission denied")
	// ErrUnavailable: the store could not be reached or could not serve the
	// request: absent, sealed, network failure, 5xx, throttled after retries.
	ErrUnavailable = errors.New("unavailable")
	// ErrConflict: a compare-and-set or create-only write lost.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: a bad secret name, bad data or bad configuration.
	ErrInvalid = errors.New("invalid")
)

// kinds lists the error kinds in the order KindOf tries them.
var kinds = []error{ErrNotFound, ErrPermission, ErrUnavailable, ErrConflict, ErrInvalid}

// Operation names used in Error.Op (documented there).
const (
	opGet    = "get"
	opStat   = "stat"
	opPut    = "put"
	opDelete = "delete"
	opList   = "list"
	opOpen   = "open"
	// opCheckCredentials is a credential check (Store.CheckCredentials).
	opCheckCredentials = "check-credentials"
)

// Error is the error type a Store returns. It names the operation and the
// secret, carries one of the error kinds, and may wrap a cause.
//
// Backends build causes from status codes and error codes, never from request
// or response bodies, so an Error never holds a secret value or a token.
type Error struct {
	// Op is the operation: "get" (Get, GetBatch), "stat", "put",
	// "delete", "list", "open" (a constructor or Open), "check-credentials"
	// (CheckCredentials) or "watch" (a Watcher); empty in a driver's
	// error.
	Op string
	// Name is the secret name (or list prefix) the operation was for.
	Name string
	// Kind is one of ErrNotFound, ErrPermission, ErrUnavailable,
	// ErrConflict, ErrInvalid, or nil for a context error.
	Kind error
	// Err is the underlying cause, or nil.
	Err error
}

// Error returns "secretstore: <op> <name>: <kind>: <cause>", or
// "<kind>: <cause>" for a driver's error, which has no Op.
func (e *Error) Error() string {
	var parts []string
	if e.Op != "" {
		s := "secretstore: " + e.Op
		if e.Name != "" {
			s += " " + strconv.Quote(e.Name)
		}
		parts = append(parts, s)
	}
	if e.Kind != nil {
		parts = append(parts, e.Kind.Error())
	}
	if e.Err != nil {
		parts = append(parts, e.Err.Error())
	}
	return strings.Join(parts, ": ")
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
	for _, k := range kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// isContextError reports whether err is a context's cancellation or deadline.
func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// wrapError turns what a driver returned for op on name into an *Error:
// the kind and cause of the driver's *Error, the context's error when ctx
// is done and the store gave no answer, and ErrUnavailable for anything
// unclassified.
func wrapError(ctx context.Context, op, name string, err error) error {
	var kind, cause error
	var se *Error
	switch {
	case errors.As(err, &se):
		kind, cause = se.Kind, se.Err
	default:
		kind, cause = KindOf(err), err
	}
	if kind != nil && KindOf(kind) != kind {
		kind, cause = nil, err // not one of ours: unclassified
	}
	if cause == kind {
		cause = nil
	}
	switch kind {
	case ErrNotFound, ErrPermission, ErrConflict, ErrInvalid:
		return &Error{Op: op, Name: name, Kind: kind, Err: cause}
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &Error{Op: op, Name: name, Err: ctxErr}
	}
	switch {
	case kind == nil && cause == nil:
		cause = errors.New("the store failed without saying why")
	case isContextError(cause):
		// A deadline of the driver's own, not the caller's.
		cause = errors.New("the store did not answer in time")
	}
	return &Error{Op: op, Name: name, Kind: ErrUnavailable, Err: cause}
}
