package delivery

import (
	"context"
	"log/slog"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// NoGrace, as Options.Grace, cancels a revoked agreement as soon as the
// revocation is seen in a healthy cycle. The zero Grace means
// DefaultGrace.
const NoGrace time.Duration = -1

// Defaults of Options.
const (
	DefaultInterval      = time.Minute
	DefaultGrace         = 5 * time.Minute
	DefaultReplyTimeout  = time.Minute
	DefaultInitialDelay  = time.Second
	DefaultMaxDelay      = 5 * time.Minute
	DefaultDivergedAfter = 15 * time.Minute
	DefaultBudgetCount   = 10
	DefaultBudgetPercent = 5
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
// means DefaultBudgetCount or DefaultBudgetPercent of the registered
// agreements, whichever is larger.
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
	// Store is the agbot's secret store. The engine wraps it itself: a
	// monitor (Health), a watcher over the bound names, and a coalescing
	// reader for the values it seals, read when each message is sent.
	Store secretstore.Store
	// State keeps the engine's records; see State.
	State State
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
	OnCancel func(ctx context.Context, agreementID string, c Cancellation)
	// OnReady is called once when every secret a deployment waits for
	// (Engine.WaitForSecrets) exists.
	OnReady func(ctx context.Context, deploymentID string)

	// Interval is the watcher's polling interval; zero means
	// DefaultInterval.
	Interval time.Duration
	// Grace is how long a revocation must last, seen in healthy cycles,
	// before it cancels; zero means DefaultGrace, NoGrace none.
	Grace time.Duration
	// Budget bounds the cancellations of one cycle.
	Budget Budget
	// ReplyTimeout is how long the engine waits for an answer before it
	// sends again; zero means DefaultReplyTimeout.
	ReplyTimeout time.Duration
	// InitialDelay and MaxDelay bound the backoff between attempts; zero
	// means the defaults. The backoff is capped, never exhausted.
	InitialDelay, MaxDelay time.Duration
	// DivergedAfter is how long an agent may go without answering before
	// its agreements are reported diverged; zero means the default.
	DivergedAfter time.Duration
	// Workers bounds the messages being sealed and sent at once; zero
	// means 4 × GOMAXPROCS.
	Workers int
	// Member is this engine's id in a shared State; empty means a random
	// one.
	Member string
	// EnvelopeOptions are passed to the seal and open calls, for example
	// agreement.WithAllowedSuites.
	EnvelopeOptions []agreement.Option
	// Logger receives what the engine does, naming agreements, nodes and
	// store names, never values. Nil discards.
	Logger *slog.Logger
}

// Status is where one agreement stands.
type Status struct {
	ID    string
	Node  string
	Phase Phase
	// InSync is true when the agent acknowledged the desired content of
	// every slot (for PhaseActive).
	InSync bool
	// Slots give desired and acknowledged content per service secret.
	Slots []Slot
	// Waiting says why nothing is sent now, if so: the store unavailable,
	// a bound secret missing, a cancellation held.
	Waiting string
	// Diverged: the agent has not answered for longer than
	// Options.DivergedAfter. The engine keeps trying.
	Diverged bool
	// Held is a cancellation decided but held by the budget.
	Held *Cancellation
	// Cancel is set while the agreement is being cancelled.
	Cancel      *Cancellation
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
	// Agreements counts the registered agreements, Pending those not in
	// sync, Diverged those whose agents stopped answering, Held the
	// cancellations held by the budget.
	Agreements, Pending, Diverged, Held int
}
