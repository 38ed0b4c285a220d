package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// serviceDefinition is the published service: one container, two secrets.
// The secret names become file names under /open-horizon-secrets.
const serviceDefinition = `{
  "org": "myorg", "url": "com.example.web", "version": "1.0.0", "arch": "amd64",
  "secrets": {
    "db":        {"type": "basic-auth", "description": "database login"},
    "api_token": {"type": "token", "description": "partner API token", "format": "raw"}
  },
  "deployment": {"services": {"web": {"image": "example/web:1.0.0"}}}
}`

// goodPolicy deploys the service and binds both its secrets.
const goodPolicy = `{
  "service": {"name": "com.example.web", "org": "myorg", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
  "secretBinding": [{
    "serviceOrgid": "myorg", "serviceUrl": "com.example.web", "serviceArch": "amd64",
    "serviceVersionRange": "[1.0.0,INFINITY)",
    "bindings": {
      "db":        {"vaultSecret": "db/web-login"},
      "api_token": {"vaultSecret": "user/alice/api-token"}
    }
  }]
}`

// brokenPolicy makes several mistakes at once; validation reports all.
const brokenPolicy = `{
  "service": {"name": "com.example.web", "org": "myorg", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
  "secretBinding": [{
    "serviceOrgid": "myorg", "serviceUrl": "com.example.web", "serviceArch": "amd64",
    "bindings": {
      "db":    {"vaultSecret": "db/web-logn"},
      "cache": {"vaultSecret": "user/alice"}
    }
  }]
}`

// deployerUser is the deployer's user name at the agbot's existence API.
const deployerUser = "alice"

// publishService checks the service definition as publishing it does and
// returns the catalog that stands in for the exchange's service registry.
func publishService() (binding.Resolver, error) {
	def, err := binding.DecodeServiceDefinition(strings.NewReader(serviceDefinition))
	if err != nil {
		return nil, err
	}
	if err := binding.ValidateService(def).Err(); err != nil {
		return nil, err
	}
	return binding.NewCatalog(def)
}

// deployer checks deployment policies before adding them, as
// `hzn deploycheck` does: against the service definitions and, through the
// agbot's existence API, the store.
type deployer struct {
	catalog binding.Resolver
	agbot   *secretsapi.Client
	say     *narrator
	log     *slog.Logger
}

func newDeployer(agbotURL string, catalog binding.Resolver, client *http.Client, password string, say *narrator, logger *slog.Logger) (*deployer, error) {
	log := logger.With("component", "deployer")
	agbot, err := secretsapi.NewClient(agbotURL, secretsapi.ClientOptions{
		HTTPClient: client,
		Authorize:  func(r *http.Request) { r.SetBasicAuth(deployerUser, password) },
		Logger:     log,
	})
	if err != nil {
		return nil, err
	}
	return &deployer{catalog: catalog, agbot: agbot, say: say, log: log}, nil
}

// check validates a deployment policy document and returns its target and
// the report.
func (d *deployer) check(ctx context.Context, policyJSON string) (binding.Target, *binding.Report, error) {
	policy, err := binding.DecodeDeploymentPolicy(strings.NewReader(policyJSON))
	if err != nil {
		return binding.Target{}, nil, err
	}
	report, err := binding.Validate(ctx, policy, binding.Options{Resolver: d.catalog, Checker: d.agbot, Logger: d.log})
	return policy, report, err
}

// validateBindings is the deployer checking the good policy (which the
// agbot will then deploy) and a broken one.
func (f *flow) validateBindings(ctx context.Context) error {
	target, report, err := f.deployer.check(ctx, goodPolicy)
	if err != nil {
		return err
	}
	if err := report.Err(); err != nil {
		return fmt.Errorf("the good policy is refused: %w", err)
	}
	if !report.ExistenceChecked {
		return fmt.Errorf("the vault secrets' existence was not checked")
	}
	var bound []string
	for _, rb := range report.Resolved {
		bound = append(bound, fmt.Sprintf("%s -> %s", rb.ServiceSecret, rb.VaultSecret))
	}
	f.say.sayf("deployer", "policy for %s is valid: %s (existence checked through the agbot API)",
		report.Resolved[0].Service, strings.Join(bound, ", "))
	f.target = target
	f.agbot.deployPolicy(target) // to every node whose agent registers from now on

	_, report, err = f.deployer.check(ctx, brokenPolicy)
	if err != nil {
		return err
	}
	if report.Err() == nil {
		return fmt.Errorf("the broken policy passed validation")
	}
	f.say.sayf("deployer", "a broken policy is refused, with every problem in one report:")
	for _, p := range report.Problems {
		f.say.sayf("", "  %s", p)
	}

	health, err := f.deployer.agbot.Health(ctx)
	if err != nil {
		return err
	}
	if health.LiveHealth == nil || health.LiveHealth.LastVaultInteraction == 0 {
		return fmt.Errorf("the agbot's /health reports no store interaction")
	}
	f.say.sayf("deployer", "agbot /health: last store interaction at %s", time.Unix(int64(health.LiveHealth.LastVaultInteraction), 0).Format("15:04:05"))
	return nil
}
