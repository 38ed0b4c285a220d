package binding

import (
	"fmt"
	"slices"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/safename"
)

// ServiceBinding is one service (container) of a deployment with each of
// its secrets resolved to store names for one node: what the agbot's
// delivery engine keeps current on that node.
type ServiceBinding struct {
	// Service is the service (container) the secrets are mounted into. An
	// empty Container is the service's cluster deployment, whose secrets
	// the agent hands the operator as one Kubernetes Secret.
	Service agreement.ServiceRef
	// Secrets maps each service secret name (its file name on the node) to
	// the store secrets it is bound to.
	Secrets map[string]BoundSecret
}

// BoundSecret is the store secret a service secret resolves to.
type BoundSecret struct {
	// StoreNames are store paths in order of preference: with
	// enableNodeLevelSecrets, the node-level secret first, then the
	// organisation- or user-level one. The first that exists is delivered;
	// when it is deleted, the next one is. Never empty.
	StoreNames []string
	// Format is how the agent lays the secret out in its file.
	Format string
}

// candidates returns the vault secret names a binding to name resolves to
// for node, in order of preference, following anax's lookup
// (agreementbot/agreementworker.go ValidateAndExtractSecrets and
// compcheck.VerifySingleVaultSecret):
//
//   - without enableNodeLevelSecrets (nodeLevel false): name itself;
//   - with it, for a name without a node segment: the same name for node
//     ("node/<node>/<name>" or "user/<user>/node/<node>/<name>"), then
//     name; without a node, name alone;
//   - with it, for a name that already names a node: that name, then the
//     name without its node segment.
func candidates(name VaultSecretName, nodeLevel bool, node string) []VaultSecretName {
	if !nodeLevel {
		return []VaultSecretName{name}
	}
	if name.Node != "" {
		base := name
		base.Node = ""
		return []VaultSecretName{name, base}
	}
	if node == "" {
		return []VaultSecretName{name}
	}
	atNode := name
	atNode.Node = node
	return []VaultSecretName{atNode, name}
}

// StoreNames returns the store names rb resolves to for one node of
// organisation org, in order of preference: its candidates (see
// Report.Bindings). node is the node's id within org; "" gives no
// node-level candidates. The names are not checked against the store.
func (rb ResolvedBinding) StoreNames(org, node string) ([]string, error) {
	names := candidates(rb.VaultSecret, rb.NodeLevel, node)
	out := make([]string, 0, len(names))
	for _, n := range names {
		path, err := n.StorePath(org)
		if err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

// Bindings resolves a clean report for one node of organisation org:
// the resolved bindings grouped by service (container), in the order
// services first appear in Resolved, each secret with its ordered
// candidate store names (see BoundSecret) and format. A secret declared by
// several containers is bound in each of them; an empty Container is the
// cluster deployment.
//
// With enableNodeLevelSecrets a binding to "<name>" (or "user/<u>/<name>")
// resolves to "<org>/node/<node>/<name>" (or "<org>/user/<u>/node/<node>/<name>")
// first and to "<org>/<name>" (or "<org>/user/<u>/<name>") next, as anax's
// agbot looks secrets up; a binding that already names a node resolves to
// it and then to the name without the node. node is the node's id within
// org (not "<org>/<id>"); "" gives no node-level candidates. Without
// enableNodeLevelSecrets a binding resolves to its one name.
//
// A report with errors returns the error of Err and no bindings. An org or
// node that is not a single safe path element, a name that makes no valid
// store path, or one service secret resolved twice differently (a report
// Validate did not make) is an error matching edgesecrets.ErrInvalid.
func (r *Report) Bindings(org, node string) ([]ServiceBinding, error) {
	if err := r.Err(); err != nil {
		return nil, err
	}
	if err := safename.Check(org); err != nil {
		return nil, fmt.Errorf("binding: bindings: %w: organisation %s", edgesecrets.ErrInvalid, err)
	}
	if node != "" {
		if err := safename.Check(node); err != nil {
			return nil, fmt.Errorf("binding: bindings: %w: node id %s", edgesecrets.ErrInvalid, err)
		}
	}
	var out []ServiceBinding
	index := map[agreement.ServiceRef]int{}
	for _, rb := range r.Resolved {
		names, err := rb.StoreNames(org, node)
		if err != nil {
			return nil, fmt.Errorf("binding: bindings: %w: secret %q of %s: %w", edgesecrets.ErrInvalid, rb.ServiceSecret, refString(rb.Service), err)
		}
		bound := BoundSecret{StoreNames: names, Format: rb.Format}
		i, ok := index[rb.Service]
		if !ok {
			i = len(out)
			index[rb.Service] = i
			out = append(out, ServiceBinding{Service: rb.Service, Secrets: map[string]BoundSecret{}})
		}
		if prev, dup := out[i].Secrets[rb.ServiceSecret]; dup && (prev.Format != bound.Format || !slices.Equal(prev.StoreNames, bound.StoreNames)) {
			return nil, fmt.Errorf("binding: bindings: %w: secret %q of %s is resolved to store secrets %q (format %q) and to %q (format %q)",
				edgesecrets.ErrInvalid, rb.ServiceSecret, refString(rb.Service), prev.StoreNames, prev.Format, bound.StoreNames, bound.Format)
		}
		out[i].Secrets[rb.ServiceSecret] = bound
	}
	return out, nil
}
