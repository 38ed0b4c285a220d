package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/relay"
)

// maxDeploymentFileSize bounds the -deployment file: a few service
// definitions and one pattern or policy: four times the 16 MiB
// binding.DecodeServiceDefinition accepts for one definition.
const maxDeploymentFileSize = 4 * (16 << 20)

// deploymentFile is the -deployment file: the organisation, the service
// definitions the deployment needs (the deployed services and their
// dependencies, as the exchange would supply them), and a deployment
// policy or a pattern with its secretBinding:
//
//	{"org": "myorg",
//	 "services": [{"org": "myorg", "url": "com.example.web", ...}],
//	 "deploymentPolicy": {"service": {...}, "secretBinding": [...]}}
type deploymentFile struct {
	Org              string            `json:"org"`
	Services         []json.RawMessage `json:"services"`
	DeploymentPolicy json.RawMessage   `json:"deploymentPolicy"`
	Pattern          json.RawMessage   `json:"pattern"`
}

// deployment is what the agbot deploys to every node of its organisation
// whose agent shows a valid identity.
type deployment struct {
	org     string
	target  binding.Target
	catalog binding.Resolver
}

// loadDeployment reads and decodes the -deployment file. The service
// definitions, policy and pattern go through the binding package's own
// decoders and limits.
func loadDeployment(path string) (*deployment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	var df deploymentFile
	if err := jsonproblem.Decode(f, maxDeploymentFileSize, &df); err != nil {
		return nil, fmt.Errorf("deployment file %s: %w", path, err)
	}
	d, err := df.decode()
	if err != nil {
		return nil, fmt.Errorf("deployment file %s: %w", path, err)
	}
	return d, nil
}

func (df deploymentFile) decode() (*deployment, error) {
	var problems []error
	if err := safename.Check(df.Org); err != nil {
		problems = append(problems, fmt.Errorf("org: %w", err))
	}
	var defs []*binding.ServiceDefinition
	for i, raw := range df.Services {
		def, err := binding.DecodeServiceDefinition(bytes.NewReader(raw))
		if err != nil {
			problems = append(problems, fmt.Errorf("services[%d]: %w", i, err))
			continue
		}
		defs = append(defs, def)
	}
	if len(df.Services) == 0 {
		problems = append(problems, errors.New("services: none given"))
	}
	var target binding.Target
	switch {
	case df.DeploymentPolicy != nil && df.Pattern != nil:
		problems = append(problems, errors.New("give a deploymentPolicy or a pattern, not both"))
	case df.DeploymentPolicy != nil:
		p, err := binding.DecodeDeploymentPolicy(bytes.NewReader(df.DeploymentPolicy))
		if err != nil {
			problems = append(problems, fmt.Errorf("deploymentPolicy: %w", err))
		} else {
			target = p
		}
	case df.Pattern != nil:
		p, err := binding.DecodePattern(bytes.NewReader(df.Pattern))
		if err != nil {
			problems = append(problems, fmt.Errorf("pattern: %w", err))
		} else {
			target = p
		}
	default:
		problems = append(problems, errors.New("deploymentPolicy or pattern: missing"))
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	catalog, err := binding.NewCatalog(defs...)
	if err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	return &deployment{org: df.Org, target: target, catalog: catalog}, nil
}

// deployments holds the deployment the agbot deploys now; reload
// replaces it.
type deployments struct {
	mu      sync.Mutex
	current *deployment
}

// get returns the deployment the agbot deploys now.
func (d *deployments) get() *deployment {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.current
}

// deploy is the agbot's Options.Deploy: every node of the deployment's
// organisation whose agent shows a valid identity gets the deployment.
func (d *deployments) deploy(_ context.Context, n relay.Node) (agbot.Deployment, bool) {
	dep := d.get()
	return agbot.Deployment{Target: dep.target, Resolver: dep.catalog}, n.Org == dep.org
}

// reloadOnHangup reloads the -deployment file at path on every SIGHUP
// until ctx ends, and deploys it again to every node that has an
// agreement (agbot.Agbot.Redeploy): a changed secretBinding reaches the
// running services in place, as new content of the same secrets; changed
// services end the agreement and make it again.
func (d *deployments) reloadOnHangup(ctx context.Context, path string, a *agbot.Agbot, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := d.reload(path); err != nil {
				log.Error("deployment file not reloaded; the agbot keeps deploying the one it had", slog.String("err", err.Error()))
				continue
			}
			n, err := a.Redeploy(ctx)
			if err != nil {
				log.Error("deployment file reloaded, but not applied to the nodes' agreements; the next certificate an agent publishes applies it to its node", slog.String("err", err.Error()))
				continue
			}
			log.Info("deployment file reloaded; the nodes' agreements are registered again with it", slog.String("file", path), slog.Int("nodes", n))
		}
	}
}

// reload reads the -deployment file at path again and makes it the one
// deployed. A file that does not decode, or that names another
// organisation, changes nothing.
func (d *deployments) reload(path string) error {
	dep, err := loadDeployment(path)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if dep.org != d.current.org {
		return fmt.Errorf("deployment file %s: org %q is not the agbot's %q: the organisation is the agbot's for its whole run (its nodes, its users' secrets); start another agbot for it", path, dep.org, d.current.org)
	}
	d.current = dep
	return nil
}
