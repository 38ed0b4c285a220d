package secretstore

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/edgesecrets/edgesecrets"
)

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
	// (CheckCredentials) or "watch" (the delivery engine's watcher);
	// empty in a driver's error.
	Op string
	// Name is the secret name (or list prefix) the operation was for.
	Name string
	// Kind is one of edgesecrets.ErrNotFound, edgesecrets.ErrPermission, edgesecrets.ErrUnavailable,
	// edgesecrets.ErrConflict, edgesecrets.ErrInvalid, or nil for a context error.
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

// isContextError reports whether err is a context's cancellation or deadline.
func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// wrapError turns what a driver returned for op on name into an *Error:
// the kind and cause of the driver's *Error, the context's error when ctx
// is done and the store gave no answer, and edgesecrets.ErrUnavailable for anything
// unclassified.
func wrapError(ctx context.Context, op, name string, err error) error {
	var kind, cause error
	var se *Error
	switch {
	case errors.As(err, &se):
		kind, cause = se.Kind, se.Err
	default:
		kind, cause = edgesecrets.KindOf(err), err
	}
	if kind != nil && edgesecrets.KindOf(kind) != kind { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
		kind, cause = nil, err // not one of ours: unclassified
	}
	if cause == kind { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
		cause = nil
	}
	switch kind {
	case edgesecrets.ErrNotFound, edgesecrets.ErrPermission, edgesecrets.ErrConflict, edgesecrets.ErrInvalid: //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
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
	return &Error{Op: op, Name: name, Kind: edgesecrets.ErrUnavailable, Err: cause}
}
