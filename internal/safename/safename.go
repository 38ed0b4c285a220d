// Package safename checks names that become a single file or directory name
// on disk: service secret names (the files under /open-horizon-secrets) and
// organisation ids (a store path segment).
package safename

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest accepted name in bytes: the usual file-name limit.
const MaxLen = 255

// Check returns nil when name is a single safe path element: non-empty, at
// most MaxLen bytes of valid UTF-8, without '/', '\\' or control characters,
// and neither "." nor "..". The error names the rule broken, not the name.
func Check(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name) > MaxLen:
		return fmt.Errorf("is longer than %d bytes", MaxLen)
	case !utf8.ValidString(name):
		return errors.New("is not valid UTF-8")
	case name == "." || name == "..":
		return fmt.Errorf("is %q", name)
	case strings.ContainsAny(name, `/\`):
		return errors.New("contains a slash or backslash")
	case strings.ContainsFunc(name, unicode.IsControl):
		return errors.New("contains a control character")
	}
	return nil
}
