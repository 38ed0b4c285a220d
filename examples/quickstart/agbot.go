package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Delivery settings of the demo: the shortest watcher interval allowed, so
// the demo sees changes at once (a real agbot polls every minute or so, the
// default), short retry delays, and no grace before a deleted secret
// cancels its agreements (a real agbot keeps the default of a few minutes,
// so that a secret deleted by mistake can be restored in time).
const (
	watchInterval = time.Second
	replyTimeout  = 2 * time.Second
	initialDelay  = 100 * time.Millisecond
	maxDelay      = time.Second
)

// stateFile is the agbot's delivery state, in the run's work directory.
const stateFile = "agbot-state.db"

// agbot is the hub's agreement bot, the only party that reads the secret
// store. It serves the existence API deployers validate against, and embeds
// one delivery engine, which verifies an agent's identity certificate before
// sealing anything to it, proposes agreements and keeps their secrets
// current until they end.
type agbot struct {
	keys     *agreement.PrivateKeys
	checker  binding.ExistenceChecker
	resolver binding.Resolver
	verifier *identity.Verifier
	state    delivery.State
	engine   *delivery.Engine
	api      *httptest.Server
	say      *narrator
	log      *slog.Logger

	mu       sync.Mutex
	agents   map[string]*agentContact // node → its agent
	narrated map[string]bool          // certificate serials whose verification was narrated
	cancels  map[string]bool          // agreements the cancel hook was called for
}

// agentContact is what the agbot knows of a node's agent: the certificate
// chain it published (re-verified before every seal) and how to reach it.
type agentContact struct {
	chain    []byte // PEM
	endpoint agentEndpoint
}

// agentEndpoint is how the agbot reaches an agent: through the exchange.
type agentEndpoint interface {
	// Receive hands the agent a sealed proposal or update (a cancellation
	// is an update too) and returns its sealed reply.
	Receive(ctx context.Context, envelope []byte) (reply []byte, err error)
}

type agbotOptions struct {
	store    *secretstore.Store
	verifier *identity.Verifier
	resolver binding.Resolver // the exchange's service definitions
	// authenticate checks a deployer's credentials for the agbot's API.
	authenticate func(context.Context, secretsapi.Credentials) (secretsapi.Caller, error)
	// dir holds the agbot's delivery state file.
	dir    string
	say    *narrator
	logger *slog.Logger
}

func newAgbot(opts agbotOptions) (_ *agbot, err error) {
	log := opts.logger.With("component", "agbot")
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	if err != nil {
		return nil, err
	}
	// The engine's durable memory: what each agent was sent and
	// acknowledged (store names and content tags, never values), in one
	// crash-safe file.
	state, _, err := boltstate.Open(filepath.Join(opts.dir, stateFile), boltstate.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, state.Close())
		}
	}()
	a := &agbot{
		keys:     keys,
		resolver: opts.resolver,
		verifier: opts.verifier,
		state:    state,
		say:      opts.say,
		log:      log,
		agents:   map[string]*agentContact{},
		narrated: map[string]bool{},
		cancels:  map[string]bool{},
	}
	a.engine, err = delivery.New(delivery.Options{
		Store:        opts.store,
		State:        state,
		Keys:         keys,
		Agents:       a,
		Transport:    a,
		OnCancel:     a.cancelled,
		Interval:     watchInterval,
		Grace:        delivery.NoGrace,
		ReplyTimeout: replyTimeout,
		InitialDelay: initialDelay,
		MaxDelay:     maxDelay,
		Logger:       log,
	})
	if err != nil {
		return nil, err
	}
	// The existence API and the checker read through the engine's store,
	// so that its health counts their calls too.
	if a.checker, err = binding.NewStoreChecker(a.engine.Store(), org); err != nil {
		return nil, err
	}
	handler, err := secretsapi.NewHandler(secretsapi.Options{Store: a.engine.Store(), Authenticate: opts.authenticate, Logger: log})
	if err != nil {
		return nil, err
	}
	a.api = httptest.NewServer(handler)
	return a, nil
}

// basicAuthenticator is the agbot API's authentication hook for one
// deployer, a user of the organisation, with a password. A real hook asks
// the exchange.
func basicAuthenticator(user, password string) func(context.Context, secretsapi.Credentials) (secretsapi.Caller, error) {
	return func(_ context.Context, c secretsapi.Credentials) (secretsapi.Caller, error) {
		if c.Org != "" && c.Org != org || c.User != user || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(password)) != 1 {
			return secretsapi.Caller{}, errors.New("unknown user or wrong password")
		}
		return secretsapi.Caller{Org: org, ID: user, Role: secretsapi.RoleUser}, nil
	}
}

// propose makes an agreement: it validates the deployment with the store
// as existence checker, registers the agreement with the engine, its
// bindings resolved to store names for the node, and waits until the agent
// holds every bound secret. The engine reads the values when it seals the
// proposal, and keeps trying (a store outage, an agent not answering) until
// the agent accepts; the wait gives up after waitTimeout.
func (a *agbot) propose(ctx context.Context, agreementID, node string, target binding.Target, agent *agentContact) error {
	report, err := binding.Validate(ctx, target, binding.Options{Resolver: a.resolver, Checker: a.checker, Logger: a.log})
	if err != nil {
		return err
	}
	if err := report.Err(); err != nil {
		return fmt.Errorf("agbot: the deployment is not valid: %w", err)
	}
	bindings, err := report.Bindings(org, node)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.agents[node] = agent
	a.mu.Unlock()
	// Narrated first: the engine may propose the agreement before
	// Register returns.
	a.say.sayf("agbot", "registers %s with the delivery engine; it watches %s", agreementID, strings.Join(delivery.StoreNames(bindings), ", "))
	if err := a.engine.Register(ctx, delivery.Agreement{ID: agreementID, Node: node, Services: bindings}); err != nil {
		return err
	}
	st, err := a.waitInSync(ctx, agreementID)
	if err != nil {
		return err
	}
	a.say.sayf("agbot", "the agent accepted %s; it holds %s", agreementID, slotsNote(st))
	return nil
}

// waitInSync waits, at most waitTimeout, until the agent of an agreement
// acknowledged the desired content of every secret.
func (a *agbot) waitInSync(ctx context.Context, agreementID string) (delivery.Status, error) {
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	st, err := a.engine.Wait(wctx, agreementID)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		why := st.LastError
		if st.Rejection != "" {
			why = "the agent rejected it: " + st.Rejection
		}
		if why == "" {
			why = st.Waiting
		}
		return st, fmt.Errorf("agbot: %s not in sync after %s, %d attempt(s): %s", agreementID, waitTimeout, st.Attempts, why)
	}
	return st, err
}

// slotsNote says which store secret each service secret of st comes from.
func slotsNote(st delivery.Status) string {
	var parts []string
	for _, s := range st.Slots {
		parts = append(parts, s.Name+" from "+s.Acked.StoreName)
	}
	return strings.Join(parts, ", ")
}

// Keys implements delivery.Agents: the keys of the node's agent, from
// its identity certificate, verified afresh before every seal: a revoked or
// expired identity gets nothing.
func (a *agbot) Keys(ctx context.Context, node string) (*agreement.PublicKeys, error) {
	agent, err := a.contact(node)
	if err != nil {
		return nil, err
	}
	verified, err := a.verifier.Verify(ctx, agent.chain)
	if err != nil {
		return nil, fmt.Errorf("agbot: the agent's certificate: %w", err)
	}
	keys, err := agreement.NewPublicKeys(verified.SigningKey, verified.EncryptionKey)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	first := !a.narrated[verified.Serial]
	a.narrated[verified.Serial] = true
	a.mu.Unlock()
	if first {
		a.say.sayf("agbot", "verified the certificate of %s (serial %s); sealing to its key %s (verified again before every seal)",
			verified.Instance, verified.Serial, keys.EncryptionKeyID())
	}
	return keys, nil
}

// Send implements delivery.Transport: the exchange carries the sealed
// envelope to the node's agent and its sealed reply back, which the engine
// opens.
func (a *agbot) Send(ctx context.Context, m delivery.Message) ([]byte, error) {
	agent, err := a.contact(m.Node)
	if err != nil {
		return nil, err
	}
	if h, err := agreement.PeekHeader(m.Envelope, agreement.Options{}); err == nil {
		what := string(h.Type)
		if h.Type == agreement.TypeUpdate {
			what = "update (or cancellation)"
		}
		a.say.sayf("agbot", "sends the sealed %s of %s: %d bytes", what, m.AgreementID, len(m.Envelope))
	}
	return agent.endpoint.Receive(ctx, m.Envelope)
}

func (a *agbot) contact(node string) (*agentContact, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	agent := a.agents[node]
	if agent == nil {
		return nil, fmt.Errorf("agbot: no agent known on node %s", node)
	}
	return agent, nil
}

// cancelled is the engine's cancel hook: a bound secret was deleted or
// access to it revoked, confirmed in healthy cycles. The engine already
// sends the agent the cancellation until it is acknowledged; an agbot
// would end the agreement in the exchange here.
func (a *agbot) cancelled(_ context.Context, agreementID string, c delivery.Cancellation) {
	a.mu.Lock()
	a.cancels[agreementID] = true
	a.mu.Unlock()
	a.say.sayf("agbot", "engine cancel hook: %s is %s, so %s is cancelled; the engine tells the agent", c.StoreName, c.Kind, agreementID)
}

// hooked reports whether the cancel hook was called for the agreement.
func (a *agbot) hooked(agreementID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cancels[agreementID]
}

func (a *agbot) close() error {
	a.api.Close()
	return a.state.Close()
}
