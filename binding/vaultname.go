package binding

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Reserved first segments of a vault secret name.
const (
	userSegment = "user"
	nodeSegment = "node"
	// fullyQualifiedPrefix starts a name that already includes the store
	// layout ("openhorizon/<org>/..."); bindings may not use it.
	fullyQualifiedPrefix = "openhorizon"
)

// VaultSecretName is a parsed vault secret name as written in a secret
// binding. It is relative to an organisation: StorePath places it under
// "<org>/" in the store. Its scope is which of User and Node are set:
//
//	neither   "<name>", usable by every service of the organisation
//	User      "user/<user>/<name>", a user's private secret
//	Node      "node/<node>/<name>", an organisation secret for one node
//	both      "user/<user>/node/<node>/<name>", a user's secret for one node
type VaultSecretName struct {
	// User is the owning user of a user secret; "" otherwise.
	User string
	// Node is the node id of a secret for one node; "" otherwise.
	Node string
	// Secret is the secret's own name; at organisation scope it may
	// contain '/'.
	Secret string
}

// ParseVaultSecretName parses a vault secret name with Open Horizon's rules
// (anax ParseVaultSecretName, extended with node scopes):
//
//	<name>                            organisation secret; may contain '/'
//	user/<user>/<name>                user secret
//	node/<node>/<name>                organisation secret for one node
//	user/<user>/node/<node>/<name>    user secret for one node
//
// As in anax, one leading '/' is ignored. Invalid: an empty name; "user",
// "user/<user>", "node", "node/<node>" and "user/<user>/node[/<node>]"
// without a secret name; a name starting with "openhorizon/" (the fully
// qualified store path); and anything secretstore.ValidateName refuses,
// the library's one rule of a secret name (empty, "." or ".." segments,
// over 512 bytes, control characters, backslashes). A name that parses may
// still be too long once placed under its organisation: StorePath tells.
// The error says which rule was broken.
func ParseVaultSecretName(s string) (VaultSecretName, error) {
	var n VaultSecretName
	if s == "" {
		return n, errors.New("vault secret name is empty")
	}
	rest := strings.TrimPrefix(s, "/")
	if err := secretstore.ValidateName(rest); err != nil {
		return n, fmt.Errorf("vault secret name: %w", err)
	}
	segs := strings.Split(rest, "/")
	switch segs[0] {
	case fullyQualifiedPrefix:
		return n, fmt.Errorf("vault secret name starts with %q: give the name relative to the organisation, without the store prefix", fullyQualifiedPrefix+"/")
	case userSegment:
		if len(segs) < 3 {
			return n, errors.New(`vault secret name "user/..." needs a user and a secret name: user/<user>/<name>`)
		}
		n.User = segs[1]
		if segs[2] != nodeSegment {
			n.Secret = strings.Join(segs[2:], "/")
			return n, nil
		}
		if len(segs) < 5 {
			return n, errors.New(`vault secret name "user/<user>/node/..." needs a node and a secret name: user/<user>/node/<node>/<name>`)
		}
		n.Node, n.Secret = segs[3], strings.Join(segs[4:], "/")
		return n, nil
	case nodeSegment:
		if len(segs) < 3 {
			return n, errors.New(`vault secret name "node/..." needs a node and a secret name: node/<node>/<name>`)
		}
		n.Node, n.Secret = segs[1], strings.Join(segs[2:], "/")
		return n, nil
	}
	n.Secret = rest
	return n, nil
}

// String returns the name in the canonical form ParseVaultSecretName reads
// (without a leading '/').
func (n VaultSecretName) String() string {
	out := n.Secret
	if n.Node != "" {
		out = nodeSegment + "/" + n.Node + "/" + out
	}
	if n.User != "" {
		out = userSegment + "/" + n.User + "/" + out
	}
	return out
}

// StorePath returns the secretstore name of n for organisation org:
// "<org>/<name>". org must be a single safe path element.
func (n VaultSecretName) StorePath(org string) (string, error) {
	if err := safename.Check(org); err != nil {
		return "", fmt.Errorf("organisation %s", err)
	}
	p := org + "/" + n.String()
	if err := secretstore.ValidateName(p); err != nil {
		return "", fmt.Errorf("store path of vault secret %q in organisation %q: %w", n.String(), org, err)
	}
	return p, nil
}

// MarshalText returns String().
func (n VaultSecretName) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

// UnmarshalText parses with ParseVaultSecretName.
func (n *VaultSecretName) UnmarshalText(b []byte) error {
	v, err := ParseVaultSecretName(string(b))
	if err != nil {
		return err
	}
	*n = v
	return nil
}
