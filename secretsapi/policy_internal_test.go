package secretsapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/binding"
)

// TestPolicyMatrix prints the whole authorization matrix and compares it
// with the one the package documentation shows.
func TestPolicyMatrix(t *testing.T) {
	actions := []Action{ActionRead, ActionList, ActionExists, ActionWrite, ActionDelete}
	var b strings.Builder
	for _, role := range []Role{RoleAdmin, RoleUser, RoleNode} {
		for _, s := range []scope{scopeOrg, scopeNode, scopeOwnUser, scopeOtherUser} {
			var names []string
			for _, a := range actions {
				if allowed(role, s, a) {
					names = append(names, a.String())
				}
			}
			fmt.Fprintf(&b, "%-5s %-10s %v\n", role, s, names)
		}
	}
	assert.Equal(t, `admin org        [read list check create remove]
admin node       [read list check create remove]
admin own user   [read list check create remove]
admin other user [list check remove]
user  org        [list check]
user  node       [list check]
user  own user   [read list check create remove]
user  other user []
node  org        []
node  node       []
node  own user   []
node  other user []
`, b.String())
}

// TestScopeOf checks which scope a name lies in, seen from the caller.
func TestScopeOf(t *testing.T) {
	alice := Caller{Org: "myorg", ID: "alice", Role: RoleUser}
	node := Caller{Org: "myorg", ID: "alice", Role: RoleNode}
	tests := []struct {
		caller Caller
		name   string
		want   scope
	}{
		{alice, "db/password", scopeOrg},
		{alice, "node/n1/cert", scopeNode},
		{alice, "user/alice/key", scopeOwnUser},
		{alice, "user/alice/node/n1/key", scopeOwnUser},
		{alice, "user/bob/key", scopeOtherUser},
		{alice, "user/bob/node/n1/key", scopeOtherUser},
		{node, "user/alice/key", scopeOtherUser}, // a node has no user secrets
	}
	for _, tt := range tests {
		n, err := binding.ParseVaultSecretName(tt.name)
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.want, scopeOf(tt.caller, n), "%s as %s", tt.name, tt.caller)
	}
}
