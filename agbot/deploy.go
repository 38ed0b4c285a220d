package agbot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/ctxtime"
	"github.com/edgesecrets/edgesecrets/relay"
)

// cancellingPoll is how often a deploy looks again at a node's agreement
// that is being cancelled, to make it again once it is gone.
const cancellingPoll = time.Second

// Waits between a deploy's attempts while the agbot's own parts (the
// identity records, the state) do not answer: from the first, doubling up
// to the longest, never given up while the agbot runs.
const (
	troubleRetry    = time.Second
	maxTroubleRetry = 30 * time.Second
)

// onCertificate is the relay's hook: an agent published its certificate,
// perhaps saying it holds nothing (see existing).
func (a *Agbot) onCertificate(p relay.Publication) {
	if p.HoldsNothing {
		a.mu.Lock()
		a.empty[p.Node] = true
		a.mu.Unlock()
	}
	a.spawnDeploy(p.Node)
}

// onReady is the engine's hook: a secret a deployment waited for exists
// now. The node is deployed again, with the deployment as it is
// now; then the embedder's hook runs. A node this agbot has not deployed
// since it started is deployed when its agent publishes its certificate
// here.
func (a *Agbot) onReady(ctx context.Context, agreementID string) {
	a.mu.Lock()
	n, ok := a.nodes[agreementID]
	a.mu.Unlock()
	if ok {
		a.spawnDeploy(n)
	}
	if a.opts.Delivery.OnReady != nil {
		a.opts.Delivery.OnReady(ctx, agreementID)
	}
}

// onCancel is the engine's cancel hook: a bound secret was deleted or
// access to it revoked for longer than the grace period. The engine tells
// the agent until it acknowledges; the node's deployment waits for the
// secret to exist again. Then the embedder's hook runs.
func (a *Agbot) onCancel(ctx context.Context, id string, c state.Cancellation) {
	log := a.log.With(slog.String("agreement", id))
	log.Warn("agreement cancelled: a bound secret is gone; the engine tells the agent",
		slog.String("secret", c.StoreName), slog.String("event", c.Kind.String()), slog.String("reason", c.Reason))
	wait := []string{c.StoreName}
	if st, err := a.engine.Status(ctx, id); err == nil {
		if n, ok := parseNode(st.Node); ok {
			a.mu.Lock()
			a.nodes[id] = n // for onReady, when the secret is back
			a.mu.Unlock()
		}
		wait = candidatesOf(st.Services, c.StoreName)
	}
	if c.StoreName != "" {
		if err := a.engine.WaitForSecrets(ctx, id, wait...); err != nil {
			log.Warn("could not wait for the secret to come back", slog.String("err", err.Error()))
		}
	}
	if a.opts.Delivery.OnCancel != nil {
		a.opts.Delivery.OnCancel(ctx, id, c)
	}
}

// Redeploy deploys again, with what Options.Deploy says now, every node
// that has an active agreement, and returns how many: after the embedder
// changed its deployments (a changed secretBinding reaches the running
// services in place, as new content of the same secrets; changed services
// end the agreement and make it again). The deploys run in the
// background, while Run runs.
func (a *Agbot) Redeploy(ctx context.Context) (int, error) {
	var nodes []string
	err := a.opts.Delivery.State.Records(ctx, func(r state.Record) bool {
		if r.Phase == state.PhaseActive {
			nodes = append(nodes, r.Node)
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("agbot: reading the agreements to deploy again: %w", err)
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	count := 0
	for _, s := range nodes {
		if n, ok := parseNode(s); ok {
			a.spawnDeploy(n)
			count++
		}
	}
	return count, nil
}

// deploy deploys to a node whose agent published a certificate. Deploys
// of one node run one at a time: one asked for meanwhile runs once more
// afterwards, with the deployment as it is then.
func (a *Agbot) deploy(ctx context.Context, n relay.Node) {
	a.mu.Lock()
	if _, busy := a.deploying[n]; busy {
		a.deploying[n] = true // again, once this one is done
		a.mu.Unlock()
		return
	}
	a.deploying[n] = false
	a.mu.Unlock()
	for {
		a.deployOnce(ctx, n)
		a.mu.Lock()
		again := a.deploying[n]
		if !again || ctx.Err() != nil {
			delete(a.deploying, n)
			a.mu.Unlock()
			return
		}
		a.deploying[n] = false
		a.mu.Unlock()
	}
}

// deployOnce verifies the node's agent, asks Options.Deploy what to deploy
// and deploys it through the engine. A node that has an agreement already
// is resynced (see existing) and its agreement registered again with the
// deployment as it is now: nothing changes when the bindings are the same,
// other store names are rebound in place, and changed services end the
// agreement and make it again, as Open Horizon does.
func (a *Agbot) deployOnce(ctx context.Context, n relay.Node) {
	log := a.log.With(slog.String("node", n.String()))
	// Taken by every deploy, so that a node's agent, new, saying it holds
	// nothing is not taken for one that lost what a later deploy finds
	// it accepted.
	empty := a.takeEmpty(n)
	agentKeys, err := a.verifiedKeys(ctx, n)
	for delay := troubleRetry; errors.Is(err, edgesecrets.ErrUnavailable); delay = min(2*delay, maxTroubleRetry) {
		// The identity records did not answer: the agbot's own trouble,
		// which never drops a deploy.
		log.Warn("the agent's identity could not be verified now; trying again", slog.String("err", err.Error()), slog.Duration("in", delay))
		if !ctxtime.Sleep(ctx, delay) {
			return
		}
		agentKeys, err = a.verifiedKeys(ctx, n)
	}
	if err != nil {
		log.Warn("not deploying: the agent's identity did not verify", slog.String("err", err.Error()))
		return
	}
	dep, ok := a.opts.Deploy(ctx, n)
	if !ok {
		log.Debug("nothing to deploy to the node")
		return
	}
	id := AgreementID(n)
	a.mu.Lock()
	a.nodes[id] = n
	a.mu.Unlock()
	existed, ok := a.existing(ctx, id, n, agentKeys.EncryptionKeyID())
	if !ok {
		return
	}
	if existed && empty {
		a.proposeAgain(ctx, id, log.With(slog.String("agreement", id)))
	}
	d := delivery.Deployment{ID: id, Node: n.String(), Org: n.Org, NodeID: n.Node, Target: dep.Target, Resolver: dep.Resolver}
	out, err := a.engine.Deploy(ctx, d)
	if existed && errors.Is(err, state.ErrExists) {
		// Not a binding change the engine applies in place: the services
		// changed, which is a new agreement.
		log.Warn("the deployment's services changed; ending the node's agreement to make it again", slog.String("agreement", id), slog.String("why", err.Error()))
		if err := a.engine.End(ctx, id); err != nil && !errors.Is(err, state.ErrNotFound) {
			log.Error("could not end the agreement", slog.String("agreement", id), slog.String("err", err.Error()))
			return
		}
		if again, ok := a.existing(ctx, id, n, agentKeys.EncryptionKeyID()); !ok || again {
			return
		}
		existed = false
		out, err = a.engine.Deploy(ctx, d)
	}
	var refused *delivery.RefusedError
	switch {
	case errors.As(err, &refused):
		return // the engine logged the report
	case err != nil:
		log.Error("could not deploy the node", slog.String("agreement", id), slog.String("err", err.Error()))
		return
	}
	for _, p := range out.Report.Warnings() {
		log.Warn("deployment", slog.String("problem", p.String()))
	}
	switch {
	case out.Registered:
		bindings, _ := out.Report.Bindings(n.Org, n.Node)
		if existed {
			log.Debug("the node's agreement is registered with the deployment as it is now", slog.String("agreement", id),
				slog.Any("secrets", state.StoreNames(bindings)))
			return
		}
		log.Info("node deployed: its agreement is registered with the delivery engine", slog.String("agreement", id), slog.Int("services", len(bindings)),
			slog.Any("secrets", state.StoreNames(bindings)))
	case len(out.Waiting) > 0:
		log.Info("deployment waits for secrets that do not exist yet", slog.Any("secrets", out.Waiting), slog.Bool("node_keeps_its_agreement", existed))
	default:
		log.Info("deployment retried by the engine once the agbot's own trouble ends", slog.String("why", out.Retrying))
	}
}

// existing waits for the node's agreement id to be absent or active, and
// reports whether it exists (active) and whether to go on deploying
// (false when the state did not answer or ctx ended). An agreement being
// cancelled (a secret deleted and written again before the agent
// acknowledged the cancellation) is waited for until it is gone. An
// agreement that exists is resynced: its agent published its certificate
// because it restarted, renewed it, came back to a restarted agbot, or is
// a new agent with new keys, which the engine proposes the agreement to
// again.
func (a *Agbot) existing(ctx context.Context, id string, n relay.Node, key agreement.KeyID) (exists, ok bool) {
	log := a.log.With(slog.String("node", n.String()), slog.String("agreement", id))
	delay := troubleRetry
	for {
		rec, err := a.opts.Delivery.State.Get(ctx, id)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return false, true
		case err != nil:
			// The agbot's own trouble never drops a deploy.
			log.Warn("the state did not answer; deploying once it does", slog.String("err", err.Error()), slog.Duration("in", delay))
			if !ctxtime.Sleep(ctx, delay) {
				return false, false
			}
			delay = min(2*delay, maxTroubleRetry)
			continue
		case rec.Phase == state.PhaseActive:
			if rec.Proposed && rec.AgentKey != key {
				log.Warn("the node's agent has new keys; the engine proposes its agreement again")
			}
			if err := a.engine.Resync(ctx, n.String()); err != nil {
				log.Warn("could not resync the node", slog.String("err", err.Error()))
			}
			log.Debug("agent resynced")
			return true, true
		}
		log.Debug("the node's agreement is being cancelled; deploying once it is gone")
		if !ctxtime.Sleep(ctx, cancellingPoll) {
			return false, false
		}
	}
}

// takeEmpty reports whether the agent on n said it holds nothing since
// the node's last deploy, and forgets it.
func (a *Agbot) takeEmpty(n relay.Node) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	empty := a.empty[n]
	delete(a.empty, n)
	return empty
}

// proposeAgain has the engine propose agreement id again to its agent,
// which holds nothing of it (it started over empty files but kept its
// keys: seed 7 of the fault simulation, where no rotation came to send it
// its secrets). A record another agbot holds for its cycle, or a state
// that does not answer, is tried again, as the agbot's own trouble.
func (a *Agbot) proposeAgain(ctx context.Context, id string, log *slog.Logger) {
	delay := troubleRetry
	for {
		err := a.engine.ProposeAgain(ctx, id)
		switch {
		case err == nil:
			return
		case !errors.Is(err, state.ErrConflict) && !errors.Is(err, edgesecrets.ErrUnavailable):
			log.Warn("could not propose the agreement again to an agent holding nothing", slog.String("err", err.Error()))
			return
		}
		log.Warn("proposing the agreement again to an agent holding nothing failed; trying again", slog.String("err", err.Error()), slog.Duration("in", delay))
		if !ctxtime.Sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, maxTroubleRetry)
	}
}

// candidatesOf returns every candidate store name of the bound secrets
// that name is a candidate of: the deployment waits for any of them to
// come back, the node's own secret or the organisation's it falls back
// to (found by the fault simulation, seed 28 of two agbots).
func candidatesOf(services []binding.ServiceBinding, name string) []string {
	out := []string{name}
	for _, sb := range services {
		for _, b := range sb.Secrets {
			if slices.Contains(b.StoreNames, name) {
				out = append(out, b.StoreNames...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
