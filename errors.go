package edgesecrets

import "errors"

// Error kinds, the module's one error model. Every error the module's
// packages return matches at most one of them with errors.Is (a package's
// own refinements match theirs too); a context error (canceled, deadline)
// matches the context error instead. A store backend's driver (package
// secretstore/driver) reports them in a secretstore.Error with Kind set.
var (
	// ErrNotFound: what was asked for does not exist: a secret (or its
	// latest version is deleted, or it is scheduled for deletion), an
	// instance, a record.
	ErrNotFound = errors.New("not found")
	// ErrPermission: the caller is refused (a store's HTTP 403, access
	// denied; an unauthenticated or unauthorised request).
	ErrPermission = errors.New("permission denied")
	// ErrUnavailable: a store, a hub or a state could not be reached or
	// could not serve the request: absent, sealed, network failure, 5xx,
	// throttled after retries. Trying again later may succeed.
	ErrUnavailable = errors.New("unavailable")
	// ErrConflict: a compare-and-set or create-only write lost.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: bad input: a bad secret name, bad data, a malformed
	// message or bad configuration. Trying again does not help.
	ErrInvalid = errors.New("invalid")
)

// kinds lists the error kinds in the order KindOf tries them.
var kinds = []error{ErrNotFound, ErrPermission, ErrUnavailable, ErrConflict, ErrInvalid}

// KindOf returns the error kind err matches, or nil if it matches none.
func KindOf(err error) error {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}
