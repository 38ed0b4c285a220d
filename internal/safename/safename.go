// Package safename holds the one definition of a valid name that the
// library's parts share: CheckPath is the rule of every secret name (a
// store name, a vault secret name, the name in an API path; package
// secretstore's ValidateName is CheckPath), and Check the rule of a name
// that becomes a single file or directory name on disk or a single path
// segment (service secret names under /open-horizon-secrets, organisation
// and node ids): a CheckPath name without slashes, of at most MaxLen bytes.
package safename

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest accepted single element in bytes: the usual
// file-name limit.
const MaxLen = 255

// MaxPathLen is the longest accepted secret name in bytes, as a store
// holds it (with its organisation and scope): AWS Secrets Manager's limit
// on a secret's name.
const MaxPathLen = 512

// CheckPath returns nil when name is a valid secret name: non-empty, at
// most MaxPathLen bytes of valid UTF-8 without control characters or
// backslashes, made of slash-separated segments none of which is empty,
// "." or "..". So a name can never be absolute or escape the scope it is
// joined to. The error names the rule broken, not the name.
func CheckPath(name string) error {
	switch {
	case name == "":
		return errors.New("name is empty")
	case len(name) > MaxPathLen:
		return fmt.Errorf("name is longer than %d bytes", MaxPathLen)
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

// Check returns nil when name is a single safe path element: a name
// CheckPath accepts of at most MaxLen bytes, without '/', and neither "."
// nor "..". The error names the rule broken, not the name.
func Check(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name) > MaxLen:
		return fmt.Errorf("is longer than %d bytes", MaxLen)
	case name == "." || name == "..":
		return fmt.Errorf("is %q", name)
	case strings.ContainsAny(name, `/\`):
		return errors.New("contains a slash or backslash")
	}
	if err := CheckPath(name); err != nil {
		return fmt.Errorf("is not a valid name: %w", err)
	}
	return nil
}
