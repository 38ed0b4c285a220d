package binding

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

func TestParseVaultSecretName(t *testing.T) {
	cases := []struct {
		in      string
		want    VaultSecretName
		canon   string
		wantErr string
	}{
		// org level
		{in: "db", want: VaultSecretName{Secret: "db"}, canon: "db"},
		{in: "team/db/password", want: VaultSecretName{Secret: "team/db/password"}, canon: "team/db/password"},
		{in: "/db", want: VaultSecretName{Secret: "db"}, canon: "db"},
		{in: "users/x", want: VaultSecretName{Secret: "users/x"}, canon: "users/x"},
		{in: "a/user/b", want: VaultSecretName{Secret: "a/user/b"}, canon: "a/user/b"},
		// user level
		{in: "user/alice/db", want: VaultSecretName{User: "alice", Secret: "db"}, canon: "user/alice/db"},
		{in: "/user/alice/a/b", want: VaultSecretName{User: "alice", Secret: "a/b"}, canon: "user/alice/a/b"},
		// node level
		{in: "node/n1/cert", want: VaultSecretName{Node: "n1", Secret: "cert"}, canon: "node/n1/cert"},
		{in: "user/alice/node/n1/cert", want: VaultSecretName{User: "alice", Node: "n1", Secret: "cert"}, canon: "user/alice/node/n1/cert"},
		// invalid
		{in: "", wantErr: "empty"},
		{in: "/", wantErr: "empty"},
		{in: "user", wantErr: "user/<user>/<name>"},
		{in: "user/alice", wantErr: "user/<user>/<name>"},
		{in: "user/alice/", wantErr: "empty path segment"},
		{in: "node", wantErr: "node/<node>/<name>"},
		{in: "node/n1", wantErr: "node/<node>/<name>"},
		{in: "user/alice/node", wantErr: "user/<user>/node/<node>/<name>"},
		{in: "user/alice/node/n1", wantErr: "user/<user>/node/<node>/<name>"},
		{in: "openhorizon", wantErr: "openhorizon/"},
		{in: "openhorizon/myorg/db", wantErr: "openhorizon/"},
		{in: "a/../b", wantErr: `".."`},
		{in: "..", wantErr: `".."`},
		{in: "a/./b", wantErr: `"."`},
		{in: "a//b", wantErr: "empty path segment"},
		{in: "//a", wantErr: "empty path segment"},
		{in: "a\\b", wantErr: "backslash"},
		{in: "a\x00b", wantErr: "control"},
		{in: strings.Repeat("x", 512+1), wantErr: "longer than"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseVaultSecretName(c.in)
			if c.wantErr != "" {
				assert.ErrorContains(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.canon, got.String())
			text, err := got.MarshalText()
			require.NoError(t, err)
			var back VaultSecretName
			require.NoError(t, back.UnmarshalText(text))
			assert.Equal(t, got, back)
		})
	}
}

func TestStorePath(t *testing.T) {
	n, err := ParseVaultSecretName("user/alice/node/n1/cert")
	require.NoError(t, err)
	p, err := n.StorePath("myorg")
	require.NoError(t, err)
	assert.Equal(t, "myorg/user/alice/node/n1/cert", p)

	for _, org := range []string{"", "a/b", "..", "a\nb"} {
		_, err := n.StorePath(org)
		assert.ErrorContains(t, err, "organisation", "org %q", org)
	}
	long := VaultSecretName{Secret: strings.Repeat("x", 512-2)}
	_, err = long.StorePath("myorg")
	assert.ErrorContains(t, err, "longer than")
	var bad VaultSecretName
	assert.Error(t, bad.UnmarshalText([]byte("user/x")))
}

func FuzzParseVaultSecretName(f *testing.F) {
	for _, s := range []string{"db", "user/a/b", "node/n/x", "user/a/node/n/x", "/x", "openhorizon/x", "a/../b", "", "user/a/node"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseVaultSecretName(s)
		if err != nil {
			return
		}
		// The canonical form parses back to the same name, and is a valid store name.
		back, err := ParseVaultSecretName(n.String())
		require.NoError(t, err, "canonical form of %q", s)
		require.Equal(t, n, back)
		require.NoError(t, secretstore.ValidateName(n.String()))
		if p, err := n.StorePath("org"); err == nil {
			require.True(t, strings.HasPrefix(p, "org/"))
			require.NoError(t, secretstore.ValidateName(p))
		}
	})
}
