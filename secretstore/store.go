package secretstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Store is the portable interface to a secret store. Backends (memory, vault,
// awssm and out-of-tree ones) implement it; middleware wraps it.
//
// Names are slash-separated paths relative to the store's scope; every
// method rejects a name that fails ValidateName with ErrInvalid. All methods
// are safe for concurrent use and honour context cancellation.
type Store interface {
	// Get returns the current version of the named secret, or an error
	// matching ErrNotFound.
	Get(ctx context.Context, name string) (*Secret, error)
	// Stat returns the secret's metadata without reading its values.
	Stat(ctx context.Context, name string) (Metadata, error)
	// Put replaces the secret's data and labels (creating it if needed) and
	// reports whether anything changed. A write that would change nothing
	// returns false without calling the backend's write API. Secret.Version
	// and Secret.UpdatedAt are ignored; use PutOptions.IfVersion for
	// compare-and-set.
	Put(ctx context.Context, secret *Secret, opts PutOptions) (changed bool, err error)
	// Delete removes the secret. Deleting a missing secret is not an error.
	Delete(ctx context.Context, name string) error
	// List returns the names of all secrets whose name starts with prefix,
	// at any depth, sorted. The prefix is a plain string prefix: "db/p"
	// matches "db/password" and "db/pool/user". Paging is handled inside.
	// An empty prefix lists everything.
	List(ctx context.Context, prefix string) ([]string, error)
	// Close releases the store's resources.
	Close() error
}

// PutOptions modify a Put. The zero value is an unconditional full replace.
type PutOptions struct {
	// IfVersion makes the write conditional: it succeeds only if the
	// secret's current version equals IfVersion, else fails with ErrConflict.
	// Backends without versions reject it with ErrInvalid.
	IfVersion string
	// CreateOnly makes the write fail with ErrConflict if the secret exists.
	CreateOnly bool
}

// BatchGetter is implemented by stores that can read several secrets in one
// backend call (AWS BatchGetSecretValue). Use GetBatch rather than calling it
// directly.
type BatchGetter interface {
	// GetBatch returns the secrets that exist among names, keyed by name.
	// Missing names are absent from the map; they are not an error.
	GetBatch(ctx context.Context, names []string) (map[string]*Secret, error)
}

// CredentialChecker is implemented by stores that can tell whether the
// backend accepts the caller's own credentials (a Vault token, AWS keys),
// apart from any one secret. A caller that sees secrets refused or missing
// asks it before concluding they were revoked: when the store rejects the
// caller itself, every name reads Forbidden and nothing was learnt about
// any secret. Use CheckCredentials rather than calling it directly.
type CredentialChecker interface {
	// CheckCredentials returns nil when the store accepts the caller's
	// credentials; an error matching ErrPermission when it rejects them
	// (expired, revoked, or they can no longer be renewed or obtained
	// again), naming the cause and never the credential; an error matching
	// ErrUnavailable when it cannot tell (the store did not answer); or a
	// context error.
	CheckCredentials(ctx context.Context) error
}

// ErrNoCredentialCheck is returned by CheckCredentials for a store that is
// not a CredentialChecker. It matches errors.ErrUnsupported and none of the
// error kinds.
var ErrNoCredentialCheck = fmt.Errorf("secretstore: the store has no credential check: %w", errors.ErrUnsupported)

// CheckCredentials runs store's credential check (see CredentialChecker),
// or returns ErrNoCredentialCheck when store has none. Middleware of this
// package (Monitor, Reader) passes the check on to the store it wraps.
func CheckCredentials(ctx context.Context, store Store) error {
	if cc, ok := store.(CredentialChecker); ok {
		return cc.CheckCredentials(ctx)
	}
	return ErrNoCredentialCheck
}

// CredentialCheckError makes the result of a backend's credential check
// keep CredentialChecker's promise: nil, context errors and errors of kind
// ErrPermission or ErrUnavailable are returned unchanged; an error of any
// other kind (the store answered, but in a way that says nothing about the
// credentials) becomes one of kind ErrUnavailable with the same cause.
// Backends pass their check's error through it.
func CredentialCheckError(err error) error {
	switch KindOf(err) {
	case nil, ErrPermission, ErrUnavailable:
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		return NewError(e.Op, e.Name, ErrUnavailable, e.Err)
	}
	// Not an *Error: keep its text but not its kind.
	return NewError(OpCheckCredentials, "", ErrUnavailable, errors.New(err.Error()))
}

// GetBatch reads several secrets, in one call when store implements
// BatchGetter and one Get per name otherwise. Missing secrets are absent from
// the result; any other error aborts the read.
func GetBatch(ctx context.Context, store Store, names []string) (map[string]*Secret, error) {
	if bg, ok := store.(BatchGetter); ok {
		return bg.GetBatch(ctx, names)
	}
	out := make(map[string]*Secret, len(names))
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		s, err := store.Get(ctx, name)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[name] = s
	}
	return out, nil
}

// MaxNameLength is the longest secret name ValidateName accepts, in bytes.
const MaxNameLength = 512

// ValidateName checks a secret name: non-empty, at most MaxNameLength bytes
// of valid UTF-8 without control characters or backslashes, made of
// slash-separated segments none of which is empty, "." or "..". So a name
// can never be absolute or escape the scope it is joined to. Backends may
// accept fewer names (AWS, for one, allows a narrower character set).
func ValidateName(name string) error {
	switch {
	case name == "":
		return errors.New("name is empty")
	case len(name) > MaxNameLength:
		return fmt.Errorf("name is longer than %d bytes", MaxNameLength)
	case !utf8.ValidString(name):
		return errors.New("name is not valid UTF-8")
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == '\\' }):
		return errors.New("name contains a control character or backslash")
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch seg {
		case "":
			return errors.New("name has an empty path segment (leading, trailing or double slash)")
		case ".", "..":
			return fmt.Errorf("name has a %q path segment", seg)
		}
	}
	return nil
}

// CheckName returns an *Error of kind ErrInvalid for op when name fails
// ValidateName, and nil otherwise. Backends call it first in every method.
func CheckName(op, name string) error {
	if err := ValidateName(name); err != nil {
		return NewError(op, name, ErrInvalid, err)
	}
	return nil
}

// CheckPrefix validates a List prefix: empty, or a valid name optionally
// followed by one slash.
func CheckPrefix(prefix string) error {
	p := strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return nil
	}
	if err := ValidateName(p); err != nil {
		return NewError(OpList, prefix, ErrInvalid, err)
	}
	return nil
}

// CheckSecret validates a secret given to Put: its name, and non-empty data
// and label keys.
func CheckSecret(s *Secret) error {
	if s == nil {
		return NewError(OpPut, "", ErrInvalid, errors.New("secret is nil"))
	}
	if err := CheckName(OpPut, s.Name); err != nil {
		return err
	}
	if _, ok := s.Data[""]; ok {
		return NewError(OpPut, s.Name, ErrInvalid, errors.New("data has an empty key"))
	}
	if _, ok := s.Labels[""]; ok {
		return NewError(OpPut, s.Name, ErrInvalid, errors.New("labels have an empty key"))
	}
	return nil
}

// Scope maps names relative to a store's scope to backend paths and back.
// The zero Scope maps names to themselves.
type Scope string

// NewScope validates scope (empty, or a valid name; surrounding slashes are
// trimmed) and returns it.
func NewScope(scope string) (Scope, error) {
	s := strings.Trim(scope, "/")
	if s == "" {
		return "", nil
	}
	if err := ValidateName(s); err != nil {
		return "", fmt.Errorf("scope %q: %w", scope, err)
	}
	return Scope(s), nil
}

// Path returns the backend path of name. The name must already be valid.
func (s Scope) Path(name string) string {
	if s == "" {
		return name
	}
	return string(s) + "/" + name
}

// Rel returns the name of a backend path, and false when path lies outside the scope.
func (s Scope) Rel(path string) (string, bool) {
	if s == "" {
		return path, path != ""
	}
	rest, ok := strings.CutPrefix(path, string(s)+"/")
	return rest, ok && rest != ""
}
