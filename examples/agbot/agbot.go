package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/examples/internal/relay"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// agbot makes one agreement per node of its organisation whose agent
// publishes a verified identity, delivers the proposal, and through the
// tracker and outbox the updates and cancellations that follow.
type agbot struct {
	log      *slog.Logger
	dep      *deployment
	keys     *agreement.PrivateKeys
	reader   *secretstore.Reader
	checker  *binding.StoreChecker
	verifier *identity.Verifier
	relay    *relay.Server
	tracker  *agreement.Tracker
	replies  *agreement.MemoryReplayGuard // shared with the sealing transport
	seq      *demo.Sequencer              // proposal and cancellation sequences

	replyTimeout time.Duration // how long to wait for an agent's reply
	retryDelay   time.Duration // first pause between attempts
	attempts     int           // cancellation attempts

	ctx context.Context // the agbot's lifetime, for background work
	wg  sync.WaitGroup

	mu         sync.Mutex
	stopping   bool                  // no more background work
	byNode     map[relay.Node]string // node → its agreement id
	deploying  map[relay.Node]bool
	agreements map[string]*agreementState
}

// agreementState is one agreement with a node. Guarded by agbot.mu.
type agreementState struct {
	id       string
	node     relay.Node
	agentKey agreement.KeyID // the encryption key the agreement was made with
	accepted bool            // the agent applied the proposal
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

// onCertificate is the relay's hook: an agent published its certificate.
func (a *agbot) onCertificate(n relay.Node) {
	a.spawn(func(ctx context.Context) { a.deploy(ctx, n) })
}

// retry is the tracker's hook: the secrets a node's deployment was waiting
// for all exist now.
func (a *agbot) retry(_ context.Context, deploymentID string) {
	org, node, _ := strings.Cut(deploymentID, "/")
	a.spawn(func(ctx context.Context) { a.deploy(ctx, relay.Node{Org: org, Node: node}) })
}

// deploy validates the deployment for a node whose agent has a verified
// identity and, when it passes, makes an agreement and delivers its
// proposal. A deployment held up only by missing secrets waits for them
// (tracker.Refused); other problems are logged, each one.
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
	current := a.agreements[a.byNode[n]]
	var currentKey agreement.KeyID
	if current != nil {
		currentKey = current.agentKey
	}
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
	if current != nil {
		if currentKey == agentKeys.EncryptionKeyID() {
			return // the same agent, with a renewed certificate
		}
		// A new agent on the node (its state was wiped): it knows nothing
		// of the agreement, so a new one replaces it.
		log.Warn("the node's agent has new keys; replacing its agreement", slog.String("agreement", current.id))
		if a.end(current.id) != nil {
			if err := a.tracker.Unregister(ctx, current.id); err != nil {
				log.Warn("could not untrack the agreement", slog.String("err", err.Error()))
			}
		}
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
			if err := a.tracker.Refused(n.String(), missing...); err != nil {
				log.Error("could not wait for the missing secrets", slog.String("err", err.Error()))
				return
			}
			log.Info("deployment waits for secrets that do not exist yet", slog.Any("secrets", missing))
		}
		return
	}
	bindings, err := report.ServiceBindings(a.dep.org)
	if err != nil {
		log.Error("deployment refused", slog.String("err", err.Error()))
		return
	}

	ag := &agreementState{id: "agreement-" + strings.ToLower(rand.Text()[:16]), node: n, agentKey: agentKeys.EncryptionKeyID()}
	// The bindings come back with the content tag of each secret the
	// proposal carries.
	p, bindings, err := agreement.ReadProposal(ctx, a.reader, ag.id, bindings)
	if err != nil {
		var serr *secretstore.Error
		if errors.Is(err, secretstore.ErrNotFound) && errors.As(err, &serr) {
			// Deleted since the validation: wait for it like any missing secret.
			if err := a.tracker.Refused(n.String(), serr.Name); err == nil {
				log.Info("deployment waits for a secret deleted meanwhile", slog.String("secret", serr.Name))
				return
			}
		}
		log.Error("reading the secrets failed; not deploying", slog.String("err", err.Error()))
		return
	}
	a.mu.Lock()
	a.agreements[ag.id] = ag
	a.byNode[n] = ag.id
	a.mu.Unlock()
	a.tracker.DropRefusal(n.String())
	// Registered with the content tags the proposal carries, the tracker
	// sends an update for any rotation after the read, even one before the
	// watcher's first look.
	if err := a.tracker.Register(ag.id, bindings); err != nil {
		log.Error("could not track the agreement", slog.String("agreement", ag.id), slog.String("err", err.Error()))
		a.end(ag.id)
		return
	}
	log.Info("agreement made", slog.String("agreement", ag.id), slog.Int("services", len(bindings)))
	a.propose(ctx, ag.id, n, p, bindings)
}

// propose delivers the agreement's proposal until the agent accepts it or
// the agreement ends, sealing it afresh for each attempt, with backoff up
// to a minute (an agent may be offline for a while); rotations meanwhile
// follow as updates.
func (a *agbot) propose(ctx context.Context, id string, n relay.Node, p agreement.Proposal, bindings []agreement.ServiceBinding) {
	log := a.log.With(slog.String("agreement", id), slog.String("node", n.String()))
	delay := a.retryDelay
	for attempt := 1; ; attempt++ {
		if !a.active(id) {
			return
		}
		reply, err := a.request(ctx, id, n, agreement.TypeProposal, func(to *agreement.PublicKeys, h agreement.Header) ([]byte, error) {
			return agreement.SealProposal(a.keys, to, p, h)
		})
		switch {
		case err == nil && reply.Accepted:
			a.mu.Lock()
			if ag, ok := a.agreements[id]; ok {
				ag.accepted = true
			}
			a.mu.Unlock()
			log.Info("proposal accepted by the agent")
			// Updates queued while the agent did not know the agreement may
			// have run out of attempts. Registering again with what the
			// proposal carried makes the tracker compare afresh and send
			// any rotation the agent still lacks.
			if err := a.tracker.Register(id, bindings); err != nil {
				log.Warn("could not track the agreement again", slog.String("err", err.Error()))
			}
			return
		case err == nil:
			log.Warn("proposal rejected by the agent", slog.String("reason", reply.Reason))
		case ctx.Err() != nil:
			return
		default:
			log.Warn("proposal not delivered", slog.Int("attempt", attempt), slog.String("err", err.Error()))
		}
		if !demo.Sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, time.Minute)
	}
}

// agentKeys is the sealing transport's AgentKeys: the verified keys of
// the agent of an agreement whose proposal it accepted. Until then an
// update would name an agreement the agent does not know, so it fails and
// the outbox tries again later.
func (a *agbot) agentKeys(ctx context.Context, agreementID string) (*agreement.PublicKeys, error) {
	a.mu.Lock()
	ag, ok := a.agreements[agreementID]
	var n relay.Node
	var accepted bool
	if ok {
		n, accepted = ag.node, ag.accepted
	}
	a.mu.Unlock()
	switch {
	case !ok:
		return nil, errors.New("the agreement has ended")
	case !accepted:
		return nil, errors.New("the proposal is not accepted yet")
	}
	return a.verify(ctx, n)
}

// Send implements agreement.EnvelopeSender for the sealing transport:
// the relay carries the envelope to the agreement's agent and its reply
// back.
func (a *agbot) Send(ctx context.Context, agreementID string, envelope []byte) ([]byte, error) {
	a.mu.Lock()
	ag, ok := a.agreements[agreementID]
	a.mu.Unlock()
	if !ok {
		return nil, errors.New("the agreement has ended")
	}
	return a.send(ctx, ag.node, envelope)
}

// send posts an envelope to the node's mailbox and returns the first reply
// posted for it. The relay is untrusted: the caller opens the reply.
func (a *agbot) send(ctx context.Context, n relay.Node, envelope []byte) ([]byte, error) {
	msgID, replies, err := a.relay.Post(n, envelope)
	if err != nil {
		return nil, err
	}
	defer a.relay.Done(msgID)
	timeout := time.NewTimer(a.replyTimeout)
	defer timeout.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timeout.C:
		return nil, fmt.Errorf("no reply within %s", a.replyTimeout)
	case b := <-replies:
		return b, nil
	}
}

// cancel is the tracker's hook: a bound secret was deleted or access to it
// revoked. The agreement ends, the agent is told to remove its secrets,
// and the node's deployment waits for the secret to exist again.
func (a *agbot) cancel(ctx context.Context, id string, r agreement.Revocation) {
	ag := a.end(id)
	if ag == nil {
		return // already ended
	}
	log := a.log.With(slog.String("agreement", id), slog.String("node", ag.node.String()))
	log.Warn("cancelling the agreement: a bound secret is gone", slog.String("secret", r.VaultSecret), slog.String("event", r.Kind.String()))
	if err := a.tracker.Unregister(ctx, id); err != nil {
		log.Warn("could not untrack the agreement", slog.String("err", err.Error()))
	}
	if err := a.tracker.Refused(ag.node.String(), r.VaultSecret); err != nil {
		log.Warn("could not wait for the secret to come back", slog.String("err", err.Error()))
	}
	a.spawn(func(ctx context.Context) { a.sendCancel(ctx, id, ag.node) })
}

// sendCancel tells the agent the agreement ended, retrying a few times.
// Its sequence (from the clock) is above those of the outbox's updates,
// so an update still in flight cannot be applied after it.
func (a *agbot) sendCancel(ctx context.Context, id string, n relay.Node) {
	defer a.seq.Forget(id)
	log := a.log.With(slog.String("agreement", id), slog.String("node", n.String()))
	u := agreement.Update{Version: agreement.MessageVersion, AgreementID: id, Kind: demo.UpdateKindCancel, Payload: json.RawMessage(`{}`)}
	delay := a.retryDelay
	for attempt := 1; attempt <= a.attempts; attempt++ {
		reply, err := a.request(ctx, id, n, agreement.TypeUpdate, func(to *agreement.PublicKeys, h agreement.Header) ([]byte, error) {
			return agreement.SealUpdate(a.keys, to, u, h)
		})
		switch {
		case err == nil:
			log.Info("agent told of the cancellation", slog.Bool("accepted", reply.Accepted), slog.String("reason", reply.Reason))
			return
		case ctx.Err() != nil:
			return
		}
		log.Warn("cancellation not delivered", slog.Int("attempt", attempt), slog.String("err", err.Error()))
		if !demo.Sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, time.Minute)
	}
	log.Error("the agent was not told of the cancellation")
}

// request verifies the node's agent identity, seals a proposal or
// cancellation to its certified keys, sends it and opens the reply, which
// must answer exactly this message. (Updates take the same path through
// the outbox's sealing transport.)
func (a *agbot) request(ctx context.Context, id string, n relay.Node, typ agreement.MessageType,
	seal func(*agreement.PublicKeys, agreement.Header) ([]byte, error)) (agreement.Reply, error) {
	to, err := a.verify(ctx, n)
	if err != nil {
		return agreement.Reply{}, fmt.Errorf("not sealing: the agent's identity did not verify: %w", err)
	}
	seq := a.seq.Next(id, typ)
	envelope, err := seal(to, agreement.Header{Sequence: seq})
	if err != nil {
		return agreement.Reply{}, fmt.Errorf("sealing: %w", err)
	}
	a.log.Debug("sending", slog.String("agreement", id), slog.String("type", string(typ)), slog.Uint64("sequence", seq))
	answer, err := a.send(ctx, n, envelope)
	if err != nil {
		return agreement.Reply{}, err
	}
	_, reply, err := agreement.OpenReply(ctx, a.keys, to, answer, a.replies)
	if err != nil {
		return agreement.Reply{}, fmt.Errorf("the reply: %w", err)
	}
	if reply.InReplyTo != (agreement.MessageRef{Type: typ, Sequence: seq}) {
		return agreement.Reply{}, fmt.Errorf("the reply answers %s %d, not this %s", reply.InReplyTo.Type, reply.InReplyTo.Sequence, typ)
	}
	return reply, nil
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

// active reports whether the agreement has not ended.
func (a *agbot) active(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.agreements[id]
	return ok
}

// end forgets an agreement and returns it, or nil if it had ended already.
func (a *agbot) end(id string) *agreementState {
	a.mu.Lock()
	defer a.mu.Unlock()
	ag, ok := a.agreements[id]
	if !ok {
		return nil
	}
	delete(a.agreements, id)
	if a.byNode[ag.node] == id {
		delete(a.byNode, ag.node)
	}
	return ag
}
