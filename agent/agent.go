// Package agent assembles the node side of edgesecrets: an edge agent that
// receives the secrets an agbot seals to its own keys and serves them to
// its service instances. One Options struct configures it and one call,
// Run, runs it; Handler serves the services' API on the embedder's server.
//
// Run keeps the agent's identity registered with the hub (package
// agreement/identity: a certificate carrying the agent's agreement keys,
// renewed before it expires, registered again with a fresh attestation
// whenever an agbot answers that it does not know the identity, or that it
// is revoked or expired), publishes the certificate on every agbot's relay
// (package relay; again when a restarted agbot's relay no longer holds
// it), and polls each relay for sealed messages. Each message is opened
// with the agent's keys (only the pinned agbot's signature opens it),
// checked against the replay floor kept with the files, applied to the
// on-node store (package agentapi: root-only files per service instance)
// and answered with a sealed reply. A new instance gets a fresh token,
// handed to the embedder (Options.OnInstance) to start the service's
// container with; a cancellation wipes the instance and revokes its token.
//
// Options.Services configure instances by id: the owner, group, mode and
// template of their files (agentapi.FileOptions), and a Reload to run
// after their files changed: a command (argv, no shell), a signal to the
// process a pid file names, or the embedder's hook; debounced (changes
// within 2 s make one reload), bounded (30 s, then a command is killed),
// logged and counted (edgesecrets.agent.reloads by outcome: ok, failed,
// timeout). A reload that fails never undoes the files: they are written
// before it runs. A new instance's first files do not reload it.
//
// With several agbots sharing a PostgreSQL state (and so the identity
// records, the hub CA and the agreement keys), the agent registers once,
// through whichever answers, and takes messages from each: when one agbot
// dies, another takes over its agreements and reaches the agent through
// its own relay.
//
// Every piece stays usable alone: an embedder with a transport of its own
// (Open Horizon's exchange) uses agentapi.Receiver, agentapi.Store and
// identity.Agent directly, as this package does.
package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/ctxtime"
	"github.com/edgesecrets/edgesecrets/internal/httpmetrics"
	"github.com/edgesecrets/edgesecrets/relay"
)

// Defaults of Options.
const (
	defaultPollInterval       = time.Second
	defaultRegisterBackoff    = 500 * time.Millisecond
	defaultMaxRegisterBackoff = 10 * time.Second
)

// Options configure an Agent.
type Options struct {
	// Instance is who the agent is: its provider, organisation, node and
	// instance id. Required.
	Instance identity.Identity
	// Keys are the agent's agreement keys: the agbot seals to them, and
	// the identity certificate carries them. Required.
	Keys *agreement.PrivateKeys
	// Agbot holds the agbot's public keys, pinned: only envelopes it
	// signed open. Required.
	Agbot *agreement.PublicKeys
	// Agbots are the base URLs of the agbots (package agbot's Handler:
	// the identity API under /identity, the relay under /relay/). The
	// agent registers once, through the first that answers, and takes
	// messages from each. At least one.
	Agbots []string
	// Attest returns a fresh attestation document from the node's
	// provider, for each registration. Required.
	Attest func(ctx context.Context) (identity.Attestation, error)
	// Files configure the on-node store New opens (agentapi.Open): Root is
	// required. Tokens, when nil, is a table of the Agent's own.
	Files agentapi.Options
	// Assign chooses the instance of each service (container) of a
	// proposal (agentapi.ReceiverOptions.Assign). Default: one instance
	// per service, named after its container, or its service URL.
	Assign func(ctx context.Context, p agreement.Proposal) (agentapi.Instances, error)
	// OnInstance is called when an instance gets its token: after a
	// proposal's files are written, before the agbot hears that they
	// are; and at the start of Run, with a fresh token, for each instance
	// kept from an earlier run. Start (or tell) the service's container
	// with the mount and the token. An error rejects the proposal; the
	// agbot sends it again. Optional.
	OnInstance func(ctx context.Context, inst Instance) error
	// Services configure service instances by id: their files' owner,
	// group, mode and template (applied to the instances Assign returns
	// without Files of their own), and what to run after their files
	// changed (a command, a signal, a hook; see Reload). Checked by New.
	// Optional.
	Services map[string]ServiceOptions
	// OnMessage is called for every message taken from a relay, with what
	// the Receiver did (got) or why the message did not open (err: not
	// from the pinned agbot, not for this agent, altered, replayed). A
	// cancellation lists the instances it removed in got.Removed.
	// Optional.
	OnMessage func(ctx context.Context, got agentapi.Received, err error)
	// OpenHorizon serves the services' API in Open Horizon's profile
	// (agentapi.HandlerOptions.OpenHorizon).
	OpenHorizon bool
	// PollInterval is how often each relay is polled; zero means 1 s.
	PollInterval time.Duration
	// RegisterBackoff and MaxRegisterBackoff bound the waits between
	// registration and renewal attempts (identity.AgentOptions); zero
	// means 500 ms and 10 s.
	RegisterBackoff, MaxRegisterBackoff time.Duration
	// HTTPClient carries the identity and relay requests; nil means a
	// client with a 30 s timeout.
	HTTPClient *http.Client
	// MeterProvider gives the agent's OpenTelemetry instruments (messages
	// by outcome, files written and wiped, registrations, the services'
	// API requests by route and status); nil: the global provider, a
	// no-op until the embedder installs one.
	MeterProvider metric.MeterProvider
	// Logger receives what the agent does: agreement ids, message types,
	// instance ids, never a value or token. Nil discards.
	Logger *slog.Logger
}

// Instance is a service instance the agent provides for: its id (the
// user id of its credentials for the services' API), the directory to
// bind-mount read-only at agentapi.MountTarget in its container, and its
// token. Printing an Instance (fmt, slog, encoding/json) never shows the
// token.
type Instance struct {
	ID, Mount string
	Token     edgesecrets.Sensitive
}

// Format implements fmt.Formatter: everything but the token.
func (i Instance) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "{ID:%q Mount:%q Token:%s}", i.ID, i.Mount, edgesecrets.Redacted) // fmt.State buffers in memory
}

// LogValue implements slog.LogValuer: everything but the token.
func (i Instance) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", i.ID), slog.String("mount", i.Mount))
}

// Agent is the node side assembled; see the package documentation.
type Agent struct {
	opts      Options
	log       *slog.Logger
	node      relay.Node
	files     *agentapi.Store
	tokens    *agentapi.TokenTable
	receiver  *agentapi.Receiver
	inst      *instruments
	identity  *identity.Agent
	upstreams []*upstream
	handler   http.Handler
	reloads   *reloader

	runMu   sync.Mutex
	running bool
}

// upstream is one agbot the agent takes messages from. Agbots that share a
// PostgreSQL state share the identity records: the agent's one identity is
// published on each.
type upstream struct {
	url   string
	relay *relay.Client

	// Used by the poll loop only.
	published []byte // the certificate chain (PEM) last published on the relay
	refused   []byte // the chain the agbot refused as a lost identity: not published again
	after     uint64 // the id of the last relay message handled
}

// New checks opts, opens the on-node store and assembles an Agent. It
// starts nothing: Run does. Close closes the store.
func New(ctx context.Context, opts Options) (*Agent, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	a := &Agent{opts: opts, log: opts.Logger, node: relay.Node{Org: opts.Instance.Org, Node: opts.Instance.Node}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.opts.PollInterval <= 0 {
		a.opts.PollInterval = defaultPollInterval
	}
	if a.opts.RegisterBackoff <= 0 {
		a.opts.RegisterBackoff = defaultRegisterBackoff
	}
	if a.opts.MaxRegisterBackoff <= 0 {
		a.opts.MaxRegisterBackoff = defaultMaxRegisterBackoff
	}
	if a.opts.Assign == nil {
		a.opts.Assign = assignByContainer
	}
	a.opts.Assign = withFileOptions(a.opts.Assign, opts.Services)
	a.tokens = opts.Files.Tokens
	if a.tokens == nil {
		a.tokens = &agentapi.TokenTable{}
	}
	urls := make([]string, len(opts.Agbots))
	for i, u := range opts.Agbots {
		urls[i] = strings.TrimRight(strings.TrimSpace(u), "/")
		rc, err := relay.NewClient(urls[i], opts.HTTPClient)
		if err != nil {
			return nil, fmt.Errorf("agent: Agbots[%d]: %w", i, err)
		}
		a.upstreams = append(a.upstreams, &upstream{url: urls[i], relay: rc})
	}
	fallbacks := make([]string, 0, len(urls)-1)
	for _, u := range urls[1:] {
		fallbacks = append(fallbacks, u+"/identity")
	}
	hub, err := identity.NewClient(identity.ClientOptions{BaseURL: urls[0] + "/identity", Fallbacks: fallbacks, HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.identity, err = identity.NewAgent(identity.AgentOptions{Instance: opts.Instance, SigningKey: opts.Keys.Signer(),
		EncryptionKey: opts.Keys.Public().EncryptionKey(), Hub: hub, Attest: opts.Attest,
		InitialBackoff: a.opts.RegisterBackoff, MaxBackoff: a.opts.MaxRegisterBackoff, Logger: a.log})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	files := opts.Files
	files.Tokens = a.tokens
	if files.Logger == nil {
		files.Logger = a.log
	}
	a.files, err = agentapi.Open(ctx, files)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.receiver, err = agentapi.NewReceiver(a.files, agentapi.ReceiverOptions{Keys: opts.Keys, Agbot: opts.Agbot,
		Assign: a.opts.Assign, Provision: a.provision, Logger: a.log})
	if err == nil {
		a.handler, err = agentapi.NewHandler(a.files, agentapi.HandlerOptions{OpenHorizon: opts.OpenHorizon, Authenticate: a.tokens.Authenticate, Logger: a.log})
	}
	if err == nil {
		a.handler, err = httpmetrics.Wrap(a.handler, httpmetrics.Options{MeterProvider: opts.MeterProvider, Scope: meterName, Route: route})
	}
	if err == nil {
		a.inst, err = newInstruments(opts.MeterProvider)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("agent: %w", err), a.files.Close())
	}
	a.reloads = newReloader(opts.Services, a.log, a.inst.reload)
	return a, nil
}

// check names every missing option.
func (o Options) check() error {
	var problems []error
	if err := o.Instance.Validate(); err != nil {
		problems = append(problems, fmt.Errorf("Instance: %w", err))
	}
	missing := func(field string, absent bool) {
		if absent {
			problems = append(problems, fmt.Errorf("%s is required", field))
		}
	}
	missing("Keys", o.Keys == nil)
	missing("Agbot", o.Agbot == nil)
	missing("Agbots (at least one URL)", len(o.Agbots) == 0)
	missing("Attest", o.Attest == nil)
	missing("Files.Root", o.Files.Root == "")
	if err := checkServices(o.Services); err != nil {
		problems = append(problems, fmt.Errorf("%s: %w", "Services", err))
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("agent: options: %w", err)
	}
	return nil
}

// Handler returns the services' secrets API (agentapi.NewHandler over the
// Agent's store and tokens). Serve it as the server's own handler, or
// route to it by prefix in front of a mux (see agentapi), with timeouts
// and size limits on the server.
func (a *Agent) Handler() http.Handler { return a.handler }

// Files returns the on-node store: the instances, their mounts and
// status.
func (a *Agent) Files() *agentapi.Store { return a.files }

// Close closes the on-node store. Call it after Run returned.
func (a *Agent) Close() error { return a.files.Close() }

// Run gives the instances kept from an earlier run fresh tokens, then
// keeps the identity registered and takes the agbots' messages until ctx
// ends, and returns nil once everything it started has stopped. Run once.
func (a *Agent) Run(ctx context.Context) error {
	a.runMu.Lock()
	if a.running {
		a.runMu.Unlock()
		return errors.New("agent: Run called twice")
	}
	a.running = true
	a.runMu.Unlock()
	// Instances kept from an earlier run get fresh tokens; their services
	// re-read them when the old token is refused.
	for _, id := range a.files.InstanceIDs() {
		if err := a.provide(ctx, id); err != nil {
			return fmt.Errorf("agent: instance %s: %w", id, err)
		}
	}
	a.reloads.start(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { a.keepRegistered(ctx) })
	a.poll(ctx)
	wg.Wait()
	a.reloads.stop()
	return nil
}

// keepRegistered runs the identity Agent until ctx ends: it registers,
// renews, and registers again when the identity is lost. When it returns
// for a refusal it does not fix itself (a serial the hub no longer
// accepts), the agent registers again after a backoff.
func (a *Agent) keepRegistered(ctx context.Context) {
	delay := a.opts.RegisterBackoff
	for {
		err := a.identity.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		a.log.Warn("the hub no longer renews the identity; registering again", slog.String("err", errText(err)))
		if !ctxtime.Sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, a.opts.MaxRegisterBackoff)
		attestation, err := a.opts.Attest(ctx)
		if err == nil {
			_, err = a.identity.Register(ctx, attestation)
		}
		if ctx.Err() == nil {
			a.inst.registration(err)
		}
		if err != nil && ctx.Err() == nil {
			a.log.Warn("registering the identity failed; retrying", slog.String("err", err.Error()))
			continue
		}
		delay = a.opts.RegisterBackoff
	}
}

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// provision is the Receiver's Provision hook: each instance of an applied
// proposal gets its token.
func (a *Agent) provision(ctx context.Context, _ agreement.Proposal, instances agentapi.Instances) error {
	for _, inst := range instances {
		if err := a.provide(ctx, inst.ID); err != nil {
			return err
		}
	}
	return nil
}

// provide gives an instance a token, unless it has one, and hands it to
// OnInstance; the token works once OnInstance accepted it.
func (a *Agent) provide(ctx context.Context, id string) error {
	if _, ok := a.tokens.Token(ctx, id); ok {
		return nil
	}
	info, ok := a.files.Instance(id)
	if !ok {
		return fmt.Errorf("agent: no instance %s", id)
	}
	inst := Instance{ID: id, Mount: info.MountSource, Token: edgesecrets.Sensitive(rand.Text())}
	if a.opts.OnInstance != nil {
		if err := a.opts.OnInstance(ctx, inst); err != nil {
			return err
		}
	}
	return a.tokens.Set(id, string(inst.Token))
}

// withFileOptions sets Services' file options on the instances assign
// returns without Files.
func withFileOptions(assign func(context.Context, agreement.Proposal) (agentapi.Instances, error), services map[string]ServiceOptions) func(context.Context, agreement.Proposal) (agentapi.Instances, error) {
	if len(services) == 0 {
		return assign
	}
	return func(ctx context.Context, p agreement.Proposal) (agentapi.Instances, error) {
		instances, err := assign(ctx, p)
		for ref, inst := range instances {
			if so, ok := services[inst.ID]; ok && inst.Files == nil {
				inst.Files = so.Files
				instances[ref] = inst
			}
		}
		return instances, err
	}
}

// assignByContainer gives each service (container) of a proposal its
// instance, named after the container, or the service URL without one. The
// store checks that it is a safe file name.
func assignByContainer(_ context.Context, p agreement.Proposal) (agentapi.Instances, error) {
	instances := agentapi.Instances{}
	for _, ss := range p.Services {
		id := ss.Service.Container
		if id == "" {
			id = ss.Service.URL
		}
		instances[ss.Service] = agentapi.Instance{ID: id}
	}
	return instances, nil
}
