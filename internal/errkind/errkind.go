// Package errkind makes a package's own error kinds that also match the
// module-wide kinds (edgesecrets.ErrInvalid, ErrPermission, ErrNotFound,
// ErrConflict, ErrUnavailable), so that code handling errors from several
// packages needs only those.
package errkind

// New returns a sentinel error with message msg that errors.Is matches
// as itself and as kind.
func New(msg string, kind error) error { return &refined{msg, kind} }

type refined struct {
	msg  string
	kind error
}

func (r *refined) Error() string { return r.msg }

// Is reports whether target is the module-wide kind r refines.
func (r *refined) Is(target error) bool { return target == r.kind }
