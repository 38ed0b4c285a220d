package binding

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// NameScope is the scope of a vault secret name.
type NameScope int

// Vault secret name scopes.
const (
	// ScopeOrg: "<name>", usable by every service of the organisation.
	ScopeOrg NameScope = iota
	// ScopeUser: "user/<user>/<name>", a user's private secret.
	ScopeUser
	// ScopeNode: "node/<node>/<name>", an organisation secret for one node.
	ScopeNode
	// ScopeUserNode: "user/<user>/node/<node>/<name>", a user's secret for one node.
	ScopeUserNode
)

// String returns "org", "user", "node" or "user+node".
func (s NameScope) String() string {
	switch s {
	case ScopeOrg:
		return "org"
	case ScopeUser:
		return "user"
	case ScopeNode:
		return "node"
	case ScopeUserNode:
		return "user+node"
	}
	return fmt.Sprintf("NameScope(%d)", int(s))
}

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
// "<org>/" in the store.
type VaultSecretName struct {
	// Scope says which of User and Node are set.
	Scope NameScope
	// User is the owning user for ScopeUser and ScopeUserNode.
	User string
	// Node is the node id for ScopeNode and ScopeUserNode.
	Node string
	// Secret is the secret's own name; at organisation scope it may
	// contain '/'.
	Secret string
}

// maxStoreNameLength is the longest name secretstore.ValidateName accepts.
const maxStoreNameLength = 512

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
// qualified store path); empty, "." or ".." segments; and anything
// secretstore.ValidateName refuses. The error says which rule was broken.
func ParseVaultSecretName(s string) (VaultSecretName, error) {
	var n VaultSecretName
	if s == "" {
		return n, errors.New("vault secret name is empty")
	}
	if len(s) > maxStoreNameLength {
		return n, fmt.Errorf("vault secret name is longer than %d bytes", maxStoreNameLength)
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
			n.Scope, n.Secret = ScopeUser, strings.Join(segs[2:], "/")
			return n, nil
		}
		if len(segs) < 5 {
			return n, errors.New(`vault secret name "user/<user>/node/..." needs a node and a secret name: user/<user>/node/<node>/<name>`)
		}
		n.Scope, n.Node, n.Secret = ScopeUserNode, segs[3], strings.Join(segs[4:], "/")
		return n, nil
	case nodeSegment:
		if len(segs) < 3 {
			return n, errors.New(`vault secret name "node/..." needs a node and a secret name: node/<node>/<name>`)
		}
		n.Scope, n.Node, n.Secret = ScopeNode, segs[1], strings.Join(segs[2:], "/")
		return n, nil
	}
	n.Scope, n.Secret = ScopeOrg, rest
	return n, nil
}

// String returns the name in the canonical form ParseVaultSecretName reads
// (without a leading '/').
func (n VaultSecretName) String() string {
	switch n.Scope {
	case ScopeUser:
		return userSegment + "/" + n.User + "/" + n.Secret
	case ScopeNode:
		return nodeSegment + "/" + n.Node + "/" + n.Secret
	case ScopeUserNode:
		return userSegment + "/" + n.User + "/" + nodeSegment + "/" + n.Node + "/" + n.Secret
	}
	return n.Secret
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
