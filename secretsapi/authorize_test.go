package secretsapi_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// Authorize over every role, scope and action, against the Vault ACL
// policies vault-exchange-auth gives exchange users (plugin/policy.go at
// commit e0df8dc): admins everything on the organisation's, node and their
// own secrets and metadata only (list, check, delete) on other users';
// users list and check the organisation's and node secrets and do
// everything on their own; nodes and other organisations nothing.
func TestAuthorize(t *testing.T) {
	admin := secretsapi.Caller{Org: "myorg", ID: "admin", Role: secretsapi.RoleAdmin}
	alice := secretsapi.Caller{Org: "myorg", ID: "alice", Role: secretsapi.RoleUser}
	node := secretsapi.Caller{Org: "myorg", ID: "alice", Role: secretsapi.RoleNode}
	all := []secretsapi.Action{secretsapi.ActionRead, secretsapi.ActionList, secretsapi.ActionExists, secretsapi.ActionWrite, secretsapi.ActionDelete}
	metadata := []secretsapi.Action{secretsapi.ActionList, secretsapi.ActionExists, secretsapi.ActionDelete}
	listCheck := []secretsapi.Action{secretsapi.ActionList, secretsapi.ActionExists}
	tests := []struct {
		name    string
		caller  secretsapi.Caller
		org     string
		secret  string // "" the organisation's directory; a trailing "/" a directory
		allowed []secretsapi.Action
	}{
		{"admin, org secret", admin, "myorg", "db/password", all},
		{"admin, org directory", admin, "myorg", "", all},
		{"admin, node secret", admin, "myorg", "node/n1/cert", all},
		{"admin, own secret", admin, "myorg", "user/admin/key", all},
		{"admin, own node secret", admin, "myorg", "user/admin/node/n1/key", all},
		{"admin, another user's secret", admin, "myorg", "user/alice/token", metadata},
		{"admin, another user's node secret", admin, "myorg", "user/alice/node/n1/key", metadata},
		{"admin, another user's directory", admin, "myorg", "user/alice/", metadata},
		{"admin, another organisation", admin, "otherorg", "db/password", nil},
		{"admin of no organisation", secretsapi.Caller{ID: "admin", Role: secretsapi.RoleAdmin}, "", "db/password", nil},
		{"user, org secret", alice, "myorg", "db/password", listCheck},
		{"user, org directory", alice, "myorg", "", listCheck},
		{"user, node secret", alice, "myorg", "node/n1/cert", listCheck},
		{"user, node directory", alice, "myorg", "node/n1/", listCheck},
		{"user, own secret", alice, "myorg", "user/alice/token", all},
		{"user, own node secret", alice, "myorg", "user/alice/node/n1/key", all},
		{"user, own directory", alice, "myorg", "user/alice/", all},
		{"user, another user's secret", alice, "myorg", "user/bob/token", nil},
		{"user, another user's directory", alice, "myorg", "user/bob/", nil},
		{"user, another organisation", alice, "otherorg", "user/alice/token", nil},
		{"node, org secret", node, "myorg", "db/password", nil},
		{"node, node secret", node, "myorg", "node/alice/cert", nil},
		{"node, user secret of its id", node, "myorg", "user/alice/token", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := vaultName(t, tt.secret)
			for _, a := range all {
				assert.Equal(t, slices.Contains(tt.allowed, a), secretsapi.Authorize(tt.caller, tt.org, n, a), "%s %s", a, tt.secret)
			}
			for _, other := range []secretsapi.Action{0, -1, secretsapi.ActionDelete + 1, 64} {
				assert.False(t, secretsapi.Authorize(tt.caller, tt.org, n, other), "%s is no action", other)
			}
		})
	}
}

// vaultName parses a vault secret name; a trailing "/" makes it a
// directory.
func vaultName(t *testing.T, s string) binding.VaultSecretName {
	t.Helper()
	if s == "" {
		return binding.VaultSecretName{}
	}
	dir := s[len(s)-1] == '/'
	if dir {
		s += "x"
	}
	n, err := binding.ParseVaultSecretName(s)
	require.NoError(t, err)
	if dir {
		n.Secret = ""
	}
	return n
}

// The actions print as the verbs of anax's refusals.
func TestActionString(t *testing.T) {
	for a, want := range map[secretsapi.Action]string{
		secretsapi.ActionRead: "read", secretsapi.ActionList: "list", secretsapi.ActionExists: "check",
		secretsapi.ActionWrite: "create", secretsapi.ActionDelete: "remove", secretsapi.Action(9): "Action(9)",
	} {
		assert.Equal(t, want, a.String())
	}
}
