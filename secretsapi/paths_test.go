package secretsapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/binding"
)

// The routes of anax's router (agreementbot/secure_api.go lines 195-203,
// commit 2f3fa5a506d6565fa68858b7963450567ddda114), and their names.
func TestParseOrgPath(t *testing.T) {
	tests := []struct {
		path    string
		want    target
		prefix  string // storePrefix of a directory
		wantErr string // "route" for errNoRoute
	}{
		{path: "/org/myorg/secrets", want: target{org: "myorg", dir: true}, prefix: "myorg/"},
		{path: "/org/myorg/allsecrets", want: target{org: "myorg", all: true, dir: true}, prefix: "myorg/"},
		{path: "/org/myorg/secrets/user/alice", want: target{org: "myorg", dir: true, name: binding.VaultSecretName{User: "alice"}}, prefix: "myorg/user/alice/"},
		{path: "/org/myorg/secrets/node/n1", want: target{org: "myorg", dir: true, name: binding.VaultSecretName{Node: "n1"}}, prefix: "myorg/node/n1/"},
		{path: "/org/myorg/secrets/user/alice/node/n1", want: target{org: "myorg", dir: true, name: binding.VaultSecretName{User: "alice", Node: "n1"}}, prefix: "myorg/user/alice/node/n1/"},
		{path: "/org/myorg/secrets/db/password", want: target{org: "myorg", name: binding.VaultSecretName{Secret: "db/password"}}},
		{path: "/org/myorg/secrets/user/alice/db", want: target{org: "myorg", name: binding.VaultSecretName{User: "alice", Secret: "db"}}},
		{path: "/org/myorg/secrets/node/n1/db", want: target{org: "myorg", name: binding.VaultSecretName{Node: "n1", Secret: "db"}}},
		{path: "/org/myorg/secrets/user/alice/node/n1/db", want: target{org: "myorg", name: binding.VaultSecretName{User: "alice", Node: "n1", Secret: "db"}}},
		{path: "/org/myorg/secrets/user/alice/nodes/n1", want: target{org: "myorg", name: binding.VaultSecretName{User: "alice", Secret: "nodes/n1"}}},
		{path: "/org/myorg/secrets/user", wantErr: "needs a user"},
		{path: "/org/myorg/secrets/node", wantErr: "needs a node"},
		{path: "/org/myorg/secrets/user/alice/node", wantErr: "needs a node"},
		{path: "/org/myorg/secrets/openhorizon/x", wantErr: "openhorizon/"},
		{path: "/org/myorg/secrets/a/../b", wantErr: "vault secret name"},
		{path: "/org/myorg/secrets/", wantErr: "empty"},
		{path: "/org/../secrets/db", wantErr: "organisation"},
		{path: "/org//secrets/db", wantErr: "organisation"},
		{path: "/org/myorg/allsecrets/x", wantErr: "route"},
		{path: "/org/myorg", wantErr: "route"},
		{path: "/org/myorg/secretsX", wantErr: "route"},
		{path: "/orgs/myorg/secrets", wantErr: "route"},
		// One rule with the store: a name that parses makes a store name
		// under its organisation (issue 23 item 8, FuzzParseOrgPath).
		{path: "/org/0/secrets/" + strings.Repeat("0", 511), wantErr: "longer than 512 bytes"},
		{path: "/org/0/secrets/" + strings.Repeat("0", 510), want: target{org: "0", name: binding.VaultSecretName{Secret: strings.Repeat("0", 510)}}},
		{path: "/org/myorg/secrets/user/" + strings.Repeat("u", 500), wantErr: "longer than 512 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := parseOrgPath(tt.path)
			switch {
			case tt.wantErr == "route":
				assert.ErrorIs(t, err, errNoRoute)
			case tt.wantErr != "":
				require.Error(t, err)
				assert.False(t, errors.Is(err, errNoRoute))
				assert.Contains(t, err.Error(), tt.wantErr)
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				if got.dir {
					assert.Equal(t, tt.prefix, got.storePrefix())
				}
			}
		})
	}
}

// Every refusal the parser makes is sent to the client, which may print it
// through a printf (hzn): none holds a percent sign, whatever the path.
func TestParseOrgPathRefusalsHaveNoPercent(t *testing.T) {
	long := strings.Repeat("%", 253) // user/<long>/<long> is 512 bytes
	for _, p := range []string{
		"/org/%/secrets/" + strings.Repeat("x", 511),              // store path too long
		"/org/o%/secrets/user/" + long + "/" + long,               // store path too long, quoting the name
		"/org/o%25/secrets/user/" + long + "/node/" + long + "/x", // the same, user and node
		"/org/o/secrets/user/%" + strings.Repeat("u", 600),        // directory, too long
		"/org/%/secrets/%/../x", "/org/%/secrets/%//x", "/org/%/secrets/user", "/org/%/secrets/user/%/node", "/org/%/secrets/node",
		"/org/%/secrets/openhorizon/%", "/org/%/secrets/%\x00", "/org/%\\/secrets/x", "/org/" + strings.Repeat("%", 256) + "/secrets/x",
		"/org/%/secrets/", "/org/%/secrets/\xff%",
	} {
		_, err := parseOrgPath(p)
		require.Error(t, err, "%.60q", p)
		assert.False(t, errors.Is(err, errNoRoute), "%.60q", p)
		assert.NotContains(t, err.Error(), "%", "%.60q", p)
	}
	// The error unwraps to the rule broken.
	_, err := parseOrgPath("/org/o%/secrets/user/" + long + "/" + long)
	var re refusalError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, errors.Unwrap(err).Error(), "%", "the error it stands for quotes the name")
}

// FuzzParseOrgPath: a path parses to a name binding accepts, to a
// directory whose prefix is a name's, or to an error without a percent
// sign; never to a store path outside its organisation.
func FuzzParseOrgPath(f *testing.F) {
	for _, p := range []string{"/org/o/secrets", "/org/o/allsecrets", "/org/o/secrets/user/u", "/org/o/secrets/user/u/node/n/x",
		"/org/o/secrets/node/n", "/org/o/secrets/../x", "/org/o/secrets//x", "/org/o/secrets/user//x", "/org/o/secrets/x/", "/org/./secrets/x",
		"/org/%/secrets/%/../x", "/org/o%/secrets/user/" + strings.Repeat("%", 300) + "/x" + strings.Repeat("%", 300)} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := parseOrgPath(p)
		if err != nil {
			assert.NotContains(t, err.Error(), "%", "a refusal is printed through a printf")
			return
		}
		if got.dir {
			prefix := got.storePrefix()
			require.True(t, strings.HasPrefix(prefix, got.org+"/"))
			if got.name.String() != "" {
				n, err := binding.ParseVaultSecretName(got.name.String() + probe)
				require.NoError(t, err, "a directory is a name's prefix")
				assert.Equal(t, [2]string{got.name.User, got.name.Node}, [2]string{n.User, n.Node})
			}
			return
		}
		path, err := got.name.StorePath(got.org)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(path, got.org+"/"))
		back, err := binding.ParseVaultSecretName(got.name.String())
		require.NoError(t, err)
		assert.Equal(t, got.name, back)
	})
}
