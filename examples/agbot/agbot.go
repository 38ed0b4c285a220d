package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
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
	state    delivery.State // the engine's
	checker  binding.ExistenceChecker
	verifier *identity.Verifier
	relay    *relay.Server

	ctx context.Context // the agbot's lifetime, for background work
	wg  sync.WaitGroup

	mu        sync.Mutex
	stopping  bool // no more background work
	deploying map[relay.Node]bool
}

// agreementID is the id of the node's agreement: one per node, the same
// for every agbot sharing the state, so that two agbots deploying the
// node at once register one agreement (Engine.Register of the same
// agreement twice does nothing).
func agreementID(n relay.Node) string {
	sum := sha256.Sum256([]byte(n.String()))
	return "agreement-" + hex.EncodeToString(sum[:10])
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

// count returns the number of agreements in the engine's state (made by
// this agbot before a restart, or by the other agbots sharing it).
func (a *agbot) count(ctx context.Context) (int, error) {
	n := 0
	err := a.state.Records(ctx, func(delivery.Record) bool { n++; return true })
	return n, err
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
// identity and, when it passes, registers the node's agreement with the
// engine. A node that has an agreement already is resynced instead (see
// ended). A deployment held up only by missing secrets waits
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
	id := agreementID(n)
	if !a.ended(ctx, id, n, agentKeys.EncryptionKeyID()) {
		return
	}
	report, err := binding.Validate(ctx, a.dep.target, binding.Options{Resolver: a.dep.catalog, Checker: a.checker, CheckFormats: true, Logger: a.log})
	if err != nil {
		log.Error("validating the deployment failed", slog.String("err", err.Error()))
		return
	}
	for _, p := range report.Warnings() {
		log.Warn("deployment", slog.String("problem", p.String()))
	}
	if report.Err() != nil {
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
	if err := a.engine.Register(ctx, delivery.Agreement{ID: id, Node: n.String(), Services: bindings}); err != nil {
		log.Error("could not register the agreement", slog.String("agreement", id), slog.String("err", err.Error()))
		return
	}
	log.Info("node deployed: its agreement is registered with the delivery engine", slog.String("agreement", id), slog.Int("services", len(bindings)),
		slog.Any("secrets", delivery.StoreNames(bindings)))
}

// ended reports whether the node's agreement id does not exist, waiting
// for it to go when it is being cancelled (a secret deleted and written
// again before the agent acknowledged the cancellation). An agreement that
// exists is resynced instead: its agent published its certificate because
// it restarted, renewed it, came back to a restarted agbot, or is a new
// agent with new keys, which the engine proposes the agreement to again.
func (a *agbot) ended(ctx context.Context, id string, n relay.Node, key agreement.KeyID) bool {
	log := a.log.With(slog.String("node", n.String()), slog.String("agreement", id))
	for {
		rec, err := a.state.Get(ctx, id)
		switch {
		case errors.Is(err, delivery.ErrNotFound):
			return true
		case err != nil:
			log.Warn("not deploying: the state did not answer", slog.String("err", err.Error()))
			return false
		case rec.Phase == delivery.PhaseActive:
			if rec.Proposed && rec.AgentKey != key {
				log.Warn("the node's agent has new keys; the engine proposes its agreement again")
			}
			if err := a.engine.Resync(ctx, n.String()); err != nil {
				log.Warn("could not resync the node", slog.String("err", err.Error()))
			}
			log.Debug("agent resynced")
			return false
		}
		log.Debug("the node's agreement is being cancelled; deploying once it is gone")
		if !demo.Sleep(ctx, time.Second) {
			return false
		}
	}
}

// onCancel is the engine's cancel hook: a bound secret was deleted or
// access to it revoked, for longer than the grace period. The engine tells
// the agent until it acknowledges; the agbot makes the node's deployment
// wait for the secret to exist again.
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
	vid, err := a.verifier.Verify(ctx, chain)
	if err != nil {
		return nil, err
	}
	if vid.Instance.Org != n.Org || vid.Instance.Node != n.Node {
		return nil, fmt.Errorf("the certificate is for node %s/%s", vid.Instance.Org, vid.Instance.Node)
	}
	return agreement.NewPublicKeys(vid.SigningKey, vid.EncryptionKey)
}
