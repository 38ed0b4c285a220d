// Package agbot assembles the hub side of edgesecrets: an agreement bot
// that deploys secrets to the nodes of its organisations and keeps them
// current. One Options struct configures it and one call, Run, runs it;
// Handler serves its HTTP surface on the embedder's server:
//
//	/org/{org}/secrets..., /secrets/..., /health, /deploycheck/...  the secrets-manager API (package secretsapi)
//	/admin/...                          the operator routes over the delivery engine (package secretsapi, Options.Operations)
//	/identity/...                       agents register and refresh their identity (package agreement/identity)
//	/relay/...                          the agreement-message relay the agents poll (package relay)
//
// When an agent publishes its identity certificate on the relay, the
// Agbot verifies it, asks Options.Deploy what to deploy to the node, and
// deploys it through its delivery engine (delivery.Engine.Deploy): a
// deployment whose secrets do not exist yet waits for them, one held up by
// the agbot's own trouble (the store down or refusing the agbot, the
// state unavailable) is retried every cycle, and only a definite
// validation error is refused, with its full report in the log. The engine
// then seals the proposal to the agent's certified key, delivers rotations
// and cancellations through the relay, and retries until the agent
// answers.
//
// Agbots sharing a state (pgstate) share everything that outlives a
// process: the agreements, the identity records (Options.Identities), and,
// given to each, the hub CA and the agreement keys. An agent registers
// once, through whichever agbot it reaches, publishes its certificate on
// every agbot's relay, and is delivered to by whichever agbot holds its
// agreement; when that agbot dies another takes its agreements over.
//
// Every piece stays usable alone: an embedder with a transport of its own
// (Open Horizon's exchange) builds a delivery.Engine, an identity.Issuer
// and a secretsapi handler directly, as this package does.
package agbot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// Options configure an Agbot.
type Options struct {
	// Delivery configures the delivery engine. Store, State and Keys are
	// required; Agents and Transport must be nil: the Agbot supplies them
	// (agents' keys from their verified identity certificates, messages
	// through its relay). OnCancel and OnReady, when set, are called after
	// the Agbot's own handling. Logger defaults to the Agbot's.
	Delivery delivery.Options
	// Identities keeps the hub's identity records (certificates,
	// revocations, single-use nonces): the CertStore opened with the
	// state (boltstate.Open, pgstate.Open), so that every agbot sharing
	// the state verifies every agent. Required.
	Identities identity.CertStore
	// CA issues the agents' identity certificates (identity.NewCA);
	// agbots sharing a state must share it. Required.
	CA identity.CertSigner
	// Attest confirms an agent's attestation document
	// (identity.IssuerOptions.Attest). Required.
	Attest func(ctx context.Context, req identity.AttestationRequest) (issuedAt time.Time, err error)
	// Authenticate says who a request's caller is
	// (secretsapi.Options.Authenticate). The secrets-manager API applies
	// its roles; revoking an agent's identity and the /admin/ routes
	// need secretsapi.RoleAdmin. Required.
	Authenticate func(ctx context.Context, c secretsapi.Credentials) (secretsapi.Caller, error)
	// Deploy says what to deploy to a node whose agent's identity
	// verified, or false for nothing. It is called each time the node's
	// agent publishes a certificate, and for every node with an agreement
	// on Redeploy. It must be safe for concurrent use. Required.
	Deploy func(ctx context.Context, node relay.Node) (Deployment, bool)
	// Resolver supplies the service definitions a deploycheck request
	// does not carry (secretsapi.Options.Resolver). Optional.
	Resolver binding.Resolver
	// Configuration is /health's "configuration"
	// (secretsapi.Options.Configuration).
	Configuration secretsapi.HealthConfiguration
	// Fallback serves the requests outside the Agbot's routes, the
	// embedder's own; nil answers them 404.
	Fallback http.Handler
	// MaxNodes and MaxMessages bound the relay (relay.ServerOptions);
	// zero means 1024 nodes and 64 messages a mailbox.
	MaxNodes, MaxMessages int
	// Logger receives what the Agbot does: nodes, agreement ids, store
	// names and reasons, never a value. Nil discards.
	Logger *slog.Logger
}

// Deployment is what an Agbot deploys to a node: a pattern or deployment
// policy (binding.DecodePattern, binding.DecodeDeploymentPolicy) and the
// service definitions it needs.
type Deployment struct {
	Target   binding.Target
	Resolver binding.Resolver
}

// Agbot is the hub side assembled; see the package documentation. Its
// methods are safe for concurrent use.
type Agbot struct {
	opts     Options
	log      *slog.Logger
	engine   *delivery.Engine
	issuer   *identity.Issuer
	verifier *identity.Verifier
	relay    *relay.Server
	handler  http.Handler

	mu      sync.Mutex
	runCtx  context.Context // Run's; nil before Run
	stopped bool            // Run returned: no more deploys
	wg      sync.WaitGroup
	pending map[relay.Node]bool // deploys asked for before Run
	// deploying holds the nodes being deployed; true when another deploy
	// of the node was asked for meanwhile.
	deploying map[relay.Node]bool
	nodes     map[string]relay.Node // by agreement id, the nodes deployed since New
	// empty holds the nodes whose agent said it holds nothing, until their
	// deploy proposes their agreement again.
	empty map[relay.Node]bool
}

// New checks opts and assembles an Agbot. It starts nothing: Run does.
func New(opts Options) (*Agbot, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	a := &Agbot{opts: opts, log: opts.Logger, pending: map[relay.Node]bool{}, deploying: map[relay.Node]bool{}, nodes: map[string]relay.Node{},
		empty: map[relay.Node]bool{}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	var err error
	a.issuer, err = identity.NewIssuer(identity.IssuerOptions{Attest: opts.Attest, Signer: opts.CA, Store: opts.Identities, Logger: a.log})
	if err != nil {
		return nil, fmt.Errorf("agbot: %w", err)
	}
	a.verifier = a.issuer.Verifier()
	// Message ids from the clock: a restarted agbot's relay hands out ids
	// above those of the one before, which agents that kept running still
	// poll after.
	a.relay = relay.NewServer(relay.ServerOptions{OnCertificate: a.onCertificate, Verifier: a.verifier, Keys: opts.Delivery.Keys,
		MaxNodes: opts.MaxNodes, MaxMessages: opts.MaxMessages, FirstID: uint64(time.Now().UnixMicro()), Logger: a.log})
	do := opts.Delivery
	do.Agents, do.Transport = peers{a}, peers{a}
	do.OnCancel, do.OnReady = a.onCancel, a.onReady
	if do.Logger == nil {
		do.Logger = a.log
	}
	a.engine, err = delivery.New(do)
	if err != nil {
		return nil, fmt.Errorf("agbot: %w", err)
	}
	a.handler, err = a.newHandler()
	if err != nil {
		return nil, fmt.Errorf("agbot: %w", err)
	}
	return a, nil
}

// check names every missing or conflicting option.
func (o Options) check() error {
	var problems []error
	missing := func(field string, absent bool) {
		if absent {
			problems = append(problems, fmt.Errorf("%s is required", field))
		}
	}
	missing("Delivery.Store", o.Delivery.Store == nil)
	missing("Delivery.State", o.Delivery.State == nil)
	missing("Delivery.Keys", o.Delivery.Keys == nil)
	missing("Identities", o.Identities == nil)
	missing("CA", o.CA == nil)
	missing("Attest", o.Attest == nil)
	missing("Authenticate", o.Authenticate == nil)
	missing("Deploy", o.Deploy == nil)
	if o.Delivery.Agents != nil || o.Delivery.Transport != nil {
		problems = append(problems, errors.New("Delivery.Agents and Delivery.Transport must be nil: the agbot verifies agents and carries messages itself"))
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("agbot: options: %w", err)
	}
	return nil
}

// Engine returns the Agbot's delivery engine: agreements' status, health,
// ending an agreement.
func (a *Agbot) Engine() *delivery.Engine { return a.engine }

// Handler returns the Agbot's HTTP surface (see the package
// documentation). Serve it as the server's own handler, not behind a mux
// that cleans paths (see secretsapi, "Mounting"), with the server limits
// an API open to agents needs (header, read and idle timeouts; 4 MiB
// bodies fit the relay's largest envelope).
func (a *Agbot) Handler() http.Handler { return a.handler }

// Run runs the delivery engine and the deploys until ctx ends, then waits
// for the deploys under way, and returns nil; or returns the engine's
// error when it stops on its own. Deploys asked for before Run (agents
// publishing certificates early) run once it starts. Run once.
func (a *Agbot) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	if a.runCtx != nil {
		a.mu.Unlock()
		return errors.New("agbot: Run called twice")
	}
	a.runCtx = ctx
	pending := a.pending
	a.pending = nil
	a.mu.Unlock()
	for n := range pending {
		a.spawnDeploy(n)
	}
	err := a.engine.Run(ctx)
	cancel()
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.wg.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// spawnDeploy deploys n on its own goroutine while Run runs, or once it
// starts.
func (a *Agbot) spawnDeploy(n relay.Node) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.stopped:
		return
	case a.runCtx == nil:
		a.pending[n] = true
		return
	}
	ctx := a.runCtx
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.deploy(ctx, n)
	}()
}

// AgreementID is the id of a node's agreement: one per node, the same for
// every agbot sharing a state, so that two agbots deploying the node at
// once register one agreement.
func AgreementID(n relay.Node) string {
	sum := sha256.Sum256([]byte(n.String()))
	return "agreement-" + hex.EncodeToString(sum[:10])
}

// parseNode parses "<org>/<node>", the engine's node id.
func parseNode(s string) (relay.Node, bool) {
	org, node, ok := strings.Cut(s, "/")
	n := relay.Node{Org: org, Node: node}
	return n, ok && n.Validate() == nil
}

// keys gives delivery.Agents (peers): the verified keys of the agent on a
// node ("<org>/<node>"), from the certificate chain it published. When the
// chain no longer verifies because the agent's identity is lost (no record
// for it, revoked, expired: identity.ErrIdentityLost), the relay drops it:
// the agent, told that the relay holds no certificate, publishes it again,
// learns from the refusal that its identity is lost, and registers again.
func (a *Agbot) keys(ctx context.Context, node string) (*agreement.PublicKeys, error) {
	n, ok := parseNode(node)
	if !ok {
		return nil, fmt.Errorf("agbot: not a node id: %q", node)
	}
	return a.verifiedKeys(ctx, n)
}

// verifiedKeys is certified that drops from the relay a chain whose
// identity is lost (see keys), so that the agent registers again.
func (a *Agbot) verifiedKeys(ctx context.Context, n relay.Node) (*agreement.PublicKeys, error) {
	keys, chain, err := a.certified(ctx, n)
	if errors.Is(err, identity.ErrIdentityLost) && a.relay.DropCertificate(n, chain) {
		a.log.Warn("the agent's identity is lost; its certificate is dropped from the relay so that it registers again",
			slog.String("node", n.String()), slog.String("err", err.Error()))
	}
	return keys, err
}

// send gives delivery.Transport (peers): the relay carries the envelope to
// the node's agent and its reply back. It waits for the reply until ctx
// (the engine's reply timeout) ends.
func (a *Agbot) send(ctx context.Context, m delivery.Message) ([]byte, error) {
	n, ok := parseNode(m.Node)
	if !ok {
		return nil, fmt.Errorf("agbot: not a node id: %q", m.Node)
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

// certified verifies the certificate chain the node's agent published
// (hub CA, expiry, revocation, current serial) and returns the keys it
// certifies and the chain.
func (a *Agbot) certified(ctx context.Context, n relay.Node) (*agreement.PublicKeys, []byte, error) {
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
	keys, err := vid.PublicKeys()
	return keys, chain, err
}

// peers is the Agbot as its engine's delivery.Agents and
// delivery.Transport, which embedders do not call.
type peers struct{ a *Agbot }

// Keys implements delivery.Agents.
func (p peers) Keys(ctx context.Context, node string) (*agreement.PublicKeys, error) {
	return p.a.keys(ctx, node)
}

// Send implements delivery.Transport.
func (p peers) Send(ctx context.Context, m delivery.Message) ([]byte, error) {
	return p.a.send(ctx, m)
}
