package binding_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// A deployer's policy is checked against the service, its dependencies and
// the store, and every problem is reported at once.
func ExampleValidate() {
	ctx := context.Background()
	svc, _ := binding.DecodeServiceDefinition(strings.NewReader(`{
		"org": "myorg", "url": "com.example.web", "version": "1.0.0", "arch": "amd64",
		"deployment": {"services": {"web": {"image": "example/web:1",
			"secrets": {"db_password": {"description": "database"}, "api_key": {"format": "value_only"}}}}}}`))
	policy, _ := binding.DecodeDeploymentPolicy(strings.NewReader(`{
		"service": {"name": "com.example.web", "org": "myorg", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
		"secretBinding": [{"serviceOrgid": "myorg", "serviceUrl": "com.example.web", "serviceArch": "amd64",
			"serviceVersionRange": "[1.0.0,INFINITY)",
			"secrets": [{"db_password": "user/alice/db"}, {"api_key": "web/api-key"}, {"debug": "web/debug"}]}]}`))

	store := memory.New()
	if _, err := store.Put(ctx, &secretstore.Secret{Name: "myorg/user/alice/db", Data: edgesecrets.Data{"password": []byte("pw")}}, secretstore.PutOptions{}); err != nil {
		fmt.Println(err)
		return
	}

	catalog, _ := binding.NewCatalog(svc)
	checker, _ := binding.NewStoreChecker(store, "myorg")
	report, err := binding.Validate(ctx, policy, binding.Options{Resolver: catalog, Checker: checker})
	if err != nil {
		panic(err)
	}
	for _, p := range report.Problems {
		fmt.Println(p)
	}
	fmt.Println("deployable:", (report.Err() == nil))
	// Output:
	// warning secret_undeclared: secretBinding entry 1 binds secret "debug", which service myorg/com.example.web_1.0.0_amd64 does not declare, so the binding is not needed.
	// error vault_secret_missing: Vault secret "web/api-key", bound to secret "api_key" of myorg/com.example.web_1.0.0_amd64 container web, does not exist.
	// deployable: false
}

// The same policy checked where `hzn exchange deployment addpolicy` checks
// it: Open Horizon only warns about a missing vault secret there, and notes
// a binding no service needs.
func ExampleValidate_publish() {
	ctx := context.Background()
	svc, _ := binding.DecodeServiceDefinition(strings.NewReader(`{
		"org": "myorg", "url": "com.example.web", "version": "1.0.0", "arch": "amd64",
		"deployment": {"services": {"web": {"image": "example/web:1", "secrets": {"api_key": {}}}}}}`))
	policy, _ := binding.DecodeDeploymentPolicy(strings.NewReader(`{
		"service": {"name": "com.example.web", "org": "myorg", "arch": "*", "serviceVersions": [{"version": "1.0.0"}]},
		"secretBinding": [{"serviceOrgid": "myorg", "serviceUrl": "com.example.web",
			"secrets": [{"api_key": "web/api-key"}, {"debug": "web/debug"}]}]}`))
	catalog, _ := binding.NewCatalog(svc)
	checker, _ := binding.NewStoreChecker(memory.New(), "myorg")
	report, err := binding.Validate(ctx, policy, binding.Options{Resolver: catalog, Checker: checker, Point: binding.PointPublish})
	if err != nil {
		panic(err)
	}
	for _, p := range report.Problems {
		fmt.Println(p.Severity, p.Code)
	}
	fmt.Println("publishable:", (report.Err() == nil))
	// Output:
	// note secret_undeclared
	// warning vault_secret_missing
	// publishable: true
}

// Publishing a service checks its own secret declarations, wherever they
// are made: a cluster service declares them in clusterDeployment.secrets.
func ExampleValidateService() {
	op, _ := binding.DecodeServiceDefinition(strings.NewReader(`{
		"org": "myorg", "url": "k8s-hello-secret", "version": "1.0.0", "arch": "amd64",
		"clusterDeployment": {"operatorYamlArchive": "H4sI", "secrets": {
			"secret1": {"description": "Secret 1"}, "secret2": {"format": "value_only"}}}}`))
	fmt.Println(op.Deployment == nil, slices.Sorted(maps.Keys(op.ClusterDeployment.Secrets)), binding.ValidateService(op).Err() == nil)

	bad, _ := binding.DecodeServiceDefinition(strings.NewReader(`{
		"org": "myorg", "url": "com.example.web", "version": "1.0.0", "arch": "amd64",
		"deployment": {"services": {"web": {"image": "example/web:1", "secrets": {"../etc": {}, "db": {"format": "yaml"}}}}}}`))
	for _, p := range binding.ValidateService(bad).Problems {
		fmt.Println(p)
	}
	// Output:
	// true [secret1 secret2] true
	// error secret_name_invalid: Container "web" of service myorg/com.example.web_1.0.0_amd64 declares secret "../etc", whose name contains a slash or backslash; it must be a single safe file name.
	// error secret_format_invalid: Container "web" of service myorg/com.example.web_1.0.0_amd64 declares secret "db" with format "yaml"; the format must be "json" (the default), "value_only" or "raw".
}

func ExampleParseVaultSecretName() {
	for _, s := range []string{"db/password", "user/alice/db", "node/n7/cert", "user/alice/node/n7/cert", "openhorizon/myorg/db"} {
		n, err := binding.ParseVaultSecretName(s)
		if err != nil {
			fmt.Println("invalid:", err)
			continue
		}
		path, _ := n.StorePath("myorg")
		fmt.Printf("%-30s user %q, node %q\n", path, n.User, n.Node)
	}
	// Output:
	// myorg/db/password              user "", node ""
	// myorg/user/alice/db            user "alice", node ""
	// myorg/node/n7/cert             user "", node "n7"
	// myorg/user/alice/node/n7/cert  user "alice", node "n7"
	// invalid: vault secret name starts with "openhorizon/": give the name relative to the organisation, without the store prefix
}

// With enableNodeLevelSecrets a binding resolves per node: the node's own
// secret first, the organisation's next. A secret two containers declare
// is bound in both.
func ExampleReport_Bindings() {
	ctx := context.Background()
	svc, _ := binding.DecodeServiceDefinition(strings.NewReader(`{
		"org": "myorg", "url": "com.example.web", "version": "1.0.0", "arch": "amd64",
		"deployment": {"services": {
			"web": {"image": "example/web:1", "secrets": {"api_key": {"format": "value_only"}}},
			"worker": {"image": "example/worker:1", "secrets": {"api_key": {}}}}}}`))
	policy, _ := binding.DecodeDeploymentPolicy(strings.NewReader(`{
		"service": {"name": "com.example.web", "org": "myorg", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
		"secretBinding": [{"serviceOrgid": "myorg", "serviceUrl": "com.example.web", "serviceArch": "amd64",
			"serviceVersionRange": "[0.0.0,INFINITY)", "enableNodeLevelSecrets": true,
			"secrets": [{"api_key": "web/api-key"}]}]}`))
	catalog, _ := binding.NewCatalog(svc)
	report, err := binding.Validate(ctx, policy, binding.Options{Resolver: catalog, Point: binding.PointAgreement, Node: "node-1"})
	if err != nil {
		panic(err)
	}
	bindings, err := report.Bindings("myorg", "node-1")
	if err != nil {
		panic(err) // the report has errors: do not deploy
	}
	for _, sb := range bindings {
		b := sb.Secrets["api_key"]
		fmt.Println(sb.Service.Container, b.Format, b.StoreNames)
	}
	// Output:
	// web value_only [myorg/node/node-1/web/api-key myorg/web/api-key]
	// worker json [myorg/node/node-1/web/api-key myorg/web/api-key]
}
