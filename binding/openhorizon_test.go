package binding

// Tests on files Open Horizon ships (testdata/openhorizon, see its SOURCES
// file): anax's end-to-end service definitions, patterns and deployment
// policies, the inputs of its deploycheck tests, and open-horizon/examples'
// helloSecretWorld. Each expected outcome is the one anax's own tests or
// code give the same files; the comment above each case says where from.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

const ohDir = "testdata/openhorizon"

// Organisations of anax's end-to-end test hub.
const (
	orgE2E     = "e2edev@somecomp.com"
	orgIBM     = "IBM"
	orgUserdev = "userdev"
)

// ohVars are the values anax's end-to-end scripts export when they run
// envsubst over the fixtures (test/gov/service_apireg.sh, hzn_compcheck.sh
// replaces __ARCH__), and helloSecretWorld's horizon/hzn.json with ARCH.
func ohVars(t testing.TB, extra map[string]string) map[string]string {
	t.Helper()
	vars := map[string]string{
		"ARCH": "amd64", "CPU_IMAGE_NAME": "openhorizon/amd64_cpu", "CPU_IMAGE_TAG": "1.2.2",
		"MHI": "600", "CAS": "600", "LOCVERS1": "2.0.6", "LOCVERS2": "2.0.7", "K8SVERS": "1.0.0",
	}
	var hzn struct {
		HZNOrgID     string            `json:"HZN_ORG_ID"`
		MetadataVars map[string]string `json:"MetadataVars"`
	}
	require.NoError(t, json.Unmarshal(readOH(t, "examples/helloSecretWorld/hzn.json"), &hzn))
	vars["HZN_ORG_ID"] = hzn.HZNOrgID
	for k, v := range hzn.MetadataVars {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	return vars
}

func readOH(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ohDir, name))
	require.NoError(t, err)
	return b
}

// expandOH substitutes the placeholders of a fixture as the scripts do; a
// placeholder without a value fails the test.
func expandOH(t testing.TB, name string, vars map[string]string) string {
	t.Helper()
	s := strings.ReplaceAll(string(readOH(t, name)), "__ARCH__", vars["ARCH"])
	return os.Expand(s, func(v string) string {
		val, ok := vars[v]
		if !ok {
			t.Errorf("%s: no value for placeholder $%s", name, v)
		}
		return val
	})
}

// ohService decodes a service definition fixture published in org (the
// files leave "org" to the publishing command), at version vers.
func ohService(t testing.TB, name, org, vers, arch string) *ServiceDefinition {
	t.Helper()
	d, err := DecodeServiceDefinition(strings.NewReader(expandOH(t, name, ohVars(t, map[string]string{"VERS": vers, "ARCH": arch}))))
	require.NoError(t, err, name)
	if d.Org == "" {
		d.Org = org
	}
	return d
}

// e2eHub returns the services anax's end-to-end test publishes
// (test/gov/service_apireg.sh, with vault) for arch amd64.
func e2eHub(t testing.TB) []*ServiceDefinition {
	t.Helper()
	var defs []*ServiceDefinition
	for _, org := range []string{orgIBM, orgE2E} {
		defs = append(defs,
			ohService(t, "anax/service_apireg/network_1.5.0.json", org, "1.5.0", "amd64"),
			ohService(t, "anax/service_apireg/network2_1.5.0.json", org, "1.5.0", "amd64"))
	}
	return append(defs,
		ohService(t, "anax/service_defs/IBM/service-cpu_1.2.2_secrets.json", orgIBM, "1.2.2", "amd64"),
		ohService(t, "anax/service_defs/e2edev/service-cpu_1.0_secrets.json", orgE2E, "1.0", "amd64"),
		ohService(t, "anax/service_defs/IBM/netspeed_2.3.0_secrets.json", orgIBM, "2.3.0", "amd64"),
		ohService(t, "anax/service_defs/e2edev/netspeed_2.3.0_secrets.json", orgE2E, "2.3.0", "amd64"),
		ohService(t, "anax/service_apireg/locgps_2.0.3.json", orgE2E, "2.0.3", "amd64"),
		ohService(t, "anax/service_apireg/locgps_2.0.4.json", orgE2E, "2.0.4", "amd64"),
		ohService(t, "anax/service_apireg/location_2.0.6.json", orgE2E, "2.0.6", "amd64"),
		ohService(t, "anax/service_apireg/location_2.0.7.json", orgE2E, "2.0.7", "amd64"),
		ohService(t, "anax/service_apireg/k8s-hello-secret.json", orgE2E, "1.0.0", "amd64"),
	)
}

// e2eStore returns a store holding the secrets anax's end-to-end test
// creates (test/gov/setup_secrets.sh: every `RES=$(hzn secretsmanager
// secret add -o <org> ... --secretKey <key> -d <detail> <name> -O)`), each
// as Open Horizon keeps it: {"key": <key>, "value": <detail>} under
// "<org>/<name>".
func e2eStore(t testing.TB) *secretstore.Store {
	t.Helper()
	script := string(readOH(t, "anax/setup_secrets.sh"))
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+)="([^"]*)"`).FindAllStringSubmatch(script, -1) {
		vars[m[1]] = m[2]
	}
	deref := func(s string) string {
		if v, ok := strings.CutPrefix(s, "${"); ok {
			name := strings.TrimSuffix(v, "}")
			require.Contains(t, vars, name)
			return vars[name]
		}
		return s
	}
	store := memory.New()
	adds := regexp.MustCompile(`(?m)^RES=\$\(hzn secretsmanager secret add -o (\S+) -u \S+ --secretKey (\S+) -d (\S+)\s+(\S+) -O\)`).FindAllStringSubmatch(script, -1)
	require.Len(t, adds, 10, "setup_secrets.sh creates ten secrets")
	for _, m := range adds {
		name := deref(m[1]) + "/" + deref(m[4])
		_, err := store.Put(context.Background(), &secretstore.Secret{Name: name, Data: edgesecrets.Data{
			"key": []byte(deref(m[2])), "value": []byte(deref(m[3])),
		}}, secretstore.PutOptions{})
		require.NoError(t, err, name)
	}
	return store
}

func ohPolicy(t testing.TB, name string, vars map[string]string) Target {
	t.Helper()
	p, err := DecodeDeploymentPolicy(strings.NewReader(expandOH(t, name, vars)))
	require.NoError(t, err, name)
	return p
}

func ohPattern(t testing.TB, name string, vars map[string]string) Target {
	t.Helper()
	p, err := DecodePattern(strings.NewReader(expandOH(t, name, vars)))
	require.NoError(t, err, name)
	return p
}

// TestOpenHorizonServiceDefinitions decodes every service definition
// fixture: each secret anax declares is found where anax declares it, with
// its format, and each passes publication as it does in anax's end-to-end
// test (`hzn exchange service publish` must succeed there).
func TestOpenHorizonServiceDefinitions(t *testing.T) {
	type declared struct {
		container string // "" for the cluster deployment
		name      string
		format    string
	}
	cases := []struct {
		file    string
		org     string
		kind    deploymentKind
		secrets []declared
	}{
		{"anax/service_defs/e2edev/netspeed_2.3.0_secrets.json", orgE2E, deployMixed,
			[]declared{{"netspeed", "sec1", agreement.FormatValueOnly}, {"netspeed", "sec2", ""}}},
		{"anax/service_defs/IBM/netspeed_2.3.0_secrets.json", orgIBM, deployMixed,
			[]declared{{"netspeed", "sec3", agreement.FormatValueOnly}}},
		{"anax/service_defs/IBM/service-cpu_1.2.2_secrets.json", orgIBM, deployDevice, []declared{{"cpu", "secret-dep1", ""}}},
		{"anax/service_defs/e2edev/service-cpu_1.0_secrets.json", orgE2E, deployDevice, []declared{{"cpu", "secret-dep2", ""}}},
		{"anax/compcheck/service_location_secrets.json", orgE2E, deployDevice,
			[]declared{{"location2", "loc_secret1", ""}, {"location2", "loc_secret2", ""}}},
		{"anax/compcheck/service_location_secrets_extra.json", orgE2E, deployDevice,
			[]declared{{"location2", "foo", ""}, {"location2", "loc_secret1", ""}, {"location2", "loc_secret2", ""}}},
		{"anax/compcheck/service_locgps.json", orgE2E, deployDevice, nil},
		{"anax/service_apireg/k8s-hello-secret.json", orgE2E, deployCluster,
			[]declared{{"", "secret1", ""}, {"", "secret2", agreement.FormatValueOnly}}},
		{"anax/service_apireg/network_1.5.0.json", orgIBM, deployNone, nil},
		{"anax/service_apireg/location_2.0.7.json", orgE2E, deployDevice, nil},
		{"examples/helloSecretWorld/service.definition.json", orgIBM, deployDevice, []declared{{"ibm.hello-secret", "hw_who", ""}}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			d := ohService(t, c.file, c.org, "1.0.0", "amd64")
			assert.Equal(t, c.kind, d.kind())
			var got []declared
			for _, dc := range d.declarations() {
				got = append(got, declared{dc.container, dc.name, dc.secret.Format})
			}
			assert.Equal(t, c.secrets, got)
			rep := ValidateService(d)
			assert.Empty(t, rep.Problems, "anax publishes it")

			// What decodes re-encodes to the same definition.
			out, err := json.Marshal(d)
			require.NoError(t, err)
			back, err := DecodeServiceDefinition(strings.NewReader(string(out)))
			require.NoError(t, err)
			assert.Equal(t, d, back)
		})
	}
}

// TestOpenHorizonAgreements validates, at the agbot's agreement point, the
// deployments anax's end-to-end test deploys with vault secrets. anax makes
// these agreements and service_secrets_test.sh then finds the secrets in the
// containers: sec1 (value_only) and sec2 of e2edev's netspeed,
// secret-dep1 of IBM's service-cpu. So: no errors, and every declared
// secret of the tree resolved.
func TestOpenHorizonAgreements(t *testing.T) {
	store := e2eStore(t)
	cat, err := NewCatalog(e2eHub(t)...)
	require.NoError(t, err)
	vars := ohVars(t, map[string]string{"VERS": "2.3.0"})
	const node = "an12345"

	type resolved struct {
		service string // org/url@version#container
		secret  string
		format  string
		names   []string // candidate store names, in order
	}
	cases := []struct {
		name     string
		org      string // the node's organisation: where vault secrets are looked up
		target   Target
		services int
		notes    []Code
		want     []resolved
	}{
		{
			// test/gov/service_apireg.sh registers it as userdev/bp_netspeed.
			name: "deployment policy userdev/netspeed_secrets", org: orgUserdev,
			target:   ohPolicy(t, "anax/deployment_policies/netspeed_secrets.json", vars),
			services: 5,
			notes:    []Code{CodeNodeSecretFallback, CodeNodeSecretFallback, CodeNodeSecretFallback, CodeNodeSecretFallback},
			want: []resolved{
				{"e2edev@somecomp.com/https://bluehorizon.network/services/netspeed@2.3.0[amd64]#netspeed", "sec1", agreement.FormatValueOnly,
					[]string{"userdev/node/an12345/netspeed-secret1", "userdev/netspeed-secret1"}},
				{"e2edev@somecomp.com/https://bluehorizon.network/services/netspeed@2.3.0[amd64]#netspeed", "sec2", agreement.FormatJSON,
					[]string{"userdev/node/an12345/netspeed-secret2", "userdev/netspeed-secret2"}},
				{"e2edev@somecomp.com/https://bluehorizon.network/service-cpu@1.0[amd64]#cpu", "secret-dep2", agreement.FormatJSON,
					[]string{"userdev/node/an12345/netspeed-secret2", "userdev/netspeed-secret2"}},
				{"IBM/https://bluehorizon.network/service-cpu@1.2.2[amd64]#cpu", "secret-dep1", agreement.FormatJSON,
					[]string{"userdev/node/an12345/netspeed-secret1", "userdev/netspeed-secret1"}},
			},
		},
		{
			// Registered as e2edev@somecomp.com/sns. Its third entry
			// (e2edev's service-cpu) is not in IBM netspeed's tree: anax
			// counts it extraneous and goes on.
			name: "pattern e2edev/netspeed_secrets", org: orgE2E,
			target:   ohPattern(t, "anax/patterns/netspeed_secrets.json", vars),
			services: 4,
			notes:    []Code{CodeBindingUnused, CodeNodeSecretFallback, CodeNodeSecretFallback},
			want: []resolved{
				{"IBM/https://bluehorizon.network/services/netspeed@2.3.0[amd64]#netspeed", "sec3", agreement.FormatValueOnly,
					[]string{"e2edev@somecomp.com/node/an12345/netspeed-secret3", "e2edev@somecomp.com/netspeed-secret3"}},
				{"IBM/https://bluehorizon.network/service-cpu@1.2.2[amd64]#cpu", "secret-dep1", agreement.FormatJSON,
					[]string{"e2edev@somecomp.com/node/an12345/netspeed-secret1", "e2edev@somecomp.com/netspeed-secret1"}},
			},
		},
		{
			name: "pattern e2edev/sloc_secrets", org: orgUserdev,
			target:   ohPattern(t, "anax/patterns/sloc_secrets.json", vars),
			services: 5,
			want: []resolved{
				{"IBM/https://bluehorizon.network/service-cpu@1.2.2[amd64]#cpu", "secret-dep1", agreement.FormatJSON, []string{"userdev/netspeed-secret1"}},
			},
		},
		{
			name: "deployment policy userdev/location_secrets", org: orgUserdev,
			target:   ohPolicy(t, "anax/deployment_policies/location_secrets.json", vars),
			services: 5,
			want: []resolved{
				{"IBM/https://bluehorizon.network/service-cpu@1.2.2[amd64]#cpu", "secret-dep1", agreement.FormatJSON, []string{"userdev/netspeed-secret1"}},
			},
		},
		{
			// A cluster service: anax hands its operator one Kubernetes
			// Secret with secret1 and secret2 (value_only).
			name: "pattern e2edev/sk8s_secrets", org: orgUserdev,
			target:   ohPattern(t, "anax/patterns/sk8s_secrets.json", vars),
			services: 1,
			want: []resolved{
				{"e2edev@somecomp.com/k8s-hello-secret@1.0.0[amd64]", "secret1", agreement.FormatJSON, []string{"userdev/k8s-hello-secret1"}},
				{"e2edev@somecomp.com/k8s-hello-secret@1.0.0[amd64]", "secret2", agreement.FormatValueOnly, []string{"userdev/k8s-hello-secret2"}},
			},
		},
		{
			// userdev/bp_k8s_secret lists the same entry twice; anax uses
			// the first and counts the second extraneous.
			name: "deployment policy userdev/bp_k8s_secret", org: orgUserdev,
			target:   ohPolicy(t, "anax/service_apireg/bp_k8s_secret.json", vars),
			services: 1,
			notes:    []Code{CodeBindingDuplicate, CodeBindingDuplicate},
			want: []resolved{
				{"e2edev@somecomp.com/k8s-hello-secret@1.0.0[amd64]", "secret1", agreement.FormatJSON, []string{"userdev/k8s-hello-secret1"}},
				{"e2edev@somecomp.com/k8s-hello-secret@1.0.0[amd64]", "secret2", agreement.FormatValueOnly, []string{"userdev/k8s-hello-secret2"}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checker, err := NewStoreChecker(store, c.org)
			require.NoError(t, err)
			rep, err := Validate(context.Background(), c.target, Options{Resolver: cat, Checker: checker, Point: PointAgreement, Node: node})
			require.NoError(t, err)
			require.NoError(t, rep.Err())
			assert.Empty(t, rep.Warnings())
			assert.Equal(t, c.notes, nilIfEmpty(slices.Collect(func(yield func(Code) bool) {
				for _, p := range rep.bySeverity(severityNote) {
					if !yield(p.Code) {
						return
					}
				}
			})))
			assert.Len(t, rep.Services, c.services)

			bindings, err := rep.Bindings(c.org, node)
			require.NoError(t, err)
			var got []resolved
			for _, sb := range bindings {
				for _, name := range slices.Sorted(func(yield func(string) bool) {
					for k := range sb.Secrets {
						if !yield(k) {
							return
						}
					}
				}) {
					b := sb.Secrets[name]
					got = append(got, resolved{sb.Service.String(), name, b.Format, b.StoreNames})
				}
			}
			assert.Equal(t, c.want, got)

			// The first candidate that exists is what the node gets: here
			// the organisation's secret, {"key","value"} as setup_secrets.sh
			// wrote it.
			for _, r := range got {
				s, err := store.Get(context.Background(), r.names[len(r.names)-1])
				require.NoError(t, err, r.names)
				assert.Equal(t, []string{"key", "value"}, s.Data.Keys())
			}
		})
	}
}

// TestOpenHorizonDeployCheck re-runs anax's `hzn deploycheck secretbinding`
// cases (test/gov/hzn_compcheck.sh, "test secret binding with ...") on the
// same input files: both are compatible, with a warning for the binding
// "extra" that no service requires. A service file with a secret no entry
// binds ("foo", service_location_secrets_extra.json) is incompatible in
// anax ("No secret binding found for the following service secrets").
func TestOpenHorizonDeployCheck(t *testing.T) {
	store := e2eStore(t)
	checker, err := NewStoreChecker(store, orgUserdev)
	require.NoError(t, err)
	vars := ohVars(t, nil)
	hub := e2eHub(t)
	// --service replaces the exchange's definition of the deployed service.
	withInput := func(files ...string) Resolver {
		inputs := map[agreement.ServiceRef]*ServiceDefinition{}
		for _, f := range files {
			d := ohService(t, f, orgE2E, "", "amd64")
			inputs[d.ref()] = d
		}
		defs := slices.Collect(func(yield func(*ServiceDefinition) bool) {
			for _, d := range inputs {
				if !yield(d) {
					return
				}
			}
		})
		for _, d := range hub {
			if inputs[d.ref()] == nil {
				defs = append(defs, d)
			}
		}
		cat, err := NewCatalog(defs...)
		require.NoError(t, err)
		return cat
	}
	// The versions deploycheck had definitions for (the input files):
	// anax's deploycheck is satisfied when one listed version is compatible;
	// we check each version we are given (see the last case).
	only := func(tg Target, versions ...string) Target {
		tg.Services = slices.DeleteFunc(slices.Clone(tg.Services), func(r agreement.ServiceRef) bool {
			return r.URL == "https://bluehorizon.network/services/location" && !slices.Contains(versions, r.Version)
		})
		return tg
	}
	policy := ohPolicy(t, "anax/compcheck/business_pol_location_secrets.json", vars)
	cases := []struct {
		name     string
		target   Target
		catalog  Resolver
		errors   []Code
		warnings []Code
	}{
		{
			name:     "business policy with the service file: compatible",
			target:   only(policy, "2.0.7"),
			catalog:  withInput("anax/compcheck/service_location_secrets.json"),
			warnings: []Code{CodeSecretUndeclared},
		},
		{
			name:     "pattern with the service files: compatible",
			target:   only(ohPattern(t, "anax/compcheck/pattern_sloc_secrets.json", vars), "2.0.7"),
			catalog:  withInput("anax/compcheck/service_location_secrets.json", "anax/compcheck/service_locgps.json"),
			warnings: []Code{CodeSecretUndeclared},
		},
		{
			name:     "a declared secret without a binding: incompatible",
			target:   only(policy, "2.0.7"),
			catalog:  withInput("anax/compcheck/service_location_secrets_extra.json"),
			errors:   []Code{CodeSecretUnbound},
			warnings: []Code{CodeSecretUndeclared},
		},
		{
			// Deliberate difference: the policy also lists 2.0.6, which
			// anax's deploycheck finds no input for and skips because 2.0.7
			// is compatible. The exchange's 2.0.6 declares no secrets, so
			// every location binding is extraneous for it; it is still
			// deployable, and the agbot may pick it.
			name:     "every listed version is checked",
			target:   policy,
			catalog:  withInput("anax/compcheck/service_location_secrets.json"),
			warnings: []Code{CodeSecretUndeclared},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Validate(context.Background(), c.target, Options{Resolver: c.catalog, Checker: checker})
			require.NoError(t, err)
			codes := func(ps []Problem) []Code {
				var out []Code
				for _, p := range ps {
					out = append(out, p.Code)
				}
				return out
			}
			assert.Equal(t, c.errors, codes(rep.Errors()), "%v", rep.Problems)
			assert.Equal(t, c.warnings, codes(rep.Warnings()))
			for _, p := range rep.Warnings() {
				assert.Equal(t, "extra", p.ServiceSecret)
			}
			for _, p := range rep.Errors() {
				assert.Equal(t, "foo", p.ServiceSecret)
			}
		})
	}
}

// TestOpenHorizonHelloSecretWorld follows open-horizon/examples'
// helloSecretWorld: its Makefile publishes the service for amd64, arm and
// arm64 and then `hzn exchange pattern publish -f
// horizon/pattern-all-arches.json` (a public pattern, so anax checks no
// vault secret); publish-policy publishes deployment.policy.json for the
// service's one architecture. The service reads the value of
// {"key": ..., "value": ...} from /open-horizon-secrets/hw_who.
func TestOpenHorizonHelloSecretWorld(t *testing.T) {
	vars := ohVars(t, nil)
	org := vars["HZN_ORG_ID"]
	var hwWho map[string]string
	require.NoError(t, json.Unmarshal(readOH(t, "examples/helloSecretWorld/hw_who"), &hwWho))
	store := memory.New()
	_, err := store.Put(context.Background(), &secretstore.Secret{Name: org + "/hw-secret-name", Data: edgesecrets.Data{
		"key": []byte(hwWho["key"]), "value": []byte(hwWho["value"]),
	}}, secretstore.PutOptions{})
	require.NoError(t, err)
	checker, err := NewStoreChecker(store, org)
	require.NoError(t, err)

	svc := func(arch string) *ServiceDefinition {
		return ohService(t, "examples/helloSecretWorld/service.definition.json", org, vars["SERVICE_VERSION"], arch)
	}
	amd64, err := NewCatalog(svc("amd64"))
	require.NoError(t, err)
	allArches, err := NewCatalog(svc("amd64"), svc("arm"), svc("arm64"))
	require.NoError(t, err)

	t.Run("pattern for all architectures, published", func(t *testing.T) {
		rep, err := Validate(context.Background(), ohPattern(t, "examples/helloSecretWorld/pattern-all-arches.json", vars),
			Options{Resolver: allArches, Point: PointPublish})
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)
		assert.Len(t, rep.Resolved, 3, "one hw_who per architecture")
	})
	t.Run("pattern for one architecture, published", func(t *testing.T) {
		rep, err := Validate(context.Background(), ohPattern(t, "examples/helloSecretWorld/pattern.json", vars),
			Options{Resolver: amd64, Point: PointPublish, Checker: checker})
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)
	})
	t.Run("deployment policy, published and deployed", func(t *testing.T) {
		target := ohPolicy(t, "examples/helloSecretWorld/deployment.policy.json", vars)
		rep, err := Validate(context.Background(), target, Options{Resolver: amd64, Point: PointPublish, Checker: checker})
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)

		rep, err = Validate(context.Background(), target, Options{Resolver: amd64, Point: PointAgreement, Checker: checker, Node: "node1"})
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)
		bindings, err := rep.Bindings(org, "node1")
		require.NoError(t, err)
		assert.Equal(t, []ServiceBinding{{
			Service: agreement.ServiceRef{Org: org, URL: "ibm.hello-secret", Arch: "amd64", Version: "1.0.0", Container: "ibm.hello-secret"},
			Secrets: map[string]BoundSecret{"hw_who": {StoreNames: []string{"IBM/hw-secret-name"}, Format: agreement.FormatJSON}},
		}}, bindings)
	})
	t.Run("deployment policy over every architecture", func(t *testing.T) {
		// Its binding names one architecture ($ARCH) while the policy deploys
		// "*": once arm and arm64 are published too, anax's `hzn exchange
		// deployment addpolicy` (checkAllArches) fails with "No secret
		// binding found" for them.
		rep, err := Validate(context.Background(), ohPolicy(t, "examples/helloSecretWorld/deployment.policy.json", vars),
			Options{Resolver: allArches, Point: PointPublish, Checker: checker})
		require.NoError(t, err)
		assert.Equal(t, []Code{CodeSecretUnbound, CodeSecretUnbound}, codes(rep))
		assert.Equal(t, "arm", rep.Problems[0].Service.Arch)
		assert.Equal(t, "arm64", rep.Problems[1].Service.Arch)
	})
}

// TestOpenHorizonBindingsRoundTrip re-encodes every secretBinding entry of
// the pattern and policy fixtures: the result is Open Horizon's form, holds
// the same members as the file (plus enableNodeLevelSecrets, which anax
// always writes) and decodes to the same entry.
func TestOpenHorizonBindingsRoundTrip(t *testing.T) {
	vars := ohVars(t, map[string]string{"VERS": "1.0.0"})
	files := []string{
		"anax/compcheck/business_pol_location_secrets.json", "anax/compcheck/pattern_sloc_secrets.json",
		"anax/patterns/netspeed_secrets.json", "anax/patterns/sloc_secrets.json", "anax/patterns/sk8s_secrets.json",
		"anax/deployment_policies/netspeed_secrets.json", "anax/deployment_policies/location_secrets.json",
		"anax/service_apireg/bp_k8s_secret.json",
		"examples/helloSecretWorld/deployment.policy.json", "examples/helloSecretWorld/pattern.json",
		"examples/helloSecretWorld/pattern-all-arches.json",
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			var doc struct {
				SecretBinding []json.RawMessage `json:"secretBinding"`
			}
			text := expandOH(t, f, vars)
			require.NoError(t, json.Unmarshal([]byte(text), &doc))
			require.NotEmpty(t, doc.SecretBinding)
			for _, raw := range doc.SecretBinding {
				var sb SecretBinding
				require.NoError(t, json.Unmarshal(raw, &sb))
				assert.False(t, sb.DesignForm)
				assert.NotEmpty(t, sb.Bindings)

				out, err := json.Marshal(sb)
				require.NoError(t, err)
				var orig, again map[string]any
				require.NoError(t, json.Unmarshal(raw, &orig))
				require.NoError(t, json.Unmarshal(out, &again))
				if _, ok := orig["enableNodeLevelSecrets"]; !ok {
					orig["enableNodeLevelSecrets"] = false
				}
				assert.Equal(t, orig, again)

				var back SecretBinding
				require.NoError(t, json.Unmarshal(out, &back))
				assert.Equal(t, sb, back)
			}
		})
	}
}
