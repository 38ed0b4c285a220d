package binding

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

func TestReportServiceBindings(t *testing.T) {
	web := ServiceRef{Org: testOrg, URL: "com.example.multi", Arch: "amd64", Version: "1.0.0", Container: "web"}
	worker := web
	worker.Container = "worker"
	other := ServiceRef{Org: testOrg, URL: "com.example.a", Arch: "amd64", Version: "1.0.0", Container: "main"}
	name := func(s string) VaultSecretName {
		n, err := ParseVaultSecretName(s)
		require.NoError(t, err)
		return n
	}
	resolved := func(svc ServiceRef, secret, format, vault string) ResolvedBinding {
		return ResolvedBinding{Service: svc, ServiceSecret: secret, Format: format, VaultSecret: name(vault), Binding: 1}
	}
	warning := Problem{Code: CodeBindingUnused, Severity: SeverityWarning, Message: "unused"}
	failure := Problem{Code: CodeVaultSecretMissing, Severity: SeverityError, Message: "missing"}

	tests := []struct {
		name    string
		report  Report
		org     string
		want    []agreement.ServiceBinding
		wantErr []string // parts of the error; nil for success
	}{
		{
			name: "grouped by service container, in the order of Resolved, with store paths",
			report: Report{Resolved: []ResolvedBinding{
				resolved(worker, "pw", FormatJSON, "user/alice/db"),
				resolved(web, "pw", FormatJSON, "db"),
				resolved(other, "token", FormatJSON, "node/n1/tok"),
				resolved(web, "cert", FormatRaw, "user/alice/node/n1/cert"),
			}},
			org: testOrg,
			want: []agreement.ServiceBinding{
				{Service: worker, Secrets: map[string]agreement.BoundSecret{"pw": {VaultSecret: "myorg/user/alice/db", Format: FormatJSON}}},
				{Service: web, Secrets: map[string]agreement.BoundSecret{
					"pw":   {VaultSecret: "myorg/db", Format: FormatJSON},
					"cert": {VaultSecret: "myorg/user/alice/node/n1/cert", Format: FormatRaw},
				}},
				{Service: other, Secrets: map[string]agreement.BoundSecret{"token": {VaultSecret: "myorg/node/n1/tok", Format: FormatJSON}}},
			},
		},
		{
			name:   "warnings do not stop it",
			report: Report{Problems: []Problem{warning}, Resolved: []ResolvedBinding{resolved(web, "pw", FormatJSON, "db")}},
			org:    "other-org",
			want:   []agreement.ServiceBinding{{Service: web, Secrets: map[string]agreement.BoundSecret{"pw": {VaultSecret: "other-org/db", Format: FormatJSON}}}},
		},
		{
			name:   "the same binding twice is one",
			report: Report{Resolved: []ResolvedBinding{resolved(web, "pw", FormatJSON, "db"), resolved(web, "pw", FormatJSON, "/db")}},
			org:    testOrg,
			want:   []agreement.ServiceBinding{{Service: web, Secrets: map[string]agreement.BoundSecret{"pw": {VaultSecret: "myorg/db", Format: FormatJSON}}}},
		},
		{name: "nothing resolved", report: Report{}, org: testOrg, want: nil},
		{
			name:    "a report with errors",
			report:  Report{Problems: []Problem{warning, failure}, Resolved: []ResolvedBinding{resolved(web, "pw", FormatJSON, "db")}},
			org:     testOrg,
			wantErr: []string{"binding: error vault_secret_missing: missing"},
		},
		{
			name:    "one service secret bound to two store secrets",
			report:  Report{Resolved: []ResolvedBinding{resolved(web, "pw", FormatJSON, "db"), resolved(web, "pw", FormatJSON, "db2")}},
			org:     testOrg,
			wantErr: []string{`secret "pw" of myorg/com.example.multi_1.0.0_amd64 container web is resolved to store secret "myorg/db" (format "json") and to "myorg/db2" (format "json")`},
		},
		{
			name:    "one service secret in two formats",
			report:  Report{Resolved: []ResolvedBinding{resolved(web, "pw", FormatJSON, "db"), resolved(web, "pw", FormatRaw, "db")}},
			org:     testOrg,
			wantErr: []string{`(format "json") and to "myorg/db" (format "raw")`},
		},
		{name: "empty org", report: Report{Resolved: []ResolvedBinding{resolved(web, "pw", FormatJSON, "db")}}, org: "", wantErr: []string{"organisation is empty"}},
		{name: "org with a slash", report: Report{}, org: "a/b", wantErr: []string{"organisation contains a slash"}},
		{
			name:    "a name too long for a store path",
			report:  Report{Resolved: []ResolvedBinding{{Service: web, ServiceSecret: "pw", Format: FormatJSON, VaultSecret: VaultSecretName{Secret: strings.Repeat("x", secretstore.MaxNameLength)}}}},
			org:     testOrg,
			wantErr: []string{`secret "pw" of myorg/com.example.multi_1.0.0_amd64 container web`, "longer than 512 bytes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.report.ServiceBindings(tt.org)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, secretstore.ErrInvalid)
				for _, want := range tt.wantErr {
					assert.ErrorContains(t, err, want)
				}
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			for _, sb := range got {
				for _, b := range sb.Secrets {
					assert.True(t, b.Sent.IsZero(), "Sent is left to agreement.ReadProposal")
				}
			}
		})
	}
}

// TestReportServiceBindingsFromValidate turns a real validation of a
// two-container service into what the tracker accepts.
func TestReportServiceBindingsFromValidate(t *testing.T) {
	multi := with(svc("com.example.multi", "1.0.0", "pw"), func(d *ServiceDefinition) {
		d.Deployment = device("web", "worker")
		d.Secrets["cert"] = ServiceSecret{Format: FormatRaw}
	})
	cat, err := NewCatalog(multi)
	require.NoError(t, err)
	store := newStore(t, testOrg+"/db", testOrg+"/user/alice/db", testOrg+"/node/n1/cert")
	checker, err := NewStoreChecker(store.Store, testOrg)
	require.NoError(t, err)
	rep, err := Validate(context.Background(), Target{Services: top("com.example.multi", "1.0.0"), SecretBindings: []SecretBinding{
		with2(sbEntry("com.example.multi", bind("pw", "db"), bind("cert", "node/n1/cert")), func(e *SecretBinding) { e.ServiceContainer = "web" }),
		with2(sbEntry("com.example.multi", bind("pw", "user/alice/db")), func(e *SecretBinding) { e.ServiceContainer = "worker" }),
	}}, Options{Resolver: cat, Checker: checker})
	require.NoError(t, err)
	require.NoError(t, rep.Err())

	got, err := rep.ServiceBindings(testOrg)
	require.NoError(t, err)
	ref := func(container string) ServiceRef {
		return ServiceRef{Org: testOrg, URL: "com.example.multi", Arch: "amd64", Version: "1.0.0", Container: container}
	}
	assert.ElementsMatch(t, []agreement.ServiceBinding{
		{Service: ref("web"), Secrets: map[string]agreement.BoundSecret{
			"pw":   {VaultSecret: testOrg + "/db", Format: FormatJSON},
			"cert": {VaultSecret: testOrg + "/node/n1/cert", Format: FormatRaw},
		}},
		{Service: ref("worker"), Secrets: map[string]agreement.BoundSecret{"pw": {VaultSecret: testOrg + "/user/alice/db", Format: FormatJSON}}},
	}, got)
	assert.Zero(t, store.getCalls(), "no value is read")

	// Every store secret exists, so the agbot's read finds them all.
	p, sent, err := agreement.ReadProposal(context.Background(), store, "ag-1", got)
	require.NoError(t, err)
	assert.Len(t, p.Services, 2)
	assert.Len(t, sent, 2)
}
