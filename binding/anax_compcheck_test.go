package binding

// anax's own tests of secret bindings, re-expressed as tables over this
// package: open-horizon/anax compcheck/secretbinding_check_test.go
// (Test_ParseVaultSecretName_good/_bad, Test_UpdateIndexMap,
// Test_CombineIndexMap, Test_GroupSecretBindings) and the cases of
// cli/exchange/business_test.go Test_ValidateSecretBindingForSvcAndDep,
// which drive compcheck.ValidateSecretBindingForSingleService, at commit
// 2f3fa5a506d6565fa68858b7963450567ddda114. Where we deliberately differ,
// the case's "differs" says how and why.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
)

// TestAnaxParseVaultSecretName: Test_ParseVaultSecretName_good and _bad,
// then names anax's ParseVaultSecretName code accepts that we refuse.
func TestAnaxParseVaultSecretName(t *testing.T) {
	cases := []struct {
		in                 string
		user, node, secret string
		wantErr            string
		differs            string
	}{
		{in: "mysecret/extra", secret: "mysecret/extra"},
		{in: "/mysecret/extra", secret: "mysecret/extra"},
		{in: "my/secret%*/2", secret: "my/secret%*/2"},
		{in: "user/myusername/mysecret/extra", user: "myusername", secret: "mysecret/extra"},
		{in: "user/myusername/myorgagain/extra/mysecret", user: "myusername", secret: "myorgagain/extra/mysecret"},
		{in: "/user/myusername/mysecret/extra", user: "myusername", secret: "mysecret/extra"},
		{in: "node/mynodename/mysecret", node: "mynodename", secret: "mysecret"},
		{in: "node/mynodename/mysecret/extra", node: "mynodename", secret: "mysecret/extra"},
		{in: "/node/mynodename/myorgagain/extra/mysecret", node: "mynodename", secret: "myorgagain/extra/mysecret"},
		{in: "/user/myusername/node/mynodename/mysecret", user: "myusername", node: "mynodename", secret: "mysecret"},
		{in: "user/myusername/node/mynodename/mysecret/extra", user: "myusername", node: "mynodename", secret: "mysecret/extra"},
		{in: "/user/myusername/node/mynodename/myorgagain/extra/mysecret", user: "myusername", node: "mynodename", secret: "myorgagain/extra/mysecret"},
		{in: "openhorizon/myorg/mysecret", wantErr: `starts with "openhorizon/"`},
		{in: "openhorizon/myorg/user/myusername/mysecret", wantErr: `starts with "openhorizon/"`},
		// anax's code (not its tests) accepts these; each is ambiguous or
		// names no store secret, so we refuse it with a reason.
		{in: "user/myusername/node", wantErr: "user/<user>/node/<node>/<name>",
			differs: `anax reads a user secret named "node"; we read the start of a node-level name`},
		{in: "user/myusername/node/mynodename", wantErr: "user/<user>/node/<node>/<name>",
			differs: `anax reads a user secret named "node/mynodename"`},
		{in: "user/myusername/", wantErr: "empty path segment", differs: "anax reads a user secret with an empty name"},
		{in: "my//secret", wantErr: "empty path segment", differs: "anax passes the empty segment on to Vault"},
		{in: "my/../secret", wantErr: `".."`, differs: "anax passes the \"..\" segment on to Vault's URL"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			n, err := ParseVaultSecretName(c.in)
			if c.wantErr != "" {
				assert.ErrorContains(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{c.user, c.node, c.secret}, []string{n.User, n.Node, n.Secret})
		})
	}
}

// anaxWorld builds the services of business_test.go's resolver: top-level
// myorg/mysvc 1.0.1 (one definition per arch given) requiring
// deporg/dep1 0.0.1 amd64, each with one container declaring the secrets
// given.
func anaxWorld(topSecrets, depSecrets []string, arches ...string) []*ServiceDefinition {
	withSecrets := func(d *ServiceDefinition, names []string) *ServiceDefinition {
		c := Workload{Config: d.Deployment.Services["main"].Config}
		for _, n := range names {
			if c.Secrets == nil {
				c.Secrets = map[string]ServiceSecret{}
			}
			c.Secrets[n] = ServiceSecret{Description: "blah"}
		}
		d.Deployment = &DeploymentConfig{Services: map[string]Workload{"mysvc": c}}
		return d
	}
	var defs []*ServiceDefinition
	for _, arch := range arches {
		top := withSecrets(&ServiceDefinition{Org: "myorg", URL: "mysvc", Version: "1.0.1", Arch: arch, Deployment: device("main"),
			RequiredServices: []ServiceDependency{{Org: "deporg", URL: "dep1", Version: "0.0.1", Arch: "amd64"}}}, topSecrets)
		defs = append(defs, top)
	}
	dep := withSecrets(&ServiceDefinition{Org: "deporg", URL: "dep1", Version: "0.0.1", Arch: "amd64", Deployment: device("main")}, depSecrets)
	return append(defs, dep)
}

// anaxEntry is business_test.go's sb_top or sb_dep with the bindings given
// as {service secret, vault secret} pairs, in Open Horizon's form.
func anaxEntry(org, url, arch, versions string, pairs ...[2]string) SecretBinding {
	sb := SecretBinding{ServiceOrgid: org, ServiceURL: url, ServiceArch: arch, ServiceVersionRange: versions}
	for _, p := range pairs {
		sb.Bindings = append(sb.Bindings, Binding{ServiceSecret: p[0], VaultSecret: p[1]})
	}
	return sb
}

// TestAnaxSecretBindingChecks: the cases of Test_GroupSecretBindings,
// Test_UpdateIndexMap/Test_CombineIndexMap and
// Test_ValidateSecretBindingForSvcAndDep, each with the outcome anax gives
// (an error, or needed and extraneous bindings) as codes and severities
// here. anax's "extraneous" is our secret_undeclared (a binding of a used
// entry) or binding_unused (an entry that selects nothing): notes at
// publication, warnings at deploycheck.
func TestAnaxSecretBindingChecks(t *testing.T) {
	top1 := [2]string{"mysecret_top1", "s1"}
	top2 := [2]string{"mysecret_both", "s2"}
	dep1 := [2]string{"mysecret_dep1", "user/fred/sd1"}
	dep2 := [2]string{"mysecret_both", "s2"}
	topSecrets := []string{"mysecret_top1", "mysecret_both"}
	depSecrets := []string{"mysecret_dep1", "mysecret_both"}
	sbTop := func(pairs ...[2]string) SecretBinding { return anaxEntry("myorg", "mysvc", "amd64", "1.0.1", pairs...) }
	sbDep := func(pairs ...[2]string) SecretBinding { return anaxEntry("deporg", "dep1", "amd64", "0.0.1", pairs...) }
	topAt := func(arch string) []agreement.ServiceRef {
		return []agreement.ServiceRef{{Org: "myorg", URL: "mysvc", Arch: arch, Version: "1.0.1"}}
	}
	type problem struct {
		code     Code
		severity string
		secret   string
		service  string // URL of the service concerned
	}
	cases := []struct {
		name     string
		anax     string // the anax test and case
		defs     []*ServiceDefinition
		target   Target
		point    Point
		want     []problem
		resolved int
		differs  string
	}{
		{
			name: "all secrets bound", anax: "Test_ValidateSecretBindingForSvcAndDep: good case; Test_GroupSecretBindings: all needed",
			defs:   anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{sbTop(top1, top2), sbDep(dep1, dep2)}},
			point:  PointPublish, resolved: 4,
		},
		{
			name: "entry for any architecture", anax: "good case, ServiceArch=\"*\"",
			defs: anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{
				anaxEntry("myorg", "mysvc", "*", "1.0.1", top1, top2), sbDep(dep1, dep2)}},
			point: PointPublish, resolved: 4,
		},
		{
			name: "service for any architecture, one published", anax: "good case, arch=\"*\", but checkAllArches is false",
			defs:   anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("*"), SecretBindings: []SecretBinding{sbTop(top1, top2), sbDep(dep1, dep2)}},
			point:  PointPublish, resolved: 4,
			differs: "anax checks only the CLI's own architecture when checkAllArches is false; " +
				"we check every architecture of the Target (narrow it with Arch)",
		},
		{
			name: "service for any architecture, an entry for one", anax: "bad case, arch=\"*\", checkAllArches is true",
			defs:   anaxWorld(topSecrets, depSecrets, "amd64", "arm64"),
			target: Target{Services: topAt("*"), SecretBindings: []SecretBinding{sbTop(top1, top2), sbDep(dep1, dep2)}},
			point:  PointPublish, resolved: 4,
			want: []problem{
				{CodeSecretUnbound, severityError, "mysecret_both", "mysvc"},
				{CodeSecretUnbound, severityError, "mysecret_top1", "mysvc"},
			},
		},
		{
			name: "no bindings at all", anax: "both top and dependent services have secrets, but no secret bindings provided",
			defs:   anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64")},
			point:  PointPublish,
			want: []problem{
				{CodeSecretUnbound, severityError, "mysecret_both", "mysvc"},
				{CodeSecretUnbound, severityError, "mysecret_top1", "mysvc"},
				{CodeSecretUnbound, severityError, "mysecret_both", "dep1"},
				{CodeSecretUnbound, severityError, "mysecret_dep1", "dep1"},
			},
			differs: "anax stops at the first service with a problem (the top-level one); we report the dependency's too",
		},
		{
			name: "no bindings for the dependency", anax: "no secret bindings provided for the dependent service",
			defs:   anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{sbTop(top1, top2)}},
			point:  PointPublish, resolved: 2,
			want: []problem{
				{CodeSecretUnbound, severityError, "mysecret_both", "dep1"},
				{CodeSecretUnbound, severityError, "mysecret_dep1", "dep1"},
			},
		},
		{
			name: "no bindings for the top-level service", anax: "no secret bindings provided for the top level service",
			defs:   anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{sbDep(dep1, dep2)}},
			point:  PointPublish, resolved: 2,
			want: []problem{
				{CodeSecretUnbound, severityError, "mysecret_both", "mysvc"},
				{CodeSecretUnbound, severityError, "mysecret_top1", "mysvc"},
			},
		},
		{
			name: "one binding missing for the dependency", anax: "missing one secret binding for the dependent service",
			defs:   anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{sbTop(top1, top2), sbDep(dep1)}},
			point:  PointPublish, resolved: 3,
			want: []problem{{CodeSecretUnbound, severityError, "mysecret_both", "dep1"}},
		},
		{
			name: "one binding missing for the top-level service", anax: "missing one secret binding for the top level service",
			defs:   anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{sbTop(top2), sbDep(dep1, dep2)}},
			point:  PointPublish, resolved: 3,
			want: []problem{{CodeSecretUnbound, severityError, "mysecret_top1", "mysvc"}},
		},
		{
			name: "fully qualified vault secret name", anax: "invalid vault secret name",
			defs: anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{
				sbTop(top1, top2), sbDep([2]string{"mysecret_dep1", "openhorizon/myorg/user/fred/sd1"}, dep2)}},
			point: PointPublish, resolved: 3,
			want: []problem{{CodeVaultSecretInvalid, severityError, "mysecret_dep1", "dep1"}},
		},
		{
			name: "a binding the top-level service does not declare", anax: "extra secret binding for top level service",
			defs: anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{
				sbTop(top1, top2, [2]string{"mysecret_top3", "s3"}), sbDep(dep1, dep2)}},
			point: PointPublish, resolved: 4,
			want: []problem{{CodeSecretUndeclared, severityNote, "mysecret_top3", "mysvc"}},
		},
		{
			name: "an entry for a service not deployed", anax: "extra secret binding for a different service",
			defs: anaxWorld(topSecrets, depSecrets, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{
				sbTop(top1, top2), sbDep(dep1, dep2), anaxEntry("extra_url", "dep1", "amd64", "0.0.1", [2]string{"svc_secret", "vault_secret"})}},
			point: PointPublish, resolved: 4,
			want: []problem{{CodeBindingUnused, severityNote, "", "dep1"}},
		},
		{
			name: "no service needs any binding", anax: "Test_GroupSecretBindings: all extraneous",
			defs:   anaxWorld(nil, nil, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{sbTop(top1, top2), sbDep(dep1, dep2)}},
			point:  PointDeployCheck,
			want: []problem{
				{CodeSecretUndeclared, severityWarning, "mysecret_top1", "mysvc"},
				{CodeSecretUndeclared, severityWarning, "mysecret_both", "mysvc"},
				{CodeSecretUndeclared, severityWarning, "mysecret_dep1", "dep1"},
				{CodeSecretUndeclared, severityWarning, "mysecret_both", "dep1"},
			},
			differs: "anax lists each wholly extraneous entry once; we list each binding, with the service it was checked against",
		},
		{
			name: "needed and extraneous bindings in the same entries", anax: "Test_GroupSecretBindings: split",
			defs:   anaxWorld([]string{"mysecret_top1"}, []string{"mysecret_both"}, "amd64"),
			target: Target{Services: topAt("amd64"), SecretBindings: []SecretBinding{sbTop(top1, top2), sbDep(dep1, dep2)}},
			point:  PointDeployCheck, resolved: 2,
			want: []problem{
				{CodeSecretUndeclared, severityWarning, "mysecret_both", "mysvc"},
				{CodeSecretUndeclared, severityWarning, "mysecret_dep1", "dep1"},
			},
		},
		{
			// Test_UpdateIndexMap and Test_CombineIndexMap: what one service
			// needs of an entry adds up over every service it selects, so a
			// binding another architecture needs is not extraneous.
			name: "bindings needed by different architectures", anax: "Test_UpdateIndexMap, Test_CombineIndexMap",
			defs: append(anaxWorld([]string{"mysecret_top1"}, nil, "amd64"),
				anaxWorld([]string{"mysecret_top1", "mysecret_top3"}, nil, "arm64")[0]),
			target: Target{Services: topAt("*"), SecretBindings: []SecretBinding{
				anaxEntry("myorg", "mysvc", "", "", top1, [2]string{"mysecret_top3", "s3"})}},
			point: PointDeployCheck, resolved: 3,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cat, err := NewCatalog(c.defs...)
			require.NoError(t, err)
			rep, err := Validate(context.Background(), c.target, Options{Resolver: cat, Point: c.point})
			require.NoError(t, err)
			var got []problem
			for _, p := range rep.Problems {
				got = append(got, problem{p.Code, p.Severity, p.ServiceSecret, p.Service.URL})
			}
			assert.Equal(t, c.want, got, "anax: %s; differs: %s", c.anax, c.differs)
			assert.Len(t, rep.Resolved, c.resolved)
		})
	}
}
