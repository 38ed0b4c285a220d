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
		{in: "db", want: VaultSecretName{Scope: ScopeOrg, Secret: "db"}, canon: "db"},
		{in: "team/db/password", want: VaultSecretName{Scope: ScopeOrg, Secret: "team/db/password"}, canon: "team/db/password"},
		{in: "/db", want: VaultSecretName{Scope: ScopeOrg, Secret: "db"}, canon: "db"},
		{in: "users/x", want: VaultSecretName{Scope: ScopeOrg, Secret: "users/x"}, canon: "users/x"},
		{in: "a/user/b", want: VaultSecretName{Scope: ScopeOrg, Secret: "a/user/b"}, canon: "a/user/b"},
		// user level
		{in: "user/alice/db", want: VaultSecretName{Scope: ScopeUser, User: "alice", Secret: "db"}, canon: "user/alice/db"},
		{in: "/user/alice/a/b", want: VaultSecretName{Scope: ScopeUser, User: "alice", Secret: "a/b"}, canon: "user/alice/a/b"},
		// node level
		{in: "node/n1/cert", want: VaultSecretName{Scope: ScopeNode, Node: "n1", Secret: "cert"}, canon: "node/n1/cert"},
		{in: "user/alice/node/n1/cert", want: VaultSecretName{Scope: ScopeUserNode, User: "alice", Node: "n1", Secret: "cert"}, canon: "user/alice/node/n1/cert"},
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

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{"1": "1.0.0", "1.2": "1.2.0", "1.2.3": "1.2.3", "01.002.3": "1.2.3"} {
		v, err := ParseVersion(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, v.String())
	}
	for _, in := range []string{"", "1.2.3.4", "1..2", "a", "1.2.x", "-1", "1.2.3-beta", "1234567890", " 1"} {
		_, err := ParseVersion(in)
		assert.Error(t, err, in)
	}
	a, _ := ParseVersion("1.2")
	b, _ := ParseVersion("1.10")
	assert.Equal(t, -1, a.Compare(b))
	assert.Equal(t, 1, b.Compare(a))
	assert.Equal(t, 0, a.Compare(a))
}

func TestVersionRange(t *testing.T) {
	cases := []struct {
		in      string
		canon   string
		in1     []string // versions inside
		out     []string // versions outside
		wantErr string
	}{
		{in: "1.2.3", canon: "[1.2.3,INFINITY)", in1: []string{"1.2.3", "1.3", "99"}, out: []string{"1.2.2", "0.9"}},
		{in: "[1.0.0,2.0.0)", canon: "[1.0.0,2.0.0)", in1: []string{"1.0.0", "1.99.99"}, out: []string{"0.9.9", "2.0.0"}},
		{in: "(1.0.0,2.0.0]", canon: "(1.0.0,2.0.0]", in1: []string{"1.0.1", "2.0.0"}, out: []string{"1.0.0", "2.0.1"}},
		{in: "[1.0.0,INFINITY)", canon: "[1.0.0,INFINITY)", in1: []string{"1.0.0", "1000"}, out: []string{"0.1"}},
		{in: "(1,INFINITY]", canon: "(1.0.0,INFINITY)", in1: []string{"1.0.1"}, out: []string{"1"}},
		{in: "[1.5,1.5]", canon: "[1.5.0,1.5.0]", in1: []string{"1.5.0"}, out: []string{"1.5.1", "1.4.9"}},
		{in: "", wantErr: "empty"},
		{in: "[1.0.0, 2.0.0)", wantErr: "whitespace"},
		{in: "[1.0.0,2.0.0", wantErr: "end with"},
		{in: "[1.0.0)", wantErr: "two bounds"},
		{in: "[1,2,3)", wantErr: "two bounds"},
		{in: "[x,2)", wantErr: "lower bound"},
		{in: "[1,y)", wantErr: "upper bound"},
		{in: "[INFINITY,2)", wantErr: "lower bound"},
		{in: "[2.0.0,1.0.0)", wantErr: "no version"},
		{in: "[1.0.0,1.0.0)", wantErr: "no version"},
		{in: "(1.0.0,1.0.0]", wantErr: "no version"},
		{in: "abc", wantErr: "neither a version nor an interval"},
		{in: "[", wantErr: "end with"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			r, err := ParseVersionRange(c.in)
			if c.wantErr != "" {
				assert.ErrorContains(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.canon, r.String())
			for _, s := range c.in1 {
				v, err := ParseVersion(s)
				require.NoError(t, err)
				assert.True(t, r.Contains(v), "%s in %s", s, c.in)
			}
			for _, s := range c.out {
				v, err := ParseVersion(s)
				require.NoError(t, err)
				assert.False(t, r.Contains(v), "%s not in %s", s, c.in)
			}
		})
	}
	var anyRange VersionRange
	v0, _ := ParseVersion("0")
	assert.True(t, anyRange.Contains(v0), "the zero range holds every version")
	assert.Equal(t, "[0.0.0,INFINITY)", anyRange.String())
}

func FuzzParseVersionRange(f *testing.F) {
	for _, s := range []string{"1.2.3", "[1.0.0,2.0.0)", "(1,INFINITY]", "[1,1]", "", "[,)", "(((", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseVersionRange(s)
		if err != nil {
			return
		}
		back, err := ParseVersionRange(r.String())
		require.NoError(t, err)
		require.Equal(t, r, back)
		require.True(t, r.Contains(r.lo) || r.loOpen, "a non-empty range")
	})
}

func TestArch(t *testing.T) {
	assert.True(t, ArchMatches("", "arm64"))
	assert.True(t, ArchMatches("*", "arm64"))
	assert.True(t, ArchMatches("arm64", "arm64"))
	assert.False(t, ArchMatches("amd64", "arm64"))
	for _, ok := range []string{"", "*", "amd64", "ppc64le", "s390x", "arm_v7", "x86-64", "a.b"} {
		assert.NoError(t, checkArch(ok), ok)
	}
	for _, bad := range []string{"amd 64", "amd64,arm64", "**", "arm/v7", strings.Repeat("a", 65), "amd64\n"} {
		assert.Error(t, checkArch(bad), bad)
	}
}
