package binding

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

const testOrg = "myorg"

// device returns a device deployment with the named containers.
func device(containers ...string) *DeploymentConfig {
	d := &DeploymentConfig{Services: map[string]Workload{}}
	for _, c := range containers {
		d.Services[c] = Workload{Config: map[string]json.RawMessage{"image": json.RawMessage(`"example/` + c + `:1"`)}}
	}
	return d
}

// cluster returns a cluster deployment declaring the secrets named.
func cluster(secrets ...string) *Workload {
	c := &Workload{Config: map[string]json.RawMessage{"operatorYamlArchive": json.RawMessage(`"H4sI"`)}}
	for _, s := range secrets {
		if c.Secrets == nil {
			c.Secrets = map[string]ServiceSecret{}
		}
		c.Secrets[s] = ServiceSecret{}
	}
	return c
}

// svc returns a single-container amd64 definition in testOrg with the secrets named.
func svc(url, version string, secrets ...string) *ServiceDefinition {
	d := &ServiceDefinition{Org: testOrg, URL: url, Version: version, Arch: "amd64", Deployment: device("main")}
	if len(secrets) > 0 {
		d.Secrets = map[string]ServiceSecret{}
		for _, s := range secrets {
			d.Secrets[s] = ServiceSecret{}
		}
	}
	return d
}

func with(d *ServiceDefinition, change func(*ServiceDefinition)) *ServiceDefinition {
	change(d)
	return d
}

func sbEntry(url string, bindings ...Binding) SecretBinding {
	return SecretBinding{ServiceOrgid: testOrg, ServiceURL: url, ServiceArch: "amd64", ServiceVersionRange: "[1.0.0,INFINITY)", Bindings: bindings}
}

func bind(secret, vault string) Binding { return Binding{ServiceSecret: secret, VaultSecret: vault} }

func top(url, version string) []agreement.ServiceRef {
	return []agreement.ServiceRef{{Org: testOrg, URL: url, Arch: "amd64", Version: version}}
}

// faultStore is a store whose Stat can be made to fail, counting Stat and
// Get calls (existence checks must never Get).
type faultStore struct {
	*secretstore.Store
	d        *testkit.Driver
	statErr  error // set before the calls it is for
	seedGets int   // the Gets of the Puts that filled the store
}

func (f *faultStore) statCalls() int64 { return int64(f.d.Calls("stat", "")) }
func (f *faultStore) getCalls() int64  { return int64(f.d.Calls("get", "") - f.seedGets) }

// newStore returns a store holding the named secrets (store paths).
func newStore(t testing.TB, paths ...string) *faultStore {
	t.Helper()
	d := testkit.NewDriver()
	s, err := secretstore.New(d, secretstore.Options{MaxAttempts: 1})
	require.NoError(t, err)
	for _, p := range paths {
		_, err := s.Put(context.Background(), &secretstore.Secret{Name: p, Data: edgesecrets.Data{"password": []byte("s3cr3t-" + p)}}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	f := &faultStore{Store: s, d: d, seedGets: d.Calls("get", "")}
	d.SetHook(func(op string) error {
		if op == "stat" && f.statErr != nil {
			return &secretstore.Error{Kind: f.statErr}
		}
		return nil
	})
	return f
}

func TestValidateRules(t *testing.T) {
	a := func() *ServiceDefinition { return svc("com.example.a", "1.0.0", "token") }
	multi := func() *ServiceDefinition {
		return with(svc("com.example.multi", "1.0.0", "pw"), func(d *ServiceDefinition) { d.Deployment = device("web", "worker") })
	}
	present := []string{testOrg + "/tok", testOrg + "/user/alice/tok", testOrg + "/other"}

	cases := []struct {
		name     string
		defs     []*ServiceDefinition
		target   Target
		statErr  error
		noCheck  bool
		want     []Code
		check    func(t *testing.T, rep *Report)
		maxStats int64
	}{
		{
			name:   "clean deployment has no problems and resolves the binding",
			defs:   []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "user/alice/tok"))}},
			want:   nil,
			check: func(t *testing.T, rep *Report) {
				require.Len(t, rep.Resolved, 1)
				rb := rep.Resolved[0]
				assert.Equal(t, agreement.ServiceRef{Org: testOrg, URL: "com.example.a", Arch: "amd64", Version: "1.0.0", Container: "main"}, rb.Service)
				assert.Equal(t, "token", rb.ServiceSecret)
				assert.Equal(t, agreement.FormatJSON, rb.Format)
				assert.Equal(t, VaultSecretName{User: "alice", Secret: "tok"}, rb.VaultSecret)
				assert.True(t, rep.ExistenceChecked)
				assert.NoError(t, rep.Err())
			},
		},
		{
			name: "missing serviceOrgid",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				{ServiceURL: "com.example.a", Bindings: []Binding{bind("token", "tok")}}}},
			want: []Code{CodeFieldMissing, CodeSecretUnbound},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 1, rep.Problems[0].Binding)
				assert.Contains(t, rep.Problems[0].Message, "serviceOrgid")
			},
		},
		{
			name: "missing serviceUrl",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				{ServiceOrgid: testOrg, Bindings: []Binding{bind("token", "tok")}}}},
			want: []Code{CodeFieldMissing, CodeSecretUnbound},
			check: func(t *testing.T, rep *Report) {
				assert.Contains(t, rep.Problems[0].Message, "serviceUrl")
			},
		},
		{
			name:   "entry without bindings",
			defs:   []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a")}},
			want:   []Code{CodeFieldMissing, CodeSecretUnbound},
		},
		{
			name:   "binding without vault secret",
			defs:   []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", ""))}},
			want:   []Code{CodeFieldMissing},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, "token", rep.Problems[0].ServiceSecret)
				assert.Empty(t, rep.Resolved)
			},
		},
		{
			name:   "binding without service secret name",
			defs:   []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("", "tok"))}},
			want:   []Code{CodeFieldMissing, CodeSecretUnbound},
		},
		{
			name: "bad arch",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				with2(sbEntry("com.example.a", bind("token", "tok")), func(e *SecretBinding) { e.ServiceArch = "amd 64" })}},
			want: []Code{CodeArchInvalid, CodeSecretUnbound},
		},
		{
			name: "bad version range",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				with2(sbEntry("com.example.a", bind("token", "tok")), func(e *SecretBinding) { e.ServiceVersionRange = "[2.0.0,1.0.0)" })}},
			want: []Code{CodeVersionRangeInvalid, CodeSecretUnbound},
		},
		{
			name: "empty arch and version range select any",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				{ServiceOrgid: testOrg, ServiceURL: "com.example.a", Bindings: []Binding{bind("token", "tok")}}}},
			want: nil,
		},
		{
			name:   "serviceContainer required on a multi-container service",
			defs:   []*ServiceDefinition{multi()},
			target: Target{Services: top("com.example.multi", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.multi", bind("pw", "tok"))}},
			want:   []Code{CodeContainerRequired},
			check: func(t *testing.T, rep *Report) {
				assert.Contains(t, rep.Problems[0].Message, `"web", "worker"`)
				assert.Empty(t, rep.Resolved)
			},
		},
		{
			name: "serviceContainer names no container",
			defs: []*ServiceDefinition{multi()},
			target: Target{Services: top("com.example.multi", "1.0.0"), SecretBindings: []SecretBinding{
				with2(sbEntry("com.example.multi", bind("pw", "tok")), func(e *SecretBinding) { e.ServiceContainer = "db" })}},
			want: []Code{CodeContainerUnknown},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, "db", rep.Problems[0].Service.Container)
			},
		},
		{
			name: "serviceContainer selects the container that gets the secret",
			defs: []*ServiceDefinition{multi()},
			target: Target{Services: top("com.example.multi", "1.0.0"), SecretBindings: []SecretBinding{
				with2(sbEntry("com.example.multi", bind("pw", "tok")), func(e *SecretBinding) { e.ServiceContainer = "worker" })}},
			want: nil,
			check: func(t *testing.T, rep *Report) {
				require.Len(t, rep.Resolved, 1)
				assert.Equal(t, "worker", rep.Resolved[0].Service.Container)
			},
		},
		{
			name: "binding for an undeclared secret",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				sbEntry("com.example.a", bind("token", "tok"), bind("extra", "other"))}},
			want: []Code{CodeSecretUndeclared},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, "extra", rep.Problems[0].ServiceSecret)
				assert.Equal(t, "other", rep.Problems[0].VaultSecret)
			},
		},
		{
			name:   "declared secret left unbound",
			defs:   []*ServiceDefinition{svc("com.example.a", "1.0.0", "token", "cert")},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "tok"))}},
			want:   []Code{CodeSecretUnbound},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, "cert", rep.Problems[0].ServiceSecret)
				assert.Equal(t, 0, rep.Problems[0].Binding)
			},
		},
		{
			name:   "unsafe secret name in the service definition",
			defs:   []*ServiceDefinition{svc("com.example.a", "1.0.0", "token", "..")},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "tok"))}},
			want:   []Code{CodeSecretNameInvalid},
		},
		{
			name: "unsafe service secret name in a binding",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				sbEntry("com.example.a", bind("token", "tok"), bind("etc/passwd", "tok"))}},
			want: []Code{CodeSecretNameInvalid},
		},
		{
			name: "unknown secret format",
			defs: []*ServiceDefinition{with(a(), func(d *ServiceDefinition) {
				d.Secrets["token"] = ServiceSecret{Format: "yaml"}
			})},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "tok"))}},
			want:   []Code{CodeSecretFormatInvalid},
		},
		{
			name:   "raw format is carried into the resolved binding",
			defs:   []*ServiceDefinition{with(a(), func(d *ServiceDefinition) { d.Secrets["token"] = ServiceSecret{Format: agreement.FormatRaw} })},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "tok"))}},
			want:   nil,
			check: func(t *testing.T, rep *Report) {
				require.Len(t, rep.Resolved, 1)
				assert.Equal(t, agreement.FormatRaw, rep.Resolved[0].Format)
			},
		},
		{
			name:   "invalid vault secret name",
			defs:   []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "openhorizon/myorg/tok"))}},
			want:   []Code{CodeVaultSecretInvalid},
			check: func(t *testing.T, rep *Report) {
				assert.Contains(t, rep.Problems[0].Message, "openhorizon/")
				assert.Empty(t, rep.Resolved)
			},
		},
		{
			name:   "vault secret that does not exist",
			defs:   []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "node/n1/tok"))}},
			want:   []Code{CodeVaultSecretMissing},
			check: func(t *testing.T, rep *Report) {
				p := rep.Problems[0]
				assert.Equal(t, "node/n1/tok", p.VaultSecret)
				assert.Equal(t, "token", p.ServiceSecret)
				assert.Equal(t, "main", p.Service.Container)
			},
		},
		{
			name:     "store unavailable is its own code, and the store is asked once",
			defs:     []*ServiceDefinition{svc("com.example.a", "1.0.0", "token", "cert")},
			target:   Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "tok"), bind("cert", "other"))}},
			statErr:  edgesecrets.ErrUnavailable,
			want:     []Code{CodeStoreUnavailable, CodeStoreUnavailable},
			maxStats: 1,
			check: func(t *testing.T, rep *Report) {
				assert.Contains(t, rep.Problems[1].Message, "not checked")
			},
		},
		{
			name:    "store refusing the check",
			defs:    []*ServiceDefinition{a()},
			target:  Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "tok"))}},
			statErr: edgesecrets.ErrPermission,
			want:    []Code{CodeStoreForbidden},
		},
		{
			name:   "store refusing the name as too long",
			defs:   []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", strings.Repeat("x", 512-2)))}},
			want:   []Code{CodeVaultSecretInvalid},
		},
		{
			name: "one secret bound to two vault secrets",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				sbEntry("com.example.a", bind("token", "tok")),
				with2(sbEntry("com.example.a", bind("token", "other")), func(e *SecretBinding) { e.ServiceVersionRange = "1.0.0" })}},
			want: []Code{CodeBindingConflict},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 2, rep.Problems[0].Binding)
				require.Len(t, rep.Resolved, 1, "the first binding applies")
				assert.Equal(t, "tok", rep.Resolved[0].VaultSecret.String())
			},
		},
		{
			name: "one secret bound twice to the same vault secret",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				sbEntry("com.example.a", bind("token", "tok"), bind("token", "tok"))}},
			want: []Code{CodeBindingDuplicate},
			check: func(t *testing.T, rep *Report) {
				assert.NoError(t, rep.Err(), "a duplicate is a warning")
			},
		},
		{
			name: "entry no service in the tree needs",
			defs: []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				sbEntry("com.example.a", bind("token", "tok")),
				sbEntry("com.example.gone", bind("x", "tok")),
				with2(sbEntry("com.example.a", bind("token", "tok")), func(e *SecretBinding) { e.ServiceArch = "arm64" })}},
			want: []Code{CodeBindingUnused, CodeBindingUnused},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, 2, rep.Problems[0].Binding)
				assert.Equal(t, 3, rep.Problems[1].Binding)
				assert.True(t, (rep.Err() == nil))
			},
		},
		{
			name: "secrets on a cluster-only service",
			defs: []*ServiceDefinition{with(a(), func(d *ServiceDefinition) {
				d.Deployment, d.ClusterDeployment = nil, cluster()
			})},
			target: Target{Services: top("com.example.a", "1.0.0")},
			want:   []Code{CodeSecretsClusterOnly},
		},
		{
			name: "secrets on a service with device and cluster deployments",
			defs: []*ServiceDefinition{with(a(), func(d *ServiceDefinition) { d.ClusterDeployment = cluster() })},
			target: Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{
				sbEntry("com.example.a", bind("token", "tok"))}},
			want: []Code{CodeSecretsMixedDeployment},
		},
		{
			name:   "top-level service not found",
			defs:   []*ServiceDefinition{a()},
			target: Target{Services: top("com.example.a", "2.0.0")},
			want:   []Code{CodeServiceUnresolved},
		},
		{
			name: "dependency not found, and its secrets not asked for",
			defs: []*ServiceDefinition{with(svc("com.example.top", "1.0.0"), func(d *ServiceDefinition) {
				d.RequiredServices = []ServiceDependency{{Org: testOrg, URL: "com.example.a", VersionRange: "[2.0.0,3.0.0)"}}
			}), a()},
			target: Target{Services: top("com.example.top", "1.0.0")},
			want:   []Code{CodeServiceUnresolved},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, agreement.ServiceRef{Org: testOrg, URL: "com.example.a", Arch: "amd64", Version: "[2.0.0,3.0.0)"}, rep.Problems[0].Service)
			},
		},
		{
			name: "dependency with an invalid version range",
			defs: []*ServiceDefinition{with(svc("com.example.top", "1.0.0"), func(d *ServiceDefinition) {
				d.RequiredServices = []ServiceDependency{{Org: testOrg, URL: "com.example.a", VersionRange: "[1.0.0"}}
			}), a()},
			target: Target{Services: top("com.example.top", "1.0.0")},
			want:   []Code{CodeServiceUnresolved},
		},
		{
			name: "dependency's secrets are checked, at the highest version in range",
			defs: []*ServiceDefinition{
				with(svc("com.example.top", "1.0.0"), func(d *ServiceDefinition) {
					d.RequiredServices = []ServiceDependency{{Org: testOrg, URL: "com.example.a", Version: "1.0.0"}}
				}),
				a(), svc("com.example.a", "1.4.0", "token", "cert"), svc("com.example.a", "1.2.0", "token")},
			target: Target{Services: top("com.example.top", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "tok"))}},
			want:   []Code{CodeSecretUnbound},
			check: func(t *testing.T, rep *Report) {
				assert.Equal(t, "1.4.0", rep.Problems[0].Service.Version)
				assert.Equal(t, "cert", rep.Problems[0].ServiceSecret)
				assert.Len(t, rep.Services, 2)
			},
		},
		{
			name:    "no checker: existence not checked",
			defs:    []*ServiceDefinition{a()},
			target:  Target{Services: top("com.example.a", "1.0.0"), SecretBindings: []SecretBinding{sbEntry("com.example.a", bind("token", "missing"))}},
			noCheck: true,
			want:    nil,
			check: func(t *testing.T, rep *Report) {
				assert.False(t, rep.ExistenceChecked)
				assert.Len(t, rep.Resolved, 1)
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cat, err := NewCatalog(c.defs...)
			require.NoError(t, err)
			store := newStore(t, present...)
			store.statErr = c.statErr
			opts := Options{Resolver: cat}
			if !c.noCheck {
				opts.Checker, err = NewStoreChecker(store.Store, testOrg)
				require.NoError(t, err)
			}
			rep, err := Validate(context.Background(), c.target, opts)
			require.NoError(t, err)
			assert.Equal(t, c.want, nilIfEmpty(codes(rep)), "problems: %v", rep.Problems)
			for _, p := range rep.Problems {
				assert.Contains(t, []string{p.Code.severityAt(PointDeployCheck), CodeBindingUnused.severityAt(PointDeployCheck)}, p.Severity, "its own severity, or that of a binding no service needs")
				assert.NotEmpty(t, p.Message)
				assert.True(t, strings.HasSuffix(p.Message, "."), "one sentence: %q", p.Message)
				assert.NotContains(t, p.Message, "{", "services are written org/url_version_arch: %q", p.Message)
			}
			if c.maxStats > 0 {
				assert.LessOrEqual(t, store.statCalls(), c.maxStats)
			}
			if c.check != nil {
				c.check(t, rep)
			}
		})
	}
}

func with2(e SecretBinding, change func(*SecretBinding)) SecretBinding {
	change(&e)
	return e
}

// codes returns the code of every problem of rep, in report order.
func codes(rep *Report) []Code {
	out := make([]Code, len(rep.Problems))
	for i, p := range rep.Problems {
		out[i] = p.Code
	}
	return out
}

func nilIfEmpty(c []Code) []Code {
	if len(c) == 0 {
		return nil
	}
	return c
}

func TestValidateEveryArch(t *testing.T) {
	arm := with(svc("com.example.a", "1.0.0", "token"), func(d *ServiceDefinition) { d.Arch = "arm64" })
	cat, err := NewCatalog(svc("com.example.a", "1.0.0", "token"), arm, svc("com.example.a", "0.9.0", "token"))
	require.NoError(t, err)
	rep, err := Validate(context.Background(), Target{
		Services:       []agreement.ServiceRef{{Org: testOrg, URL: "com.example.a", Arch: "*"}},
		SecretBindings: []SecretBinding{{ServiceOrgid: testOrg, ServiceURL: "com.example.a", ServiceArch: "amd64", Bindings: []Binding{bind("token", "tok")}}},
	}, Options{Resolver: cat})
	require.NoError(t, err)
	assert.Equal(t, []agreement.ServiceRef{
		{Org: testOrg, URL: "com.example.a", Arch: "amd64", Version: "1.0.0"},
		{Org: testOrg, URL: "com.example.a", Arch: "arm64", Version: "1.0.0"},
	}, rep.Services)
	assert.Equal(t, []Code{CodeSecretUnbound}, codes(rep), "the arm64 version has no binding")
	assert.Equal(t, "arm64", rep.Problems[0].Service.Arch)
}

func TestValidateDependencyCycleTerminates(t *testing.T) {
	a := with(svc("com.example.a", "1.0.0"), func(d *ServiceDefinition) {
		d.RequiredServices = []ServiceDependency{{Org: testOrg, URL: "com.example.b"}}
	})
	b := with(svc("com.example.b", "1.0.0"), func(d *ServiceDefinition) {
		d.RequiredServices = []ServiceDependency{{Org: testOrg, URL: "com.example.a", VersionRange: "1.0.0"}}
	})
	cat, err := NewCatalog(a, b)
	require.NoError(t, err)
	rep, err := Validate(context.Background(), Target{Services: top("com.example.a", "1.0.0")}, Options{Resolver: cat})
	require.NoError(t, err)
	assert.Len(t, rep.Services, 2)
	assert.Empty(t, rep.Problems)
}

type failingResolver struct{ err error }

func (f failingResolver) ServiceVersions(context.Context, ServiceQuery) ([]*ServiceDefinition, error) {
	return nil, f.err
}

func TestValidateResolverFailureIsReported(t *testing.T) {
	rep, err := Validate(context.Background(), Target{Services: top("com.example.a", "1.0.0")},
		Options{Resolver: failingResolver{errors.New("exchange answered 502")}})
	require.NoError(t, err)
	require.Equal(t, []Code{CodeServiceUnresolved}, codes(rep))
	assert.Contains(t, rep.Problems[0].Message, "exchange answered 502")
}

func TestValidateArguments(t *testing.T) {
	_, err := Validate(context.Background(), Target{}, Options{})
	assert.ErrorContains(t, err, "Resolver")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cat, err := NewCatalog(svc("com.example.a", "1.0.0"))
	require.NoError(t, err)
	_, err = Validate(ctx, Target{Services: top("com.example.a", "1.0.0")}, Options{Resolver: cat})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestValidateService(t *testing.T) {
	cases := []struct {
		name string
		def  *ServiceDefinition
		want []Code
	}{
		{"device service with secrets", svc("com.example.a", "1.0.0", "token"), nil},
		{"cluster-only service without secrets", with(svc("com.example.a", "1.0.0"), func(d *ServiceDefinition) {
			d.Deployment, d.ClusterDeployment = nil, cluster()
		}), nil},
		{"cluster-only service with secrets", with(svc("com.example.a", "1.0.0", "token"), func(d *ServiceDefinition) {
			d.Deployment, d.ClusterDeployment = nil, cluster()
		}), []Code{CodeSecretsClusterOnly}},
		{"mixed service with secrets", with(svc("com.example.a", "1.0.0", "token"), func(d *ServiceDefinition) {
			d.ClusterDeployment = cluster()
		}), []Code{CodeSecretsMixedDeployment}},
		{"unsafe name and unknown format", with(svc("com.example.a", "1.0.0", "a/b"), func(d *ServiceDefinition) {
			d.Secrets["ok"] = ServiceSecret{Format: "xml"}
		}), []Code{CodeSecretNameInvalid, CodeSecretFormatInvalid}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := ValidateService(c.def)
			assert.Equal(t, c.want, nilIfEmpty(codes(rep)))
		})
	}
}

func TestReportErr(t *testing.T) {
	rep := &Report{}
	rep.add(PointDeployCheck, CodeBindingUnused, Problem{}, "entry %d is unused.", 1)
	rep.add(PointPublish, CodeBindingUnused, Problem{}, "entry %d is unused.", 2)
	assert.NoError(t, rep.Err())
	rep.add(PointDeployCheck, CodeSecretUnbound, Problem{}, "secret %q is unbound.", "a")
	rep.add(PointDeployCheck, CodeVaultSecretMissing, Problem{}, "secret %q is missing.", "b")
	err := rep.Err()
	require.Error(t, err)
	assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
	var ve *validationError
	require.ErrorAs(t, err, &ve)
	assert.Len(t, ve.problems, 2)
	assert.Equal(t, "binding: 2 problems:\n  - error secret_unbound: secret \"a\" is unbound.\n  - error vault_secret_missing: secret \"b\" is missing.", err.Error())
	assert.Len(t, rep.Warnings(), 1)
	assert.Len(t, rep.bySeverity(severityNote), 1)
}

func TestCatalogRejectsBadDefinitions(t *testing.T) {
	_, err := NewCatalog(svc("com.example.a", "1.0.0"), svc("com.example.a", "1.0.0"), svc("com.example.b", "one"), nil,
		with(svc("com.example.c", "1.0.0"), func(d *ServiceDefinition) { d.Arch = "" }))
	require.Error(t, err)
	for _, want := range []string{"definition 2", "duplicate", "definition 3", "definition 4 is nil", "definition 5", "needs org, url and arch"} {
		assert.ErrorContains(t, err, want)
	}
}

// ohDef returns an amd64 service in testOrg whose device containers declare
// the secrets given (container → name → format) and, when cluster is not
// nil, a cluster deployment declaring those.
func ohDef(url string, containers map[string]map[string]string, cluster map[string]string) *ServiceDefinition {
	d := &ServiceDefinition{Org: testOrg, URL: url, Version: "1.0.0", Arch: "amd64"}
	secrets := func(m map[string]string) map[string]ServiceSecret {
		if m == nil {
			return nil
		}
		out := map[string]ServiceSecret{}
		for name, format := range m {
			out[name] = ServiceSecret{Format: format}
		}
		return out
	}
	if containers != nil {
		d.Deployment = device()
		for c, s := range containers {
			d.Deployment.Services[c] = Workload{Secrets: secrets(s), Config: map[string]json.RawMessage{"image": json.RawMessage(`"x"`)}}
		}
	}
	if cluster != nil {
		d.ClusterDeployment = &Workload{Secrets: secrets(cluster)}
	}
	return d
}

// TestValidateOpenHorizonShapes covers secrets declared per container and
// for the cluster deployment: a binding goes to every container declaring
// the secret (anax checks one container only), serviceContainer narrows,
// and a cluster service's secrets are bound like any other.
func TestValidateOpenHorizonShapes(t *testing.T) {
	type res struct{ container, secret, format, vault string }
	web := func(url string) Target {
		return Target{Services: top(url, "1.0.0")}
	}
	cases := []struct {
		name  string
		def   *ServiceDefinition
		sb    []SecretBinding
		want  []Code
		res   []res
		point Point
	}{
		{
			name: "a secret two containers declare goes to both, each in its format",
			def:  ohDef("com.example.oh", map[string]map[string]string{"web": {"pw": agreement.FormatValueOnly}, "worker": {"pw": ""}, "cache": nil}, nil),
			sb:   []SecretBinding{sbEntry("com.example.oh", bind("pw", "db"))},
			res:  []res{{"web", "pw", agreement.FormatValueOnly, "db"}, {"worker", "pw", agreement.FormatJSON, "db"}},
		},
		{
			name: "serviceContainer narrows: the other declaring container is left unbound",
			def:  ohDef("com.example.oh", map[string]map[string]string{"web": {"pw": ""}, "worker": {"pw": ""}}, nil),
			sb:   []SecretBinding{with2(sbEntry("com.example.oh", bind("pw", "db")), func(e *SecretBinding) { e.ServiceContainer = "web" })},
			want: []Code{CodeSecretUnbound},
			res:  []res{{"web", "pw", agreement.FormatJSON, "db"}},
		},
		{
			name: "serviceContainer naming a container that does not declare the secret",
			def:  ohDef("com.example.oh", map[string]map[string]string{"web": {"pw": ""}, "worker": nil}, nil),
			sb:   []SecretBinding{with2(sbEntry("com.example.oh", bind("pw", "db")), func(e *SecretBinding) { e.ServiceContainer = "worker" })},
			want: []Code{CodeSecretUnbound, CodeSecretUndeclared},
		},
		{
			name: "per-container bindings in two entries",
			def:  ohDef("com.example.oh", map[string]map[string]string{"web": {"pw": ""}, "worker": {"pw": ""}}, nil),
			sb: []SecretBinding{
				with2(sbEntry("com.example.oh", bind("pw", "db")), func(e *SecretBinding) { e.ServiceContainer = "web" }),
				with2(sbEntry("com.example.oh", bind("pw", "user/alice/db")), func(e *SecretBinding) { e.ServiceContainer = "worker" }),
			},
			res: []res{{"web", "pw", agreement.FormatJSON, "db"}, {"worker", "pw", agreement.FormatJSON, "user/alice/db"}},
		},
		{
			name: "a cluster service's secrets are bound, in the cluster deployment",
			def:  ohDef("com.example.op", nil, map[string]string{"token": agreement.FormatValueOnly, "cert": ""}),
			sb:   []SecretBinding{sbEntry("com.example.op", bind("token", "tok"))},
			want: []Code{CodeSecretUnbound},
			res:  []res{{"", "token", agreement.FormatValueOnly, "tok"}},
		},
		{
			name: "device and cluster declare the same secret: both get it",
			def:  ohDef("com.example.both", map[string]map[string]string{"web": {"token": ""}}, map[string]string{"token": agreement.FormatValueOnly}),
			sb:   []SecretBinding{sbEntry("com.example.both", bind("token", "tok"))},
			res:  []res{{"web", "token", agreement.FormatJSON, "tok"}, {"", "token", agreement.FormatValueOnly, "tok"}},
		},
		{
			name: "serviceContainer on a cluster service names no container",
			def:  ohDef("com.example.op", nil, map[string]string{"token": ""}),
			sb:   []SecretBinding{with2(sbEntry("com.example.op", bind("token", "tok")), func(e *SecretBinding) { e.ServiceContainer = "op" })},
			want: []Code{CodeContainerUnknown},
		},
		{
			name: "declared at the top and by a container: the containers decide",
			def: with(ohDef("com.example.oh", map[string]map[string]string{"web": {"pw": agreement.FormatRaw}, "worker": nil}, nil), func(d *ServiceDefinition) {
				d.Secrets = map[string]ServiceSecret{"pw": {}}
			}),
			sb:  []SecretBinding{sbEntry("com.example.oh", bind("pw", "db"))},
			res: []res{{"web", "pw", agreement.FormatRaw, "db"}},
		},
		{
			name: "first binding wins, as in Open Horizon; a later conflicting one is a warning",
			def:  ohDef("com.example.oh", map[string]map[string]string{"web": {"pw": ""}}, nil),
			sb: []SecretBinding{
				with2(sbEntry("com.example.oh", bind("pw", "db")), func(e *SecretBinding) { e.ServiceVersionRange = "[1.0.0,2.0.0)" }),
				sbEntry("com.example.oh", bind("pw", "other")),
			},
			want:  []Code{CodeBindingConflict},
			res:   []res{{"web", "pw", agreement.FormatJSON, "db"}},
			point: PointAgreement,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cat, err := NewCatalog(c.def)
			require.NoError(t, err)
			target := web(c.def.URL)
			target.SecretBindings = c.sb
			rep, err := Validate(context.Background(), target, Options{Resolver: cat, Point: c.point})
			require.NoError(t, err)
			assert.Equal(t, c.want, nilIfEmpty(codes(rep)), "%v", rep.Problems)
			var got []res
			for _, rb := range rep.Resolved {
				got = append(got, res{rb.Service.Container, rb.ServiceSecret, rb.Format, rb.VaultSecret.String()})
			}
			assert.Equal(t, c.res, got)
			for _, p := range rep.Problems {
				assert.True(t, strings.HasSuffix(p.Message, "."), p.Message)
			}
		})
	}
}

// TestSeveritiesByPoint checks the severities anax gives at each point,
// and that problems of bindings no service needs take binding_unused's.
func TestSeveritiesByPoint(t *testing.T) {
	table := []struct {
		code                     Code
		publish, check, agreeing string
	}{
		{CodeBindingUnused, severityNote, severityWarning, severityNote},
		{CodeSecretUndeclared, severityNote, severityWarning, severityNote},
		{CodeBindingDuplicate, severityNote, severityWarning, severityNote},
		{CodeNodeSecretFallback, severityNote, severityWarning, severityNote},
		{CodeVaultSecretMissing, severityWarning, severityError, severityError},
		{CodeStoreUnavailable, severityWarning, severityError, severityError},
		{CodeStoreForbidden, severityWarning, severityError, severityError},
		{CodeBindingConflict, severityWarning, severityWarning, severityWarning},
		{CodeSecretsMixedDeployment, severityWarning, severityWarning, severityWarning},
		{CodeSecretUnbound, severityError, severityError, severityError},
		{CodeVaultSecretInvalid, severityError, severityError, severityError},
		{CodeContainerUnknown, severityError, severityError, severityError},
	}
	for _, r := range table {
		assert.Equal(t, []string{r.publish, r.check, r.agreeing},
			[]string{r.code.severityAt(PointPublish), r.code.severityAt(PointDeployCheck), r.code.severityAt(PointAgreement)}, string(r.code))
	}

	a := svc("com.example.a", "1.0.0", "token")
	cat, err := NewCatalog(a)
	require.NoError(t, err)
	checker, err := NewStoreChecker(newStore(t).Store, testOrg)
	require.NoError(t, err)
	type sev struct {
		code     Code
		severity string
	}
	cases := []struct {
		name string
		sb   []SecretBinding
		want []sev
	}{
		{
			name: "an invalid vault name: an error where needed, a note where not",
			sb:   []SecretBinding{sbEntry("com.example.a", bind("token", "openhorizon/x"), bind("debug", "user/alice"))},
			want: []sev{{CodeVaultSecretInvalid, severityError}, {CodeVaultSecretInvalid, severityNote}, {CodeSecretUndeclared, severityNote}},
		},
		{
			name: "an invalid version range: an error where the entry selects a deployed service, a note elsewhere",
			sb: []SecretBinding{
				sbEntry("com.example.a", bind("token", "tok")),
				with2(sbEntry("com.example.a", bind("token", "tok")), func(e *SecretBinding) { e.ServiceVersionRange = "[1" }),
				with2(sbEntry("com.example.gone", bind("x", "tok")), func(e *SecretBinding) { e.ServiceVersionRange = "[1" }),
			},
			want: []sev{{CodeVersionRangeInvalid, severityError}, {CodeVersionRangeInvalid, severityNote}, {CodeVaultSecretMissing, severityWarning}},
		},
		{
			name: "entries that cannot select anything are notes",
			sb: []SecretBinding{
				sbEntry("com.example.a", bind("token", "tok")),
				{ServiceURL: "com.example.a", Bindings: []Binding{bind("token", "tok")}},
				with2(sbEntry("com.example.a", bind("", "tok"), bind("../x", "tok")), func(e *SecretBinding) { e.ServiceArch = "amd 64" }),
			},
			want: []sev{{CodeFieldMissing, severityNote}, {CodeArchInvalid, severityNote}, {CodeFieldMissing, severityNote}, {CodeSecretNameInvalid, severityNote}, {CodeVaultSecretMissing, severityWarning}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Validate(context.Background(), Target{Services: top("com.example.a", "1.0.0"), SecretBindings: c.sb},
				Options{Resolver: cat, Checker: checker, Point: PointPublish})
			require.NoError(t, err)
			var got []sev
			for _, p := range rep.Problems {
				got = append(got, sev{p.Code, p.Severity})
			}
			assert.Equal(t, c.want, got, "%v", rep.Problems)
		})
	}
}
