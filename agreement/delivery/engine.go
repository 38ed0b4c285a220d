package delivery

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/ctxtime"
	"github.com/edgesecrets/edgesecrets/internal/storereader"
	"github.com/edgesecrets/edgesecrets/internal/storewatch"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// NoGrace, as Options.Grace, cancels a revoked agreement as soon as the
// revocation is seen in a healthy cycle. The zero Grace means 5 minutes.
const NoGrace time.Duration = -1

// Defaults of Options; the doc comment of each field states its value.
const (
	defaultInterval      = time.Minute
	defaultResyncPeriod  = 5 * time.Minute
	defaultGrace         = 5 * time.Minute
	defaultReplyTimeout  = time.Minute
	defaultInitialDelay  = time.Second
	defaultMaxDelay      = 5 * time.Minute
	defaultDivergedAfter = 15 * time.Minute
	defaultBudgetCount   = 10
	defaultBudgetPercent = 5
	defaultSenders       = 256
)

// Agents gives the engine the keys of the agent on a node.
type Agents interface {
	// Keys returns the public keys of the agent on node, from its verified
	// identity certificate. It must fail for an identity that is revoked
	// or expired: the engine never seals to one. When the keys differ
	// from those an agreement's proposal was accepted with, the node has a
	// new agent that knows nothing of the agreement, and the engine
	// proposes it again.
	Keys(ctx context.Context, node string) (*agreement.PublicKeys, error)
}

// Message is one sealed envelope for an agent.
type Message struct {
	// Node is the agreement's node, as registered.
	Node string
	// AgreementID is the agreement the envelope belongs to.
	AgreementID string
	// Envelope is sealed to the agent's keys: it can travel any link.
	Envelope []byte
}

// Transport carries envelopes to agents.
type Transport interface {
	// Send hands m to the agent. It returns the agent's sealed reply when
	// the link is synchronous, or nil when the reply will come later
	// through Engine.HandleReply. An error means the envelope was not
	// sent; the engine tries again after a backoff.
	Send(ctx context.Context, m Message) (reply []byte, err error)
}

// Agreement is an agreement to register: its bindings already resolved to
// store names for its node (binding.Report.Bindings).
type Agreement struct {
	ID       string
	Node     string
	Services []binding.ServiceBinding
}

// Budget bounds how many agreements one watcher cycle may cancel. Beyond
// it, the cycle's cancellations are held (Status.Held, Health.Held) until
// Engine.ReleaseHeld, or until the secrets come back. The zero Budget
// means 10 cancellations or 5 percent of the registered agreements,
// whichever is larger.
type Budget struct {
	// Count is the number of cancellations a cycle may always make.
	Count int
	// Percent of the registered agreements a cycle may cancel, when that
	// is more than Count.
	Percent float64
}

// Options configure an Engine. Store, State, Keys, Agents and Transport
// are required.
type Options struct {
	// Store is the agbot's secret store: the engine watches the bound
	// names in it, reads the values it seals when each message is sent
	// (coalescing reads of one value), and reports its last success in
	// Health (Store.LastSuccess counts every caller's calls).
	Store *secretstore.Store
	// State keeps the engine's records; see package state.
	State state.Backend
	// Keys are the agbot's: messages are signed with them and replies
	// sealed to them.
	Keys *agreement.PrivateKeys
	// Agents gives the agents' verified keys.
	Agents Agents
	// Transport carries the envelopes.
	Transport Transport

	// OnCancel is called once for each cancellation the engine decides (a
	// bound secret revoked: deleted or forbidden, confirmed as described
	// in the package documentation). The engine already tells the agent;
	// the hook is for the embedder's own bookkeeping (ending the agreement
	// in the exchange, redeploying when the secret returns). Called at
	// least once per decision: a crash between the decision and the
	// hook's return calls it again after the restart.
	OnCancel func(ctx context.Context, agreementID string, c state.Cancellation)
	// OnReady is called once when every secret a deployment waits for
	// (Engine.WaitForSecrets) exists.
	OnReady func(ctx context.Context, deploymentID string)

	// Interval is the watcher's polling interval; zero means 1 minute.
	Interval time.Duration
	// ResyncPeriod is how long the anti-entropy review takes to go
	// through every agreement once, a slice each Interval (at least 256
	// agreements a cycle), finding work a crash or a lost mark left
	// undone and recounting Health; zero means 5 minutes. Changes of
	// store secrets and revocations do not wait for it: they reach the
	// agreements bound to the secret in the cycle that sees them. On a
	// State shared by several engines that implements
	// state.SharedReview, the members split one pass between them; each
	// one's Health then counts its share.
	ResyncPeriod time.Duration
	// Grace is how long a revocation must last, seen in healthy cycles,
	// before it cancels; zero means 5 minutes, NoGrace none.
	Grace time.Duration
	// Budget bounds the cancellations of one cycle.
	Budget Budget
	// ReplyTimeout is how long the engine waits for an answer before it
	// sends again; zero means 1 minute.
	ReplyTimeout time.Duration
	// InitialDelay and MaxDelay bound the backoff between attempts; zero
	// means 1 second and 5 minutes. The backoff is capped, never
	// exhausted.
	InitialDelay, MaxDelay time.Duration
	// DivergedAfter is how long an agent may go without answering before
	// its agreements are reported diverged; zero means 15 minutes.
	DivergedAfter time.Duration
	// Workers bounds the agreements being prepared at once: their values
	// read and their messages sealed; zero means 4 × GOMAXPROCS.
	Workers int
	// Senders bounds the Transport.Send calls running at once, so that
	// agents slow to answer a synchronous transport do not hold up the
	// others; zero means 256.
	Senders int
	// Member is this engine's id in a shared State; empty means a random
	// one.
	Member string
	// EnvelopeOptions are passed to the seal and open calls, for example
	// AllowedSuites.
	EnvelopeOptions agreement.Options
	// MeterProvider gives the engine's OpenTelemetry instruments (the
	// README's "Metrics" lists them); nil: the global provider, a no-op
	// until the embedder installs one.
	MeterProvider metric.MeterProvider
	// Logger receives what the engine does, naming agreements, nodes and
	// store names, never values. Nil discards.
	Logger *slog.Logger
}

// Status is where one agreement stands.
type Status struct {
	ID    string
	Node  string
	Phase state.Phase
	// InSync is true when the agent acknowledged the desired content of
	// every slot (for PhaseActive).
	InSync bool
	// Slots give desired and acknowledged content per service secret.
	Slots []state.Slot
	// Services are the agreement's bindings, each secret with its
	// candidate store names.
	Services []binding.ServiceBinding
	// Waiting says why nothing is sent now, if so: the store unavailable,
	// a bound secret missing, a cancellation held.
	Waiting string
	// Reason is why the engine cannot deliver the agreement, or part of
	// it, now: a code (ReasonAgentUnverified, ReasonFormatUnrenderable, …)
	// and a message; nil when nothing holds it back. In a shared State it
	// is known to the member that last worked on the agreement (others
	// show LastError), except ReasonAgentRejected, which the record keeps.
	Reason *Reason
	// Diverged: the agent has not answered for longer than
	// Options.DivergedAfter. The engine keeps trying.
	Diverged bool
	// Held is a cancellation decided but held by the budget.
	Held *state.Cancellation
	// Cancel is set while the agreement is being cancelled.
	Cancel      *state.Cancellation
	Attempts    int
	NextAttempt time.Time
	LastError   string
	Rejection   string
	LastReply   time.Time
}

// Health is the engine's overall state, for an agbot's /health.
type Health struct {
	// LastStoreSuccess is the last successful interaction with the store
	// (anax's lastVaultInteraction).
	LastStoreSuccess time.Time
	// StoreProblem says why the store is not healthy (an outage, the
	// agbot's own credentials rejected); empty when it is.
	StoreProblem string
	// StateProblem says why the state is not usable (a database down):
	// the engine delivers nothing until it is back.
	StateProblem string
	// LastStateSuccess is the engine's last successful call of the state
	// (anax's lastDBHeartbeat).
	LastStateSuccess time.Time
	// Agreements counts the registered agreements, Pending those not in
	// sync, Diverged those whose agents stopped answering, Held the
	// cancellations held by the budget, as the last full pass of the
	// review (Options.ResyncPeriod) counted them.
	Agreements, Pending, Diverged, Held int
	// Reasons counts, per reason code, the agreements this engine found
	// it cannot deliver now (Status.Reason), with an example of each; nil
	// when none.
	Reasons []ReasonCount
	// Conditions counts the agreements this engine knows by condition
	// (and reason, when waiting), as it keeps them while it works:
	// Engine.Agreements lists them. Conditions with no agreements are
	// left out.
	Conditions []ConditionCount
}

// Engine is the agbot's delivery engine; see the package documentation.
// Create one with New, start it with Run, and register agreements with
// Register. Its methods are safe for concurrent use, also before Run
// starts and after it returns: what they record is acted on while Run
// runs.
type Engine struct {
	cfg       settings
	state     state.Backend // the embedder's, each call noted for Health (notedState)
	store     *secretstore.Store
	reader    *storereader.Reader
	watcher   *storewatch.Watcher
	keys      *agreement.PrivateKeys
	agents    Agents
	transport Transport
	log       *slog.Logger

	running atomic.Bool
	epoch   atomic.Uint64
	epochMu sync.Mutex // one state.Backend.NewEpoch at a time

	wake     chan struct{} // the reconcile loop has work now
	cycleNow chan struct{} // run a watcher cycle now (benchmarks)

	// absent is the watcher's current view of the names it found missing
	// or forbidden (its Initial and transition events), owned by the
	// watcher cycle.
	absent map[string]state.ObservedState
	// absentSeen are the names the last cycle found missing or forbidden
	// in a healthy poll, and cycleEnded when it ended, both owned by the
	// watcher cycle: an absence that cycle and the next both see, with no
	// gap longer than about an interval between them, lasted in between as
	// far as polling can tell.
	absentSeen map[string]bool
	cycleEnded time.Time
	// synced are the names the state bound when syncNames last brought
	// the watcher in step with them and no deployment waited, owned by
	// the watcher cycle: a cycle that reads the same names changes
	// nothing.
	synced []string
	// owned are the names state.Backend.Names gave this member when syncNames
	// last read them: the names it polls for the state.
	owned atomic.Pointer[map[string]bool]
	// ownedJoins is the member's join count when owned was read, owned by
	// the watcher cycle.
	ownedJoins uint64
	// review is the anti-entropy cursor, owned by the watcher cycle.
	review review

	// member is the engine's membership of a shared State: it delivers
	// only while its lease is proven.
	member member

	// deploys are the deployments Deploy could not decide yet, by
	// agreement id, tried again each cycle; deployGen numbers the calls
	// of Deploy.
	deploysMu sync.Mutex
	deploys   map[string]pendingDeploy
	deployGen uint64

	mu      sync.Mutex
	reasons map[string]reasonEntry // by agreement id: why it is held back (noteReason)
	// credProblem: the store's problem is the agbot's own credentials or
	// access (a metric's component).
	credProblem bool

	conds    *conditions // every known agreement's condition
	inst     *instruments
	changed  chan struct{} // closed and replaced whenever a record changes
	health   Health        // counts of the last review pass, store problem of the last cycle
	stateErr error         // the last State failure; nil once a call succeeded
}

// New returns an Engine, or an error naming every missing or invalid
// option.
func New(opts Options) (*Engine, error) {
	cfg, err := opts.check()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Member == "" {
		cfg.Member = "engine-" + rand.Text()[:12]
	}
	// The watcher reads the store itself, never through the reader's
	// cache, which would hide fresh data from its checksum fallback.
	watcher, err := storewatch.New(opts.Store, storewatch.Options{
		Interval: cfg.Interval,
		Logger:   log,
	})
	if err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	e := &Engine{
		cfg:       cfg,
		store:     opts.Store,
		reader:    storereader.New(opts.Store, storereader.Options{TTL: min(valueTTL, cfg.Interval/2)}),
		watcher:   watcher,
		keys:      opts.Keys,
		agents:    opts.Agents,
		transport: opts.Transport,
		log:       log,
		wake:      make(chan struct{}, 1),
		cycleNow:  make(chan struct{}, 1),
		absent:    map[string]state.ObservedState{},
		deploys:   map[string]pendingDeploy{},
		reasons:   map[string]reasonEntry{},
		changed:   make(chan struct{}),
		conds:     newConditions(),
	}
	// Every call of the state is noted for Health; membership is kept on
	// the embedder's State (see notedState).
	e.state = newNotedState(opts.State, e)
	if e.inst, err = newInstruments(opts.MeterProvider, e); err != nil {
		return nil, err
	}
	if m, ok := opts.State.(state.Membership); ok {
		e.member.m = m
	}
	return e, nil
}

// valueTTL bounds how long a value read for one message serves the next
// ones: long enough that a rotation fanned out to many agreements reads
// the store once, short enough to matter little, since every value is
// checked against the content tag observed before it is sent.
const valueTTL = 10 * time.Second

// Run runs the watcher cycles and the reconcile loop until ctx ends, then
// waits for the messages being sent and returns ctx's error. State and
// store failures never end it: they are retried and reported by Health.
// Only one Run may be active at a time.
func (e *Engine) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("delivery: Run is already active")
	}
	defer e.running.Store(false)

	var wg sync.WaitGroup
	if e.member.m != nil {
		// A shared State: nothing that names this member before it joined.
		mctx, stop := context.WithCancel(ctx)
		defer func() { stop(); wg.Wait() }()
		wg.Go(func() { e.keepMembership(mctx) })
		if !e.awaitMembership(ctx) {
			return ctx.Err()
		}
	}
	// Every message of this run gets a sequence above every message of
	// earlier runs, also those sent by a run that crashed.
	if err := e.renewEpoch(ctx); err != nil {
		return err
	}
	e.log.Info("delivery engine running", slog.String("member", e.cfg.Member), slog.Uint64("epoch", e.epoch.Load()))
	// Cancellations decided before a crash whose hook had not returned:
	// call it before their agents acknowledge them and the records go.
	e.notifyPending(ctx)

	sends := &sync.WaitGroup{}
	outcomes := make(chan outcome, e.cfg.senders)
	wg.Go(func() { e.watchLoop(ctx) })
	wg.Go(func() {
		e.reconcileLoop(ctx, sends, outcomes)
		sends.Wait()
		close(outcomes)
	})
	wg.Go(func() { e.commitLoop(ctx, outcomes) })
	wg.Wait()
	return ctx.Err()
}

// awaitMembership waits until the engine has joined its shared State, and
// reports whether it did before ctx ended.
func (e *Engine) awaitMembership(ctx context.Context) bool {
	for !e.member.entitled() {
		if !ctxtime.Sleep(ctx, 50*time.Millisecond) {
			return false
		}
	}
	return true
}

// renewEpoch takes a new epoch from the state, retrying until it answers
// or ctx ends.
func (e *Engine) renewEpoch(ctx context.Context) error {
	e.epochMu.Lock()
	defer e.epochMu.Unlock()
	for attempt := 1; ; attempt++ {
		epoch, err := e.state.NewEpoch(ctx)
		if err == nil {
			e.epoch.Store(epoch)
			return nil
		}
		e.log.Error("could not take a sequence epoch from the state; retrying", slog.String("err", err.Error()))
		if !ctxtime.Sleep(ctx, e.backoff(attempt)) {
			return ctx.Err()
		}
	}
}

// notify wakes the reconcile loop.
func (e *Engine) notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// changedNow tells the waiters of Wait that records changed.
func (e *Engine) changedNow() {
	e.mu.Lock()
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// changes returns a channel closed at the next change.
func (e *Engine) changes() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// noteState records the outcome of a State call for Health.
func (e *Engine) noteState(err error) {
	switch {
	case errors.Is(err, state.ErrLeaseLost) && e.member.m != nil:
		// Every lease of this member is void: stop at once rather than
		// at the next heartbeat, which joins again.
		e.member.set(time.Time{}, "membership of the shared state lost: "+err.Error())
		return
	case errors.Is(err, state.ErrLeaseLost):
		// A shared State the engine cannot join (a wrapper hid its
		// Membership): its calls keep failing so until the embedder
		// passes the State itself, whatever other calls succeed.
		e.member.set(time.Time{}, "the State refuses this engine as a member ("+err.Error()+
			"), but it does not implement state.Membership, so the engine never joins it: a wrapper around a shared State must keep its Membership and SharedReview methods")
		return
	case err != nil && !errors.Is(err, state.ErrStateUnavailable):
		return // conflicts and not-found are answers
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stateErr = err
	if err == nil {
		e.health.LastStateSuccess = time.Now()
	}
}

// backoff returns the wait after the attempts-th attempt that did not
// succeed: InitialDelay doubling up to MaxDelay, less up to a tenth of
// jitter so that agreements that failed together spread out. It never
// gives up: the wait only stops growing.
func (e *Engine) backoff(attempts int) time.Duration {
	d := e.cfg.InitialDelay
	for i := 1; i < attempts && d < e.cfg.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, e.cfg.MaxDelay)
	if d >= 10 {
		d -= mathrand.N(d / 10)
	}
	return d
}
