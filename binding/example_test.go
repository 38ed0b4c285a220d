package binding_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

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
		"secrets": {"db_password": {"type": "password"}, "api_key": {}},
		"deployment": {"services": {"web": {"image": "example/web:1"}}}}`))
	policy, _ := binding.DecodeDeploymentPolicy(strings.NewReader(`{
		"service": {"name": "com.example.web", "org": "myorg", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
		"secretBinding": [{"serviceOrgid": "myorg", "serviceUrl": "com.example.web", "serviceArch": "amd64",
			"serviceVersionRange": "[1.0.0,INFINITY)",
			"secrets": [{"db_password": "user/alice/db"}, {"api_key": "web/api-key"}]}]}`))

	store := memory.New()
	store.Put(ctx, &secretstore.Secret{Name: "myorg/user/alice/db", Data: secretstore.Data{"password": []byte("pw")}}, secretstore.PutOptions{})

	catalog, _ := binding.NewCatalog(svc)
	checker, _ := binding.NewStoreChecker(store, "myorg")
	report, err := binding.Validate(ctx, policy.Target(), binding.Options{Resolver: catalog, Checker: checker})
	if err != nil {
		panic(err)
	}
	for _, p := range report.Problems {
		fmt.Println(p)
	}
	fmt.Println("deployable:", report.OK())
	// Output:
	// error vault_secret_missing: Vault secret "web/api-key", bound to secret "api_key" of myorg/com.example.web_1.0.0_amd64 container web, does not exist.
	// deployable: false
}

// Publishing a service checks its own secret declarations.
func ExampleValidateService() {
	svc, _ := binding.DecodeServiceDefinition(strings.NewReader(`{
		"org": "myorg", "url": "com.example.op", "version": "1.0.0", "arch": "amd64",
		"secrets": {"token": {}}, "clusterDeployment": {"operatorYamlArchive": "H4sI"}}`))
	fmt.Println(binding.ValidateService(svc).Err())
	// Output:
	// binding: error secrets_cluster_only: Service myorg/com.example.op_1.0.0_amd64 declares secrets but has only a cluster deployment; secrets are supported on edge devices only.
}

func ExampleParseVaultSecretName() {
	for _, s := range []string{"db/password", "user/alice/db", "node/n7/cert", "user/alice/node/n7/cert", "openhorizon/myorg/db"} {
		n, err := binding.ParseVaultSecretName(s)
		if err != nil {
			fmt.Println("invalid:", err)
			continue
		}
		path, _ := n.StorePath("myorg")
		fmt.Printf("%-9s %s\n", n.Scope, path)
	}
	// Output:
	// org       myorg/db/password
	// user      myorg/user/alice/db
	// node      myorg/node/n7/cert
	// user+node myorg/user/alice/node/n7/cert
	// invalid: vault secret name starts with "openhorizon/": give the name relative to the organisation, without the store prefix
}

// The agbot turns a clean validation into the bindings of the agreement:
// each service (container) with its secrets' store paths and formats, what
// agreement.ReadProposal reads and agreement.Tracker.Register tracks.
func ExampleReport_ServiceBindings() {
	ctx := context.Background()
	svc, _ := binding.DecodeServiceDefinition(strings.NewReader(`{
		"org": "myorg", "url": "com.example.web", "version": "1.0.0", "arch": "amd64",
		"secrets": {"db_password": {}, "tls_key": {"format": "raw"}},
		"deployment": {"services": {"web": {"image": "example/web:1"}}}}`))
	policy, _ := binding.DecodeDeploymentPolicy(strings.NewReader(`{
		"service": {"name": "com.example.web", "org": "myorg", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
		"secretBinding": [{"serviceOrgid": "myorg", "serviceUrl": "com.example.web", "serviceArch": "amd64",
			"serviceVersionRange": "[1.0.0,INFINITY)",
			"secrets": [{"db_password": "user/alice/db"}, {"tls_key": "node/node-1/tls"}]}]}`))
	store := memory.New()
	for _, name := range []string{"myorg/user/alice/db", "myorg/node/node-1/tls"} {
		store.Put(ctx, &secretstore.Secret{Name: name, Data: secretstore.Data{"value": []byte("v")}}, secretstore.PutOptions{})
	}
	catalog, _ := binding.NewCatalog(svc)
	checker, _ := binding.NewStoreChecker(store, "myorg")
	report, err := binding.Validate(ctx, policy.Target(), binding.Options{Resolver: catalog, Checker: checker})
	if err != nil {
		panic(err)
	}

	bindings, err := report.ServiceBindings("myorg")
	if err != nil {
		panic(err) // the report has errors: do not deploy
	}
	for _, sb := range bindings {
		fmt.Println(sb.Service)
		for _, name := range slices.Sorted(maps.Keys(sb.Secrets)) {
			b := sb.Secrets[name]
			fmt.Printf("  %s <- %s (%s)\n", name, b.VaultSecret, b.Format)
		}
	}
	// Output:
	// myorg/com.example.web@1.0.0[amd64]#web
	//   db_password <- myorg/user/alice/db (json)
	//   tls_key <- myorg/node/node-1/tls (raw)
}
