package secretsapi

import (
	"strconv"

	"github.com/edgesecrets/edgesecrets/binding"
)

// Action is what a request does with a secret or a directory of secrets,
// as Authorize judges it.
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

// String returns the action's name: the verb of anax's refusals
// ("read", "list", "create", "remove"), or "check" for ActionExists.
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

// verb is the verb anax's refusals use for the action (secure_api.go
// errCheck calls at commit 2f3fa5a): as String, but "list" for
// ActionExists, which is the LIST method on a name (line 2299). hzn's add
// command, which checks existence first, rewrites " list " to " add "
// (cli/secrets_manager/secrets_manager.go line 210).
func (a Action) verb() string {
	if a == ActionExists {
		return ActionList.String()
	}
	return a.String()
}

// scope is where a secret (or directory) lies, seen from the caller.
type scope int

const (
	// scopeOrg: "<name>", an organisation secret.
	scopeOrg scope = iota + 1
	// scopeNode: "node/<node>/<name>", an organisation secret for one node.
	scopeNode
	// scopeOwnUser: "user/<caller>/<name>" and
	// "user/<caller>/node/<node>/<name>", the caller's own private secrets.
	scopeOwnUser
	// scopeOtherUser: "user/<someone else>/..." , another user's private
	// secrets.
	scopeOtherUser
)

// String returns "org", "node", "own user" or "other user".
func (s scope) String() string {
	switch s {
	case scopeOrg:
		return "org"
	case scopeNode:
		return "node"
	case scopeOwnUser:
		return "own user"
	case scopeOtherUser:
		return "other user"
	}
	return "scope(" + strconv.Itoa(int(s)) + ")"
}

// scopeOf returns the scope of a vault secret name (or of a directory: a
// name whose Secret is empty) as seen by c. The name is taken to be in c's
// organisation; Authorize refuses everything in another one.
func scopeOf(c Caller, n binding.VaultSecretName) scope {
	switch {
	case n.Node != "" && n.User == "":
		return scopeNode
	case n.User != "":
		if n.User == c.ID && c.Role != RoleNode {
			return scopeOwnUser
		}
		return scopeOtherUser
	}
	return scopeOrg
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
var policy = map[Role]map[scope]actions{
	RoleAdmin: {
		scopeOrg:       allow(ActionRead, ActionList, ActionExists, ActionWrite, ActionDelete),
		scopeNode:      allow(ActionRead, ActionList, ActionExists, ActionWrite, ActionDelete),
		scopeOwnUser:   allow(ActionRead, ActionList, ActionExists, ActionWrite, ActionDelete),
		scopeOtherUser: allow(ActionList, ActionExists, ActionDelete),
	},
	RoleUser: {
		scopeOrg:     allow(ActionList, ActionExists),
		scopeNode:    allow(ActionList, ActionExists),
		scopeOwnUser: allow(ActionRead, ActionList, ActionExists, ActionWrite, ActionDelete),
	},
	RoleNode: {},
}

// allowed reports whether the policy lets a caller with role do a on a
// secret of scope s. It is the whole authorization matrix; callers of
// another organisation than the secret's are refused before it is asked.
func allowed(role Role, s scope, a Action) bool {
	if a < ActionRead || a > ActionDelete {
		return false // not an action; and a negative shift would panic
	}
	return policy[role][s]&(1<<a) != 0
}

// Authorize reports whether c may do a on n, a secret or a directory (a
// name whose Secret is empty; the zero name is the organisation's own
// directory), in organisation org. It is the matrix the handler applies to
// every request (see the package documentation, "Authorization"): a
// caller acts in its own organisation only; an admin does everything on
// the organisation's, node and its own secrets and lists, checks and
// deletes other users'; a user lists and checks the organisation's and
// node secrets and does everything on its own; a node does nothing. An
// empty organisation, and an Action that is none of the constants, are
// refused.
//
// The matrix follows the Vault ACL policies open-horizon/vault-exchange-auth
// gives exchange users, so that embedders whose store is not Vault (an
// anax AgbotSecrets plugin over another backend, for one) apply the same
// rules rather than copy them. On Vault, Vault enforces its own ACLs for a
// caller logged in through auth/openhorizon (secretstore/vault's AsCaller).
func Authorize(c Caller, org string, n binding.VaultSecretName, a Action) bool {
	return org != "" && c.Org == org && allowed(c.Role, scopeOf(c, n), a)
}
