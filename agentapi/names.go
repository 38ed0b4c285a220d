package agentapi

import (
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// MaxNameLength is the longest service secret name or instance id CheckName
// accepts, in bytes: the usual file-name limit.
const MaxNameLength = safename.MaxLen

// CheckName checks that name can be used as a file or directory name under
// the store's root: a single path element that is not empty, "." or "..",
// at most MaxNameLength bytes of valid UTF-8, without a slash, backslash,
// NUL or other control character. Service secret names and instance ids
// must pass it. The error matches secretstore.ErrInvalid and names what is
// wrong (the name itself is quoted, escaped).
func CheckName(name string) error { return checkElement("name", name) }

// checkSecretName checks a service secret name.
func checkSecretName(name string) error { return checkElement("secret name", name) }

// checkElement returns an error saying which kind of name (what) is wrong
// and why.
func checkElement(what, name string) error {
	if problem := safename.Check(name); problem != nil {
		return fmt.Errorf("%s %s: %w: %w", what, quoteName(name), secretstore.ErrInvalid, problem)
	}
	return nil
}

// checkInstanceID checks an instance id: a valid name (it names
// directories) without a colon (it is the HTTP Basic user id).
func checkInstanceID(id string) error {
	if err := checkElement("instance id", id); err != nil {
		return err
	}
	if strings.Contains(id, ":") {
		return fmt.Errorf("instance id %s: %w: contains a colon, which an HTTP Basic user id cannot", quoteName(id), secretstore.ErrInvalid)
	}
	return nil
}

// quoteName quotes a name for an error or log line, cut to a readable length.
func quoteName(name string) string {
	const max = 64
	if len(name) > max {
		return fmt.Sprintf("%q...", name[:max])
	}
	return fmt.Sprintf("%q", name)
}
