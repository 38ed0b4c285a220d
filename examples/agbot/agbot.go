package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/examples/internal/relay"
)

// agbot makes one agreement per node of its organisation whose agent
// publishes a verified identity, and registers it with its delivery
// engine, which proposes it and keeps it current (rotations, fallbacks,
// cancellations) until it ends. The agbot itself only decides what to
// deploy where; everything about delivery is the engine's, kept in its
// state, so a restarted agbot carries on where it stopped.
type agbot struct {
	log      *slog.Logger
	dep      *deployment
	engine   *delivery.Engine
	checker  *binding.StoreChecker
	verifier *identity.Verifier
	relay    *relay.Server

	ctx context.Context // the agbot's lifetime, for background work
	wg  sync.WaitGroup

	mu        sync.Mutex
	stopping  bool // no more background work
	deploying map[relay.Node]bool
	byNode    map[relay.Node]nodeAgreement // node → its agreement
}

// nodeAgreement is a node's agreement, as this agbot knows it.
type nodeAgreement struct {
	id       string
	agentKey agreement.KeyID // the agent's keys when last deployed; zero: not known
}

// spawn runs f on its own goroutine, with the agbot's context, unless the
// agbot is stopping.
func (a *agbot) spawn(f func(ctx context.Context)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f(a.ctx)
	}()
}

// wait waits for the background work, once the agbot's context has ended.
func (a *agbot) wait() {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
	a.wg.Wait()
}

// load learns the agreements kept in the engine's state (by this agbot
// before a restart, or by the other agbots sharing it), so that an agent
// that publishes its certificate again is resynced, not given a second
// agreement.
func (a *agbot) load(ctx context.Context, st delivery.State) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return st.Records(ctx, func(r delivery.Record) bool {
		n, ok := parseNode(r.Node)
		if ok && r.Phase == delivery.PhaseActive {
			a.byNode[n] = nodeAgreement{id: r.ID, agentKey: r.AgentKey}
		}
		return true
	})
}

// parseNode parses "<org>/<node>", the engine's node id.
func parseNode(s string) (relay.Node, bool) {
	org, node, ok := strings.Cut(s, "/")
	n := relay.Node{Org: org, Node: node}
	return n, ok && n.Validate() == nil
}

// onCertificate is the relay's hook: an agent published its certificate.
func (a *agbot) onCertificate(n relay.Node) {
	a.spawn(func(ctx context.Context) { a.deploy(ctx, n) })
}

// onReady is the engine's hook: the secrets a node's deployment was
// waiting for all exist now.
func (a *agbot) onReady(_ context.Context, deploymentID string) {
	if n, ok := parseNode(deploymentID); ok {
		a.spawn(func(ctx context.Context) { a.deploy(ctx, n) })
	}
}

// deploy validates the deployment for a node whose agent has a verified
// identity and, when it passes, registers an agreement with the engine. A
// node that has an agreement already is resynced instead: its agent came
// back, or is a new one (new keys), which the engine proposes the
// agreement to again. A deployment held up only by missing secrets waits
// for them (Engine.WaitForSecrets); other problems are logged, each one.
func (a *agbot) deploy(ctx context.Context, n relay.Node) {
	log := a.log.With(slog.String("node", n.String()))
	if n.Org != a.dep.org {
		log.Debug("node of another organisation; not deploying")
		return
	}
	a.mu.Lock()
	if a.deploying[n] {
		a.mu.Unlock()
		return
	}
	a.deploying[n] = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.deploying, n)
		a.mu.Unlock()
	}()

	agentKeys, err := a.verify(ctx, n)
	if err != nil {
		log.Warn("not deploying: the agent's identity did not verify", slog.String("err", err.Error()))
		return
	}
	if a.resync(ctx, n, agentKeys.EncryptionKeyID()) {
		return
	}
	report, err := binding.Validate(ctx, a.dep.target, binding.Options{Resolver: a.dep.catalog, Checker: a.checker, Logger: a.log})
	if err != nil {
		log.Error("validating the deployment failed", slog.String("err", err.Error()))
		return
	}
	for _, p := range report.Warnings() {
		log.Warn("deployment", slog.String("problem", p.String()))
	}
	if !report.OK() {
		missing, other := a.dep.missingSecrets(report)
		for _, p := range other {
			log.Error("deployment refused", slog.String("problem", p.String()))
		}
		if len(other) == 0 {
			if err := a.engine.WaitForSecrets(ctx, n.String(), missing...); err != nil {
				log.Error("could not wait for the missing secrets", slog.String("err", err.Error()))
				return
			}
			log.Info("deployment waits for secrets that do not exist yet", slog.Any("secrets", missing))
		}
		return
	}
	bindings, err := report.Bindings(a.dep.org, n.Node)
	if err != nil {
		log.Error("deployment refused", slog.String("err", err.Error()))
		return
	}
	id := "agreement-" + strings.ToLower(rand.Text()[:16])
	if err := a.engine.Register(ctx, delivery.Agreement{ID: id, Node: n.String(), Services: bindings}); err != nil {
		log.Error("could not register the agreement", slog.String("agreement", id), slog.String("err", err.Error()))
		return
	}
	a.mu.Lock()
	a.byNode[n] = nodeAgreement{id: id, agentKey: agentKeys.EncryptionKeyID()}
	a.mu.Unlock()
	log.Info("agreement made; the delivery engine proposes it", slog.String("agreement", id), slog.Int("services", len(bindings)),
		slog.Any("secrets", delivery.StoreNames(bindings)))
}

// resync handles an agent that published its certificate while its node
// has an agreement: the agent restarted, renewed its certificate, or is a
// new one with new keys. The engine looks at the agreement at once (and
// proposes it again to new keys). It reports false when the node has no
// live agreement.
func (a *agbot) resync(ctx context.Context, n relay.Node, key agreement.KeyID) bool {
	a.mu.Lock()
	cur, ok := a.byNode[n]
	a.mu.Unlock()
	if !ok {
		return false
	}
	st, err := a.engine.Status(ctx, cur.id)
	if errors.Is(err, delivery.ErrNotFound) || err == nil && st.Phase != delivery.PhaseActive {
		a.forget(n, cur.id) // ended meanwhile (by another agbot sharing the state)
		return false
	}
	log := a.log.With(slog.String("node", n.String()), slog.String("agreement", cur.id))
	if cur.agentKey != key {
		if cur.agentKey != "" {
			log.Warn("the node's agent has new keys; the engine proposes its agreement again")
		}
		a.mu.Lock()
		if a.byNode[n].id == cur.id {
			a.byNode[n] = nodeAgreement{id: cur.id, agentKey: key}
		}
		a.mu.Unlock()
	}
	if err := a.engine.Resync(ctx, n.String()); err != nil {
		log.Warn("could not resync the node", slog.String("err", err.Error()))
	}
	log.Debug("agent resynced")
	return true
}

// forget drops the node's agreement id if it is still id.
func (a *agbot) forget(n relay.Node, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byNode[n].id == id {
		delete(a.byNode, n)
	}
}

// onCancel is the engine's cancel hook: a bound secret was deleted or
// access to it revoked, for longer than the grace period. The engine tells
// the agent until it acknowledges; the agbot forgets the agreement and
// makes the node's deployment wait for the secret to exist again.
func (a *agbot) onCancel(ctx context.Context, id string, c delivery.Cancellation) {
	log := a.log.With(slog.String("agreement", id))
	log.Warn("agreement cancelled: a bound secret is gone; the engine tells the agent",
		slog.String("secret", c.StoreName), slog.String("event", c.Kind.String()), slog.String("reason", c.Reason))
	st, err := a.engine.Status(ctx, id)
	if err != nil {
		log.Warn("could not look the agreement up", slog.String("err", err.Error()))
		return
	}
	n, ok := parseNode(st.Node)
	if !ok {
		return
	}
	a.forget(n, id)
	if c.StoreName == "" {
		return
	}
	if err := a.engine.WaitForSecrets(ctx, n.String(), c.StoreName); err != nil {
		log.Warn("could not wait for the secret to come back", slog.String("err", err.Error()))
	}
}

// Keys implements delivery.Agents: the verified keys of the agent on a
// node ("<org>/<node>"), from the certificate chain it published.
func (a *agbot) Keys(ctx context.Context, node string) (*agreement.PublicKeys, error) {
	n, ok := parseNode(node)
	if !ok {
		return nil, fmt.Errorf("not a node id: %q", node)
	}
	return a.verify(ctx, n)
}

// Send implements delivery.Transport: the relay carries the envelope to
// the node's agent and its reply back, which the engine opens. It waits
// for the reply until ctx (the engine's reply timeout) ends.
func (a *agbot) Send(ctx context.Context, m delivery.Message) ([]byte, error) {
	n, ok := parseNode(m.Node)
	if !ok {
		return nil, fmt.Errorf("not a node id: %q", m.Node)
	}
	msgID, replies, err := a.relay.Post(n, m.Envelope)
	if err != nil {
		return nil, err
	}
	defer a.relay.Done(msgID)
	a.log.Debug("sent", slog.String("agreement", m.AgreementID), slog.String("node", m.Node), slog.Uint64("relay_id", msgID))
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("no reply: %w", context.Cause(ctx))
	case b := <-replies:
		return b, nil
	}
}

// verify checks the certificate chain the node's agent published with the
// identity Verifier (hub CA, expiry, revocation, current serial) and
// returns the keys it certifies.
func (a *agbot) verify(ctx context.Context, n relay.Node) (*agreement.PublicKeys, error) {
	chain, ok := a.relay.Certificate(n)
	if !ok {
		return nil, errors.New("no certificate published for the node")
	}
	vid, err := a.verifier.VerifyPEM(ctx, chain)
	if err != nil {
		return nil, err
	}
	if vid.Instance.Org != n.Org || vid.Instance.Node != n.Node {
		return nil, fmt.Errorf("the certificate is for node %s/%s", vid.Instance.Org, vid.Instance.Node)
	}
	return vid.PublicKeys()
}
