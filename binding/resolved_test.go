package binding

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// TestNodeLevelResolution covers every scope a binding can name, with and
// without enableNodeLevelSecrets, for a node and without one, with the
// node-level secret present and absent: the candidate store names
// Report.Bindings gives, and what Validate reports when checking them for
// that node (as anax's VerifySingleVaultSecret: node-level first, then the
// name without the node, the fallback a warning at deploycheck).
func TestNodeLevelResolution(t *testing.T) {
	const org = testOrg
	cases := []struct {
		vault     string
		nodeLevel bool
		node      string
		stored    []string // store paths that exist
		want      []string // candidates, in order
		codes     []Code
	}{
		// Without enableNodeLevelSecrets every scope is its own one name.
		{vault: "db", node: "n1", stored: []string{"myorg/db", "myorg/node/n1/db"}, want: []string{"myorg/db"}},
		{vault: "db", node: "n1", want: []string{"myorg/db"}, codes: []Code{CodeVaultSecretMissing}},
		{vault: "user/alice/db", node: "n1", stored: []string{"myorg/user/alice/db"}, want: []string{"myorg/user/alice/db"}},
		{vault: "node/n1/db", node: "n2", stored: []string{"myorg/node/n1/db"}, want: []string{"myorg/node/n1/db"}},
		{vault: "user/alice/node/n1/db", stored: []string{"myorg/user/alice/node/n1/db"}, want: []string{"myorg/user/alice/node/n1/db"}},

		// Organisation scope with enableNodeLevelSecrets.
		{vault: "db", nodeLevel: true, node: "n1", stored: []string{"myorg/node/n1/db", "myorg/db"},
			want: []string{"myorg/node/n1/db", "myorg/db"}},
		{vault: "db", nodeLevel: true, node: "n1", stored: []string{"myorg/node/n1/db"},
			want: []string{"myorg/node/n1/db", "myorg/db"}},
		{vault: "db", nodeLevel: true, node: "n1", stored: []string{"myorg/db", "myorg/node/n2/db"},
			want: []string{"myorg/node/n1/db", "myorg/db"}, codes: []Code{CodeNodeSecretFallback}},
		{vault: "db", nodeLevel: true, node: "n1",
			want: []string{"myorg/node/n1/db", "myorg/db"}, codes: []Code{CodeVaultSecretMissing}},
		{vault: "db", nodeLevel: true, stored: []string{"myorg/db"}, want: []string{"myorg/db"}},
		{vault: "db", nodeLevel: true, stored: []string{"myorg/node/n1/db"}, want: []string{"myorg/db"}, codes: []Code{CodeVaultSecretMissing}},

		// User scope with enableNodeLevelSecrets.
		{vault: "user/alice/db", nodeLevel: true, node: "n1", stored: []string{"myorg/user/alice/node/n1/db"},
			want: []string{"myorg/user/alice/node/n1/db", "myorg/user/alice/db"}},
		{vault: "user/alice/db", nodeLevel: true, node: "n1", stored: []string{"myorg/user/alice/db", "myorg/node/n1/db"},
			want: []string{"myorg/user/alice/node/n1/db", "myorg/user/alice/db"}, codes: []Code{CodeNodeSecretFallback}},
		{vault: "user/alice/db", nodeLevel: true, stored: []string{"myorg/user/alice/db"}, want: []string{"myorg/user/alice/db"}},

		// A name that already names a node: that node's secret, then the
		// name without the node, whichever node is asked for.
		{vault: "node/n1/db", nodeLevel: true, node: "n2", stored: []string{"myorg/node/n1/db"},
			want: []string{"myorg/node/n1/db", "myorg/db"}},
		{vault: "node/n1/db", nodeLevel: true, stored: []string{"myorg/db"},
			want: []string{"myorg/node/n1/db", "myorg/db"}, codes: []Code{CodeNodeSecretFallback}},
		{vault: "user/alice/node/n1/db", nodeLevel: true, node: "n1", stored: []string{"myorg/user/alice/db"},
			want: []string{"myorg/user/alice/node/n1/db", "myorg/user/alice/db"}, codes: []Code{CodeNodeSecretFallback}},
		{vault: "user/alice/node/n1/db", nodeLevel: true, node: "n1",
			want: []string{"myorg/user/alice/node/n1/db", "myorg/user/alice/db"}, codes: []Code{CodeVaultSecretMissing}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/nodeLevel=%v/node=%q/stored=%v", c.vault, c.nodeLevel, c.node, c.stored), func(t *testing.T) {
			cat, err := NewCatalog(svc("com.example.a", "1.0.0", "token"))
			require.NoError(t, err)
			entry := sbEntry("com.example.a", bind("token", c.vault))
			entry.EnableNodeLevelSecrets = c.nodeLevel
			target := Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{entry}}

			// Resolution needs no store: the names are the same either way.
			rep, err := Validate(context.Background(), target, Options{Resolver: cat, Point: PointAgreement, Node: c.node})
			require.NoError(t, err)
			require.NoError(t, rep.Err())
			got, err := rep.Bindings(org, c.node)
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, c.want, got[0].Secrets["token"].StoreNames)

			// The check for this node, as deploycheck runs it.
			store := newStore(t, c.stored...)
			checker, err := NewStoreChecker(store.Store, org)
			require.NoError(t, err)
			rep, err = Validate(context.Background(), target, Options{Resolver: cat, Checker: checker, Node: c.node})
			require.NoError(t, err)
			assert.Equal(t, c.codes, nilIfEmpty(codes(rep)), "%v", rep.Problems)
			assert.LessOrEqual(t, store.statCalls(), int64(len(c.want)), "each candidate is asked about once at most")
			for _, p := range rep.Problems {
				assert.Equal(t, c.vault, p.VaultSecret)
				assert.Contains(t, p.Message, `"`+strings.TrimPrefix(c.want[0], org+"/")+`"`, "names the first candidate")
			}
		})
	}
}

func TestNodeSecretFallbackSeverity(t *testing.T) {
	cat, err := NewCatalog(svc("com.example.a", "1.0.0", "token"))
	require.NoError(t, err)
	entry := sbEntry("com.example.a", bind("token", "db"))
	entry.EnableNodeLevelSecrets = true
	checker, err := NewStoreChecker(newStore(t, "myorg/db").Store, testOrg)
	require.NoError(t, err)
	for point, want := range map[Point]string{PointDeployCheck: severityWarning, PointAgreement: severityNote} {
		rep, err := Validate(context.Background(), Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{entry}},
			Options{Resolver: cat, Checker: checker, Point: point, Node: "n1"})
		require.NoError(t, err)
		require.Len(t, rep.Problems, 1)
		assert.Equal(t, want, rep.Problems[0].Severity, point.name())
		assert.Equal(t, `Node-level vault secret "node/n1/db", bound to secret "token" of myorg/com.example.a_1.0.0_amd64 container main, does not exist; "db" is used instead.`, rep.Problems[0].Message)
	}
}

func TestReportBindingsErrors(t *testing.T) {
	web := agreement.ServiceRef{Org: testOrg, URL: "com.example.web", Arch: "amd64", Version: "1.0.0", Container: "web"}
	name := func(s string) VaultSecretName {
		n, err := ParseVaultSecretName(s)
		require.NoError(t, err)
		return n
	}
	ok := Report{Resolved: []ResolvedBinding{{Service: web, ServiceSecret: "pw", Format: agreement.FormatJSON, VaultSecret: name("db"), NodeLevel: true, Binding: 1}}}
	cases := []struct {
		name      string
		report    Report
		org, node string
		wantErr   string
	}{
		{name: "a report with errors", report: Report{Problems: []Problem{{Code: CodeSecretUnbound, Severity: severityError, Message: "unbound"}}},
			org: testOrg, wantErr: "error secret_unbound: unbound"},
		{name: "empty org", report: ok, org: "", wantErr: "organisation is empty"},
		{name: "org with a slash", report: ok, org: "a/b", wantErr: "organisation contains a slash"},
		{name: "node given as org/id", report: ok, org: testOrg, node: "myorg/n1", wantErr: "node id contains a slash"},
		{name: "one secret resolved twice differently", report: Report{Resolved: append(ok.Resolved,
			ResolvedBinding{Service: web, ServiceSecret: "pw", Format: agreement.FormatJSON, VaultSecret: name("db"), Binding: 2})},
			org: testOrg, node: "n1", wantErr: `secret "pw" of myorg/com.example.web_1.0.0_amd64 container web is resolved to store secrets ["myorg/node/n1/db" "myorg/db"] (format "json") and to ["myorg/db"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.report.Bindings(c.org, c.node)
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.ErrorContains(t, err, c.wantErr)
			assert.Nil(t, got)
		})
	}

	twice := Report{Resolved: append(ok.Resolved, ok.Resolved[0])}
	got, err := twice.Bindings(testOrg, "n1")
	require.NoError(t, err)
	assert.Equal(t, []ServiceBinding{{Service: web, Secrets: map[string]BoundSecret{
		"pw": {StoreNames: []string{"myorg/node/n1/db", "myorg/db"}, Format: agreement.FormatJSON},
	}}}, got, "the same binding twice is one")
}
