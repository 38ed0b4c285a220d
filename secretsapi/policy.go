package secretsapi

import (
	"strconv"

	"github.com/edgesecrets/edgesecrets/binding"
)

// Action is what a request does with a secret or a directory of secrets.
type Action int

const (
	// ActionRead reads a secret's value (GET).
	ActionRead Action = iota + 1
	// ActionList lists the names in a directory (LIST on a directory, and
	// each name of LIST /org/{org}/allsecrets).
	ActionList
	// ActionExists checks whether a secret exists (LIST on a name, and the
	// design route GET /secrets/{name}).
	ActionExists
	// ActionWrite creates or replaces a secret (PUT, POST).
	ActionWrite
	// ActionDelete deletes a secret (DELETE).
	ActionDelete
)

// String returns the verb used in anax's refusals ("read", "list",
// "create", "remove"), or "check" for ActionExists.
func (a Action) String() string {
	switch a {
	case ActionRead:
		return "read"
	case ActionList:
		return "list"
	case ActionExists:
		return "check"
	case ActionWrite:
		return "create"
	case ActionDelete:
		return "remove"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Scope is where a secret (or directory) lies, seen from the caller.
type Scope int

const (
	// ScopeOrg: "<name>", an organisation secret.
	ScopeOrg Scope = iota + 1
	// ScopeNode: "node/<node>/<name>", an organisation secret for one node.
	ScopeNode
	// ScopeOwnUser: "user/<caller>/<name>" and
	// "user/<caller>/node/<node>/<name>", the caller's own private secrets.
	ScopeOwnUser
	// ScopeOtherUser: "user/<someone else>/..." , another user's private
	// secrets.
	ScopeOtherUser
)

// String returns "org", "node", "own user" or "other user".
func (s Scope) String() string {
	switch s {
	case ScopeOrg:
		return "org"
	case ScopeNode:
		return "node"
	case ScopeOwnUser:
		return "own user"
	case ScopeOtherUser:
		return "other user"
	}
	return "Scope(" + strconv.Itoa(int(s)) + ")"
}

// ScopeOf returns the scope of a vault secret name (or of a directory: a
// name whose Secret is empty) as seen by c. The name is taken to be in c's
// organisation; Allowed refuses everything in another one.
func ScopeOf(c Caller, n binding.VaultSecretName) Scope {
	switch {
	case n.Node != "" && n.User == "":
		return ScopeNode
	case n.User != "":
		if n.User == c.ID && c.Role != RoleNode {
			return ScopeOwnUser
		}
		return ScopeOtherUser
	}
	return ScopeOrg
}

// actions is a set of actions.
type actions uint8

func allow(as ...Action) actions {
	var s actions
	for _, a := range as {
		s |= 1 << a
	}
	return s
}

// policy is the authorization matrix: role × scope → the actions allowed.
// Anything not listed is refused. It follows the Vault ACL policies that
// open-horizon/vault-exchange-auth gives exchange users (plugin/policy.go,
// commit e0df8dc2df57d3c01fb8c9dfb59deb8be4f4c0cd, lines 15-29 and
// getPolicyString, lines 157-174); data/ paths carry read and write,
// metadata/ paths list, existence and delete:
//
//   - An admin has create, update, read on data/<org>/* and list, read,
//     delete on metadata/<org>/* (ADMIN_ORG_WIDE_POLICY1, 2), its own
//     data/<org>/user/<admin>/* (USER_PRIVATE_POLICY1), and a deny on
//     data/<org>/user/* (USER_PRIVATE_DENY_POLICY1): everything on
//     organisation, node and its own secrets; on other users' secrets no
//     read or write, but list, existence and delete, since the metadata
//     grant is not denied for admins.
//   - A user has list, read on metadata/<org>/* (NON_ADMIN_ORG_WIDE_POLICY),
//     deny on data/ and metadata/<org>/user/* (USER_PRIVATE_DENY_POLICY1,
//     2), and everything on its own user/<user>/ (USER_PRIVATE_POLICY1-3):
//     list and existence of organisation and node secrets, everything on
//     its own, nothing on other users'.
//   - The plugin has no policy for nodes (anax's secrets routes take user
//     credentials only, secure_api.go line 1088): nodes get nothing.
var policy = map[Role]map[Scope]actions{
	RoleAdmin: {
		ScopeOrg:       allow(ActionRead, ActionList, ActionExists, ActionWrite, ActionDelete),
		ScopeNode:      allow(ActionRead, ActionList, ActionExists, ActionWrite, ActionDelete),
		ScopeOwnUser:   allow(ActionRead, ActionList, ActionExists, ActionWrite, ActionDelete),
		ScopeOtherUser: allow(ActionList, ActionExists, ActionDelete),
	},
	RoleUser: {
		ScopeOrg:     allow(ActionList, ActionExists),
		ScopeNode:    allow(ActionList, ActionExists),
		ScopeOwnUser: allow(ActionRead, ActionList, ActionExists, ActionWrite, ActionDelete),
	},
	RoleNode: {},
}

// Allowed reports whether the policy lets a caller with role do action on
// a secret of scope. It is the whole authorization matrix; callers of
// another organisation than the secret's are refused before it is asked.
func Allowed(role Role, scope Scope, action Action) bool {
	return policy[role][scope]&(1<<action) != 0
}

// authorize reports whether c may do action on name (or directory) in org.
func authorize(c Caller, org string, n binding.VaultSecretName, action Action) bool {
	return c.Org == org && Allowed(c.Role, ScopeOf(c, n), action)
}
