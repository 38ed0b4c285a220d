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
	"slices"
	"syscall"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"

	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
	"github.com/edgesecrets/edgesecrets/internal/safename"
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

// deployment returns the deployment the agbot deploys now.
func (a *agbot) deployment() *deployment {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dep
}

// reloadOnHangup reloads the -deployment file at path on every SIGHUP
// until ctx ends (see reload).
func (a *agbot) reloadOnHangup(ctx context.Context, path string) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			n, err := a.reload(ctx, path)
			if err != nil {
				a.log.Error("deployment file not reloaded; the agbot keeps deploying the one it had", slog.String("err", err.Error()))
				continue
			}
			a.log.Info("deployment file reloaded; the nodes' agreements are registered again with it", slog.String("file", path), slog.Int("nodes", n))
		}
	}
}

// reload reads the -deployment file at path again and deploys it to every
// node that has an agreement: a changed secretBinding reaches the running
// services in place, as new content of the same secrets (see deploy). A
// file that does not decode, or that names another organisation, changes
// nothing. It returns how many nodes are being redeployed.
func (a *agbot) reload(ctx context.Context, path string) (int, error) {
	dep, err := loadDeployment(path)
	if err != nil {
		return 0, err
	}
	if cur := a.deployment(); dep.org != cur.org {
		return 0, fmt.Errorf("deployment file %s: org %q is not the agbot's %q: the organisation is the agbot's for its whole run (its nodes, its users' secrets); start another agbot for it", path, dep.org, cur.org)
	}
	a.mu.Lock()
	a.dep = dep
	a.mu.Unlock()
	var nodes []string
	err = a.state.Records(ctx, func(r delivery.Record) bool {
		if r.Phase == delivery.PhaseActive {
			nodes = append(nodes, r.Node)
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("deployment file %s loaded, but the agreements to apply it to could not be read; the next certificate an agent publishes applies it to its node: %w", path, err)
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	for _, s := range nodes {
		if n, ok := parseNode(s); ok {
			a.spawn(func(ctx context.Context) { a.deploy(ctx, n) })
		}
	}
	return len(nodes), nil
}
