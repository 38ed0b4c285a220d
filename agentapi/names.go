package agentapi

import (
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/safename"
)

// checkSecretName checks a service secret name: the rule of
// agreement.CheckSecretName (internal/safename), with an error that matches
// edgesecrets.ErrInvalid.
func checkSecretName(name string) error { return checkElement("secret name", name) }

// checkElement checks that name can be used as a file or directory name
// under the store's root: a single path element that is not empty, "." or
// "..", at most 255 bytes of valid UTF-8, without a slash, backslash, NUL or
// other control character (internal/safename, the rule of
// agreement.CheckSecretName). The error matches edgesecrets.ErrInvalid and
// says which kind of name (what) is wrong and why (the name itself is
// quoted, escaped).
func checkElement(what, name string) error {
	if problem := safename.Check(name); problem != nil {
		return fmt.Errorf("%s %s: %w: %w", what, quoteName(name), edgesecrets.ErrInvalid, problem)
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
		return fmt.Errorf("instance id %s: %w: contains a colon, which an HTTP Basic user id cannot", quoteName(id), edgesecrets.ErrInvalid)
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
