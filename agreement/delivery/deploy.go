package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/safename"
)

// Deployment is what Engine.Deploy validates and registers: a pattern's or
// deployment policy's services and secret bindings, deployed to one node
// under one agreement.
type Deployment struct {
	// ID is the agreement's id, and the id of the deployment's wait while
	// it waits for missing secrets (Options.OnReady receives it after a
	// restart).
	ID string
	// Node is the agreement's node, as Agents and Transport know it.
	Node string
	// Org is the organisation whose secrets the bindings name, and NodeID
	// the node's id within it, for bindings with enableNodeLevelSecrets
	// (binding.Options.Node); empty NodeID gives no node-level candidates.
	Org, NodeID string
	// Target is the pattern or deployment policy (binding.DecodePattern,
	// binding.DecodeDeploymentPolicy), and Resolver supplies its service
	// definitions.
	Target   binding.Target
	Resolver binding.Resolver
}

// Deployed says what Engine.Deploy did with a deployment that was not
// refused: exactly one of Registered, Waiting and Retrying is set.
type Deployed struct {
	// Registered: the agreement is registered (or already was, with these
	// bindings).
	Registered bool
	// Waiting lists the store names of bound secrets that do not exist:
	// the deployment waits for them and is registered once they all do.
	Waiting []string
	// Retrying says why the engine could not decide yet: the agbot's own
	// trouble (the store unavailable or refusing the agbot, the state
	// unavailable). The engine tries the deployment again every cycle.
	Retrying string
	// Report is the validation report (nil when validation did not run).
	Report *binding.Report
}

// RefusedError is Engine.Deploy's error for a deployment that is wrong
// whatever the store says: its report's errors are neither missing
// secrets nor the agbot's own trouble. It matches edgesecrets.ErrInvalid.
type RefusedError struct {
	// Report is the whole validation report.
	Report *binding.Report
}

// Error lists the report's errors.
func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString("delivery: deployment refused")
	for _, p := range e.Report.Errors() {
		if !agbotTrouble(p.Code) && p.Code != binding.CodeVaultSecretMissing {
			b.WriteString("\n  - ")
			b.WriteString(p.String())
		}
	}
	return b.String()
}

// Unwrap returns edgesecrets.ErrInvalid.
func (e *RefusedError) Unwrap() error { return edgesecrets.ErrInvalid }

// agbotTrouble reports whether a problem code is the agbot's own trouble,
// which says nothing about the deployment.
func agbotTrouble(c binding.Code) bool {
	return c == binding.CodeStoreUnavailable || c == binding.CodeStoreForbidden
}

// Deploy is the agbot's deploy step: it validates d's secret bindings
// against the store for d's node (binding.Validate at
// binding.PointAgreement) and then
//
//   - registers the agreement when they are valid (Register);
//   - makes the deployment wait when only bound secrets are missing (for
//     any candidate of each such binding) and tries it again whenever one
//     of them appears, registering it once every binding has a secret
//     (WaitForSecrets; after a restart Options.OnReady is called instead,
//     for the embedder to deploy again);
//   - tries it again every cycle, while Run runs, when the agbot's own
//     trouble stopped the check (the store unavailable, the store refusing
//     the agbot, the state unavailable): such trouble never refuses a
//     deployment;
//   - refuses it only for a definite validation error, one the store's
//     answers cannot change, with a *RefusedError carrying the report.
//
// A Deployment missing a field is an error matching edgesecrets.ErrInvalid;
// an agreement of d.ID that exists with other services or another node
// (which Register cannot change in place) is Register's error matching
// ErrExists.
// Deploying an agreement again replaces what the engine remembered of it.
func (e *Engine) Deploy(ctx context.Context, d Deployment) (Deployed, error) {
	if err := d.check(); err != nil {
		return Deployed{}, err
	}
	out, err := e.deployOnce(ctx, d)
	e.deploysMu.Lock()
	defer e.deploysMu.Unlock()
	e.deployGen++
	if err != nil || out.Registered {
		delete(e.deploys, d.ID)
	} else {
		e.deploys[d.ID] = pendingDeploy{Deployment: d, gen: e.deployGen}
	}
	return out, err
}

// pendingDeploy is a deployment Deploy could not decide, and which call
// of Deploy remembered it.
type pendingDeploy struct {
	Deployment
	gen uint64
}

// check names every missing or invalid field.
func (d Deployment) check() error {
	var problems []error
	if d.ID == "" {
		problems = append(problems, errors.New("ID is empty"))
	}
	if d.Node == "" {
		problems = append(problems, errors.New("node is empty"))
	}
	if err := safename.Check(d.Org); err != nil {
		problems = append(problems, fmt.Errorf("organisation %w", err))
	}
	if d.NodeID != "" {
		if err := safename.Check(d.NodeID); err != nil {
			problems = append(problems, fmt.Errorf("node id %w", err))
		}
	}
	if d.Resolver == nil {
		problems = append(problems, errors.New("resolver is nil"))
	}
	if len(problems) > 0 {
		return fmt.Errorf("delivery: deploy %q: %w: %w", d.ID, edgesecrets.ErrInvalid, errors.Join(problems...))
	}
	return nil
}

// deployOnce makes one attempt of Deploy.
func (e *Engine) deployOnce(ctx context.Context, d Deployment) (Deployed, error) {
	log := e.log.With(slog.String("agreement", d.ID), slog.String("node", d.Node))
	checker, err := binding.NewStoreChecker(e.store, d.Org)
	if err != nil {
		return Deployed{}, fmt.Errorf("delivery: deploy %q: %w: %w", d.ID, edgesecrets.ErrInvalid, err)
	}
	report, err := binding.Validate(ctx, d.Target, binding.Options{
		Resolver: d.Resolver, Checker: checker, Point: binding.PointAgreement, Node: d.NodeID, CheckFormats: true, Logger: e.log,
	})
	if err != nil {
		if ctx.Err() != nil {
			return Deployed{}, fmt.Errorf("delivery: deploy %q: %w", d.ID, err)
		}
		// The resolver failed (an exchange that did not answer): retried.
		return e.retrying(log, Deployed{}, "the deployment could not be validated: "+err.Error()), nil
	}
	out := Deployed{Report: report}
	var missing []string
	var trouble []binding.Problem
	definite := false
	for _, p := range report.Errors() {
		switch {
		case agbotTrouble(p.Code):
			trouble = append(trouble, p)
		case p.Code == binding.CodeVaultSecretMissing:
			names, err := missingNames(p, d, report)
			if err != nil {
				definite = true
				continue
			}
			missing = append(missing, names...)
		default:
			definite = true
		}
	}
	switch {
	case definite:
		refused := &RefusedError{Report: report}
		log.Error("deployment refused", slog.String("err", refused.Error()))
		return Deployed{}, refused
	case len(trouble) > 0:
		return e.retrying(log, out, trouble[0].Message), nil
	case len(missing) > 0:
		slices.Sort(missing)
		out.Waiting = slices.Compact(missing)
		if err := e.WaitForSecrets(ctx, d.ID, out.Waiting...); err != nil {
			out.Waiting = nil
			return e.retrying(log, out, err.Error()), nil
		}
		return out, nil
	}
	bindings, err := report.Bindings(d.Org, d.NodeID)
	if err != nil {
		refused := &RefusedError{Report: report}
		log.Error("deployment refused", slog.String("err", err.Error()))
		return Deployed{}, errors.Join(refused, err)
	}
	if err := e.Register(ctx, Agreement{ID: d.ID, Node: d.Node, Services: bindings}); err != nil {
		if errors.Is(err, errBeingCancelled) {
			// Its agent has not acknowledged the cancellation yet: made
			// again once it has (found by the fault simulation, seed 251
			// of three agbots).
			return e.retrying(log, out, err.Error()), nil
		}
		if errors.Is(err, edgesecrets.ErrInvalid) || errors.Is(err, state.ErrExists) {
			// Invalid, or an agreement of that id with other services:
			// trying again changes nothing.
			return Deployed{}, err
		}
		return e.retrying(log, out, err.Error()), nil
	}
	out.Registered = true
	return out, nil
}

// errBeingCancelled refines ErrExists: the agreement is being cancelled,
// and can be made again once its agent acknowledged that.
var errBeingCancelled = errors.New("it is being cancelled")

// retrying returns out as retried for reason, said at WARN.
func (e *Engine) retrying(log *slog.Logger, out Deployed, reason string) Deployed {
	out.Retrying = reason
	log.Warn("deployment not decided: the agbot's own trouble; trying again next cycle", slog.String("reason", reason))
	return out
}

// missingNames returns the store names a missing-secret problem waits
// for: every candidate of the binding concerned (a node-level secret and
// the organisation's it falls back to), any one of which lets the
// deployment go on; the problem's own name when no resolved binding
// matches it. Waiting for the one name the check reported would strand
// the node when the other candidate is the one written (found by the
// fault simulation, seeds 23 of three agbots and 28 of two).
func missingNames(p binding.Problem, d Deployment, report *binding.Report) ([]string, error) {
	for _, rb := range report.Resolved {
		if rb.Service == p.Service && rb.ServiceSecret == p.ServiceSecret {
			return rb.StoreNames(d.Org, d.NodeID)
		}
	}
	name, err := binding.ParseVaultSecretName(p.VaultSecret)
	if err != nil {
		return nil, err
	}
	path, err := name.StorePath(d.Org)
	if err != nil {
		return nil, err
	}
	return []string{path}, nil
}

// remembers reports whether Deploy remembers the deployment of a wait:
// the engine deploys it again itself when the wait is over.
func (e *Engine) remembers(id string) bool {
	e.deploysMu.Lock()
	defer e.deploysMu.Unlock()
	_, ok := e.deploys[id]
	return ok
}

// redeploy tries again, once per cycle, every deployment Deploy could not
// decide: those held up by the agbot's own trouble, and those that waited
// for secrets whose wait is over (its secrets exist, or another member of
// a shared state saw them first and removed it). waiting lists the ids
// of the waits still on. Each attempt is bounded by the interval.
func (e *Engine) redeploy(ctx context.Context, waiting map[string]bool) {
	e.deploysMu.Lock()
	pending := make([]pendingDeploy, 0, len(e.deploys))
	for _, p := range e.deploys {
		if !waiting[p.ID] {
			pending = append(pending, p)
		}
	}
	e.deploysMu.Unlock()
	for _, p := range pending {
		if ctx.Err() != nil {
			return
		}
		actx, cancel := context.WithTimeout(ctx, e.cfg.Interval)
		out, err := e.deployOnce(actx, p.Deployment)
		cancel()
		if err != nil && ctx.Err() != nil {
			return
		}
		e.deploysMu.Lock()
		if cur, ok := e.deploys[p.ID]; ok && cur.gen == p.gen && (err != nil || out.Registered) {
			delete(e.deploys, p.ID)
		}
		e.deploysMu.Unlock()
		if out.Registered {
			e.log.Info("deployment registered after waiting", slog.String("agreement", p.ID), slog.String("node", p.Node))
		}
	}
}
