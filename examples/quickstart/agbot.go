package main

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// agbot is the hub's agreement bot, the only party that reads the secret
// store. It serves the existence API deployers validate against, verifies
// an agent's identity certificate before sealing anything to it, proposes
// agreements, and keeps their secrets current: watcher → tracker → outbox.
type agbot struct {
	keys     *agreement.PrivateKeys
	monitor  *secretstore.Monitor // feeds /health "lastVaultInteraction"
	reader   *secretstore.Reader  // N agreements over M secrets cost O(M) reads
	checker  *binding.StoreChecker
	resolver binding.Resolver
	verifier *identity.Verifier
	watcher  *secretstore.Watcher
	tracker  *agreement.Tracker
	outbox   *agreement.Outbox
	replies  *agreement.MemoryReplayGuard
	api      *httptest.Server
	say      *narrator
	log      *slog.Logger

	mu     sync.Mutex
	agents map[string]*agentContact // agreement id → its agent
}

// agentContact is what the agbot knows of an agreement's agent: the
// certificate chain it published (re-verified before every seal) and how
// to reach it.
type agentContact struct {
	chain    []*x509.Certificate
	endpoint agentEndpoint
}

// agentEndpoint is how the agbot reaches an agent: through the exchange.
type agentEndpoint interface {
	// Receive hands the agent a sealed proposal or update and returns its
	// sealed reply.
	Receive(ctx context.Context, envelope []byte) (reply []byte, err error)
	// Cancel ends an agreement: the agent removes its services' secrets.
	Cancel(ctx context.Context, agreementID string) error
}

type agbotOptions struct {
	store    secretstore.Store
	verifier *identity.Verifier
	resolver binding.Resolver // the exchange's service definitions
	// authenticate checks a deployer's credentials for the agbot's API.
	authenticate secretsapi.Authenticator
	say          *narrator
	logger       *slog.Logger
}

func newAgbot(ctx context.Context, opts agbotOptions) (*agbot, error) {
	log := opts.logger.With("component", "agbot")
	keys, err := agreement.GenerateKeys(agreement.DefaultSuite)
	if err != nil {
		return nil, err
	}
	monitor := secretstore.NewMonitor(opts.store)
	checker, err := binding.NewStoreChecker(monitor, org)
	if err != nil {
		return nil, err
	}
	// The shortest interval allowed, so the demo sees changes at once; a
	// real agbot polls every minute or so (the default).
	interval, err := secretstore.NewWatcherConfig("1s")
	if err != nil {
		return nil, err
	}
	// The watcher gets the monitor, not the reader: a cache would hide
	// fresh data from it.
	watcher, err := secretstore.NewWatcher(monitor, secretstore.WatcherOptions{Config: interval, Logger: log})
	if err != nil {
		return nil, err
	}
	a := &agbot{
		keys:     keys,
		monitor:  monitor,
		reader:   secretstore.NewReader(monitor, secretstore.ReaderOptions{TTL: 30 * time.Second}),
		checker:  checker,
		resolver: opts.resolver,
		verifier: opts.verifier,
		watcher:  watcher,
		replies:  agreement.NewMemoryReplayGuard(),
		say:      opts.say,
		log:      log,
		agents:   map[string]*agentContact{},
	}
	// The outbox's updates travel sealed: for each attempt the transport
	// seals the update to the agent's verified keys, sends it over the
	// exchange and opens the agent's sealed reply.
	transport, err := agreement.NewSealingTransport(agreement.SealingTransportOptions{
		Keys: keys, AgentKeys: a.agentKeys, Sender: a, ReplyGuard: a.replies,
	})
	if err != nil {
		return nil, err
	}
	// Short retry delays for the demo; the defaults suit agents that may
	// be offline for a while.
	a.outbox, err = agreement.NewOutbox(ctx, transport, agreement.OutboxOptions{
		MaxAttempts: 4, Backoff: 200 * time.Millisecond, MaxBackoff: time.Second, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	a.tracker, err = agreement.NewTracker(agreement.TrackerOptions{
		Reader: a.reader, Watcher: watcher, Outbox: narratedQueue{Outbox: a.outbox, say: a.say},
		Cancel: a.cancelAgreement, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	handler, err := secretsapi.NewHandler(secretsapi.Options{Store: monitor, Authenticator: opts.authenticate, Logger: log})
	if err != nil {
		return nil, err
	}
	a.api = httptest.NewServer(handler)
	return a, nil
}

// basicAuthenticator is the agbot API's authentication hook for one
// deployer, a user of the organisation, with a password. A real hook asks
// the exchange.
func basicAuthenticator(user, password string) secretsapi.Authenticator {
	return secretsapi.AuthenticatorFunc(func(_ context.Context, c secretsapi.Credentials) (secretsapi.Caller, error) {
		if c.Org != "" && c.Org != org || c.User != user || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(password)) != 1 {
			return secretsapi.Caller{}, errors.New("unknown user or wrong password")
		}
		return secretsapi.Caller{Org: org, ID: user, Role: secretsapi.RoleUser}, nil
	})
}

// runWatcher polls the store until ctx ends, passing each cycle's events
// to the tracker.
func (a *agbot) runWatcher(ctx context.Context) error {
	return a.watcher.Run(ctx, a.handleEvents)
}

func (a *agbot) handleEvents(ctx context.Context, c secretstore.Cycle) {
	events := c.Events
	for _, e := range events {
		using := strings.Join(a.tracker.Agreements(e.Name), ", ")
		switch {
		case e.Kind == secretstore.Unavailable:
			a.say.sayf("agbot", "watcher: the store did not answer for %d secret(s); agreements kept", len(e.Names))
		case e.Initial && e.Kind == secretstore.Appeared:
			a.say.sayf("agbot", "watcher: first look at %s%s; agreements using it: %s", e.Name, versionNote(e.Version), using)
		default:
			a.say.sayf("agbot", "watcher: %s %s%s; agreements using it: %s", e.Name, e.Kind, versionNote(e.Version), using)
		}
	}
	// The tracker compares what each agreement was sent with what the
	// watcher sees, so a rotation before the watcher's first look is
	// delivered too.
	a.tracker.HandleEvents(ctx, events)
}

func versionNote(version string) string {
	if version == "" {
		return ""
	}
	return " (version " + version + ")"
}

// narratedQueue is the outbox as the tracker sees it: it narrates each
// update the tracker queues, naming the service secrets it carries.
type narratedQueue struct {
	*agreement.Outbox
	say *narrator
}

// Queue narrates the update, then queues it in the outbox.
func (q narratedQueue) Queue(ctx context.Context, u agreement.Update) error {
	if su, err := u.Secrets(); err == nil {
		var names []string
		for _, ss := range su.Services {
			names = append(names, ss.SecretNames()...)
		}
		q.say.sayf("agbot", "tracker: the agent of %s holds other content than the store; update queued, carrying %s", u.AgreementID, strings.Join(names, ", "))
	}
	return q.Outbox.Queue(ctx, u)
}

// propose makes an agreement: it validates the deployment with the store
// as existence checker, reads the bound secrets, seals a proposal to the
// agent's certified keys and, once the agent accepts, registers the
// agreement with the tracker, with the content tag of each secret it
// sealed.
func (a *agbot) propose(ctx context.Context, agreementID string, target binding.Target, agent *agentContact) error {
	report, err := binding.Validate(ctx, target, binding.Options{Resolver: a.resolver, Checker: a.checker, Logger: a.log})
	if err != nil {
		return err
	}
	if err := report.Err(); err != nil {
		return fmt.Errorf("agbot: the deployment is not valid: %w", err)
	}
	bindings, err := report.ServiceBindings(org)
	if err != nil {
		return err
	}
	// The proposal carries what was read; the tracker, given its content
	// tags, sends an update if the store holds anything else, whenever the
	// watcher looks.
	proposal, bindings, err := agreement.ReadProposal(ctx, a.reader, agreementID, bindings)
	if errors.Is(err, secretstore.ErrNotFound) {
		return fmt.Errorf("agbot: a secret was deleted after validation: %w", err)
	}
	if err != nil {
		return err
	}

	a.mu.Lock()
	a.agents[agreementID] = agent
	a.mu.Unlock()
	err = a.sendProposal(ctx, proposal)
	if err != nil {
		a.mu.Lock()
		delete(a.agents, agreementID)
		a.mu.Unlock()
		return err
	}
	if err := a.tracker.Register(agreementID, bindings); err != nil {
		return err
	}
	a.say.sayf("agbot", "the agent accepted %s; the tracker watches %s", agreementID, strings.Join(storeNames(bindings), ", "))
	return nil
}

// storeNames returns the distinct store secrets of bindings, sorted.
func storeNames(bindings []agreement.ServiceBinding) []string {
	set := map[string]bool{}
	for _, sb := range bindings {
		for _, b := range sb.Secrets {
			set[b.VaultSecret] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// sendProposal seals the proposal to the agent's verified keys, sends it
// and opens the agent's sealed reply. An agreement has one proposal, so its
// sequence is 1.
func (a *agbot) sendProposal(ctx context.Context, p agreement.Proposal) error {
	to, err := a.agentKeys(ctx, p.AgreementID)
	if err != nil {
		return err
	}
	envelope, err := agreement.SealProposal(a.keys, to, p, agreement.Header{Sequence: 1})
	if err != nil {
		return err
	}
	answer, err := a.Send(ctx, p.AgreementID, envelope)
	if err != nil {
		return fmt.Errorf("agbot: sending the proposal: %w", err)
	}
	_, reply, err := agreement.OpenReply(ctx, a.keys, to, answer, a.replies)
	if err != nil {
		return fmt.Errorf("agbot: the agent's reply: %w", err)
	}
	if reply.InReplyTo != (agreement.MessageRef{Type: agreement.TypeProposal, Sequence: 1}) {
		return fmt.Errorf("agbot: the agent's reply answers %s #%d, not the proposal", reply.InReplyTo.Type, reply.InReplyTo.Sequence)
	}
	if !reply.Accepted {
		return fmt.Errorf("agbot: the agent rejected the proposal: %s", reply.Reason)
	}
	return nil
}

// agentKeys returns the keys of an agreement's agent from its identity
// certificate, verified afresh before every seal: a revoked or expired
// identity gets nothing. It is the sealing transport's AgentKeys.
func (a *agbot) agentKeys(ctx context.Context, agreementID string) (*agreement.PublicKeys, error) {
	agent, err := a.contact(agreementID)
	if err != nil {
		return nil, err
	}
	verified, err := a.verifier.Verify(ctx, agent.chain...)
	if err != nil {
		return nil, fmt.Errorf("agbot: the agent's certificate: %w", err)
	}
	keys, err := verified.PublicKeys()
	if err != nil {
		return nil, err
	}
	a.say.sayf("agbot", "verified the certificate of %s (serial %s); sealing to its key %s",
		verified.Instance, verified.Serial, keys.EncryptionKeyID())
	return keys, nil
}

// Send implements agreement.EnvelopeSender: the exchange carries the sealed
// envelope to the agreement's agent and its sealed reply back.
func (a *agbot) Send(ctx context.Context, agreementID string, envelope []byte) ([]byte, error) {
	agent, err := a.contact(agreementID)
	if err != nil {
		return nil, err
	}
	if h, err := agreement.PeekHeader(envelope); err == nil {
		a.say.sayf("agbot", "sends the sealed %s of %s: %d bytes", h.Type, agreementID, len(envelope))
	}
	return agent.endpoint.Receive(ctx, envelope)
}

func (a *agbot) contact(agreementID string) (*agentContact, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	agent := a.agents[agreementID]
	if agent == nil {
		return nil, fmt.Errorf("agbot: no agent for agreement %s", agreementID)
	}
	return agent, nil
}

// cancelAgreement is the tracker's cancel hook: a bound secret was deleted
// or access to it revoked. It ends the agreement on both sides. The
// tracker may call it more than once.
func (a *agbot) cancelAgreement(ctx context.Context, agreementID string, r agreement.Revocation) {
	a.mu.Lock()
	agent := a.agents[agreementID]
	delete(a.agents, agreementID)
	a.mu.Unlock()
	if agent == nil {
		return
	}
	a.say.sayf("agbot", "tracker cancel hook: %s is %s, so %s is cancelled", r.VaultSecret, r.Kind, agreementID)
	if err := agent.endpoint.Cancel(ctx, agreementID); err != nil {
		a.log.Error("could not tell the agent to cancel", "agreement", agreementID, "err", err.Error())
	}
	if err := a.tracker.Unregister(ctx, agreementID); err != nil {
		a.log.Error("could not unregister the agreement", "agreement", agreementID, "err", err.Error())
	}
}

func (a *agbot) close() {
	a.tracker.Close()
	a.api.Close()
}
