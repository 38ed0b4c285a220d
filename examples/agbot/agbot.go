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
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/relay"
)

// agbot makes one agreement per node of its organisation whose agent
// publishes a verified identity, and registers it with its delivery
// engine, which proposes it and keeps it current (rotations, fallbacks,
// cancellations) until it ends. The agbot itself only decides what to
// deploy where; everything about delivery is the engine's, kept in its
// state, so a restarted agbot carries on where it stopped.
type agbot struct {
	log      *slog.Logger
	dep      *deployment // read with deployment(); reload replaces it
	engine   *delivery.Engine
	state    delivery.State // the engine's
	verifier *identity.Verifier
	relay    *relay.Server

	ctx context.Context // the agbot's lifetime, for background work
	wg  sync.WaitGroup

	mu       sync.Mutex
	stopping bool // no more background work
	// deploying holds the nodes being deployed; true when another deploy
	// of the node was asked for meanwhile.
	deploying map[relay.Node]bool
	nodes     map[string]relay.Node // by agreement id, the nodes deployed
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

// onReady is the engine's hook: the secrets a deployment this agbot made
// before a restart was waiting for all exist now (the engine deploys those
// it made since itself). A node this agbot has not seen since is deployed
// when its agent publishes its certificate here.
func (a *agbot) onReady(_ context.Context, agreementID string) {
	a.mu.Lock()
	n, ok := a.nodes[agreementID]
	a.mu.Unlock()
	if ok {
		a.spawn(func(ctx context.Context) { a.deploy(ctx, n) })
	}
}

// deploy validates the deployment for a node whose agent has a verified
// identity and, when it passes, registers the node's agreement with the
// engine. A node that has an agreement already is resynced (see ended)
// and its agreement registered again with the deployment as it is now:
// nothing changes when the bindings are the same, other store names are
// rebound in place (the agent gets the new content as an update), and a
// deployment whose services changed ends the agreement and makes it
// again, as Open Horizon does. A deployment held up only by missing
// secrets waits for them (Engine.WaitForSecrets); other problems are
// logged, each one. Deploys of one node run one at a time: one asked for
// meanwhile runs once more afterwards, with the deployment as it is then.
func (a *agbot) deploy(ctx context.Context, n relay.Node) {
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

func (a *agbot) deployOnce(ctx context.Context, n relay.Node) {
	log := a.log.With(slog.String("node", n.String()))
	dep := a.deployment()
	if n.Org != dep.org {
		log.Debug("node of another organisation; not deploying")
		return
	}
	agentKeys, err := a.verify(ctx, n)
	if err != nil {
		log.Warn("not deploying: the agent's identity did not verify", slog.String("err", err.Error()))
		return
	}
	id := agreementID(n)
	existed, ok := a.ended(ctx, id, n, agentKeys.EncryptionKeyID())
	if !ok {
		return
	}
	a.remember(id, n)
	d := delivery.Deployment{ID: id, Node: n.String(), Org: dep.org, NodeID: n.Node, Target: dep.target, Resolver: dep.catalog}
	out, err := a.engine.Deploy(ctx, d)
	if existed && errors.Is(err, delivery.ErrExists) {
		// Not a binding change the engine applies in place: the services
		// changed, which is a new agreement.
		log.Warn("the deployment's services changed; ending the node's agreement to make it again", slog.String("agreement", id), slog.String("why", err.Error()))
		if err := a.engine.End(ctx, id); err != nil && !errors.Is(err, delivery.ErrNotFound) {
			log.Error("could not end the agreement", slog.String("agreement", id), slog.String("err", err.Error()))
			return
		}
		if again, ok := a.ended(ctx, id, n, agentKeys.EncryptionKeyID()); !ok || again {
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
		bindings, _ := out.Report.Bindings(dep.org, n.Node)
		if existed {
			log.Debug("the node's agreement is registered with the deployment as it is now", slog.String("agreement", id),
				slog.Any("secrets", delivery.StoreNames(bindings)))
			return
		}
		log.Info("node deployed: its agreement is registered with the delivery engine", slog.String("agreement", id), slog.Int("services", len(bindings)),
			slog.Any("secrets", delivery.StoreNames(bindings)))
	case len(out.Waiting) > 0:
		log.Info("deployment waits for secrets that do not exist yet", slog.Any("secrets", out.Waiting), slog.Bool("node_keeps_its_agreement", existed))
	default:
		log.Info("deployment retried by the engine once the agbot's own trouble ends")
	}
}

// remember records which node an agreement id is for, so that onReady
// finds it.
func (a *agbot) remember(id string, n relay.Node) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nodes[id] = n
}

// ended waits for the node's agreement id to be absent or active, and
// reports whether it exists (active) and whether to go on deploying
// (false when the state did not answer or ctx ended). An agreement being
// cancelled (a secret deleted and written again before the agent
// acknowledged the cancellation) is waited for until it is gone. An
// agreement that exists is resynced: its agent published its certificate
// because it restarted, renewed it, came back to a restarted agbot, or is
// a new agent with new keys, which the engine proposes the agreement to
// again.
func (a *agbot) ended(ctx context.Context, id string, n relay.Node, key agreement.KeyID) (exists, ok bool) {
	log := a.log.With(slog.String("node", n.String()), slog.String("agreement", id))
	for {
		rec, err := a.state.Get(ctx, id)
		switch {
		case errors.Is(err, delivery.ErrNotFound):
			return false, true
		case err != nil:
			log.Warn("not deploying: the state did not answer", slog.String("err", err.Error()))
			return false, false
		case rec.Phase == delivery.PhaseActive:
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
		if !demo.Sleep(ctx, time.Second) {
			return false, false
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
	if !ok || c.StoreName == "" {
		return
	}
	a.remember(id, n)
	if err := a.engine.WaitForSecrets(ctx, id, c.StoreName); err != nil {
		log.Warn("could not wait for the secret to come back", slog.String("err", err.Error()))
	}
}

// Keys implements delivery.Agents: the verified keys of the agent on a
// node ("<org>/<node>"), from the certificate chain it published. When the
// chain no longer verifies because the agent's identity is lost (no record
// for it, revoked, expired: identity.ErrIdentityLost), the relay drops
// it: the agent, told that the relay holds no certificate, publishes it
// again, learns from the refusal that its identity is lost, and registers
// again.
func (a *agbot) Keys(ctx context.Context, node string) (*agreement.PublicKeys, error) {
	n, ok := parseNode(node)
	if !ok {
		return nil, fmt.Errorf("not a node id: %q", node)
	}
	keys, chain, err := a.certified(ctx, n)
	if errors.Is(err, identity.ErrIdentityLost) && a.relay.DropCertificate(n, chain) {
		a.log.Warn("the agent's identity is lost; its certificate is dropped from the relay so that it registers again",
			slog.String("node", n.String()), slog.String("err", err.Error()))
	}
	return keys, err
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
	keys, _, err := a.certified(ctx, n)
	return keys, err
}

// certified is verify that also returns the chain it verified.
func (a *agbot) certified(ctx context.Context, n relay.Node) (*agreement.PublicKeys, []byte, error) {
	chain, ok := a.relay.Certificate(n)
	if !ok {
		return nil, nil, errors.New("no certificate published for the node")
	}
	vid, err := a.verifier.Verify(ctx, chain)
	if err != nil {
		return nil, chain, err
	}
	if vid.Instance.Org != n.Org || vid.Instance.Node != n.Node {
		return nil, chain, fmt.Errorf("the certificate is for node %s/%s", vid.Instance.Org, vid.Instance.Node)
	}
	keys, err := agreement.NewPublicKeys(vid.SigningKey, vid.EncryptionKey)
	return keys, chain, err
}
