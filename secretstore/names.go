package secretstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/safename"
)

// ValidateName checks a secret name: non-empty, at most 512 bytes
// of valid UTF-8 without control characters or backslashes, made of
// slash-separated segments none of which is empty, "." or "..". So a name
// can never be absolute or escape the scope it is joined to. Backends may
// accept fewer names (AWS, for one, allows a narrower character set). It
// is the library's one rule of a secret name, shared with the API paths
// that carry names (vault secret names of package binding, the agbot's
// secrets API).
func ValidateName(name string) error { return safename.CheckPath(name) }

// checkName returns an *Error of kind edgesecrets.ErrInvalid for op when name fails
// ValidateName.
func checkName(op, name string) error {
	if err := ValidateName(name); err != nil {
		return &Error{Op: op, Name: name, Kind: edgesecrets.ErrInvalid, Err: err}
	}
	return nil
}

// checkPrefix validates a List prefix: empty, or a valid name optionally
// followed by one slash.
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidateName(strings.TrimSuffix(prefix, "/")); err != nil {
		return &Error{Op: opList, Name: prefix, Kind: edgesecrets.ErrInvalid, Err: err}
	}
	return nil
}

// checkSecret validates a secret given to Put: its name, and non-empty data
// and label keys.
func checkSecret(s *Secret) error {
	invalid := func(name, problem string) error {
		return &Error{Op: opPut, Name: name, Kind: edgesecrets.ErrInvalid, Err: errors.New(problem)}
	}
	if s == nil {
		return invalid("", "secret is nil")
	}
	if err := checkName(opPut, s.Name); err != nil {
		return err
	}
	if _, ok := s.Data[""]; ok {
		return invalid(s.Name, "data has an empty key")
	}
	if _, ok := s.Labels[""]; ok {
		return invalid(s.Name, "labels have an empty key")
	}
	return nil
}

// cleanScope validates a scope (empty, or a valid name; surrounding
// slashes are trimmed) and returns it trimmed.
func cleanScope(scope string) (string, error) {
	s := strings.Trim(scope, "/")
	if s == "" {
		return "", nil
	}
	if err := ValidateName(s); err != nil {
		return "", fmt.Errorf("scope %q: %w", scope, err)
	}
	return s, nil
}
