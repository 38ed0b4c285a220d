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

	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/relay"
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

// hubAgbot is the hub's agreement bot, the library's agbot front door
// (package agbot), the only party that reads the secret store. It serves
// the existence API deployers validate against, the identity API agents
// register with, and the relay the exchange passes messages through; when
// an agent publishes its certificate it verifies it and deploys the
// deployer's policy to the node through its delivery engine, which keeps
// the secrets current until the agreement ends.
type hubAgbot struct {
	*agbot.Agbot
	keys  *agreement.PrivateKeys
	state state.Backend
	api   *httptest.Server
	say   *narrator

	mu      sync.Mutex
	target  *binding.Target // what to deploy; nil until the deployer's policy is valid
	cancels map[string]bool
}

type agbotOptions struct {
	store    *secretstore.Store
	attest   func(context.Context, identity.AttestationRequest) (time.Time, error)
	resolver binding.Resolver // the exchange's service definitions
	// authenticate checks a deployer's credentials for the agbot's API.
	authenticate func(context.Context, secretsapi.Credentials) (secretsapi.Caller, error)
	// dir holds the agbot's delivery state file.
	dir    string
	say    *narrator
	logger *slog.Logger
}

func newAgbot(opts agbotOptions) (_ *hubAgbot, err error) {
	log := opts.logger.With("component", "agbot")
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	if err != nil {
		return nil, err
	}
	// The engine's durable memory: what each agent was sent and
	// acknowledged (store names and content tags, never values), and the
	// hub's identity records, in one crash-safe file.
	st, identities, err := boltstate.Open(filepath.Join(opts.dir, stateFile), boltstate.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, st.Close())
		}
	}()
	ca, err := identity.NewCA(identity.CAOptions{})
	if err != nil {
		return nil, err
	}
	a := &hubAgbot{keys: keys, state: st, say: opts.say, cancels: map[string]bool{}}
	a.Agbot, err = agbot.New(agbot.Options{
		Delivery: delivery.Options{
			Store:        opts.store,
			State:        st,
			Keys:         keys,
			OnCancel:     a.cancelled,
			Interval:     watchInterval,
			Grace:        delivery.NoGrace,
			ReplyTimeout: replyTimeout,
			InitialDelay: initialDelay,
			MaxDelay:     maxDelay,
		},
		Identities:   identities,
		CA:           ca,
		Attest:       opts.attest,
		Authenticate: opts.authenticate,
		Deploy:       a.deploy(opts.resolver),
		Resolver:     opts.resolver,
		Logger:       log,
	})
	if err != nil {
		return nil, err
	}
	a.api = httptest.NewServer(a.Handler())
	return a, nil
}

// deploy is the agbot's Deploy hook: the deployer's policy, once valid,
// goes to every node of the organisation whose agent's identity verified.
func (a *hubAgbot) deploy(resolver binding.Resolver) func(context.Context, relay.Node) (agbot.Deployment, bool) {
	return func(_ context.Context, n relay.Node) (agbot.Deployment, bool) {
		a.mu.Lock()
		target := a.target
		a.mu.Unlock()
		if target == nil || n.Org != org {
			return agbot.Deployment{}, false
		}
		a.say.sayf("agbot", "verified the certificate %s's agent published; deploys the policy to it as %s", n, agbot.AgreementID(n))
		return agbot.Deployment{Target: *target, Resolver: resolver}, true
	}
}

// deployPolicy makes target what the agbot deploys.
func (a *hubAgbot) deployPolicy(target binding.Target) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.target = &target
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

// waitInSync waits, at most waitTimeout, until the agent of an agreement
// acknowledged the desired content of every secret.
func (a *hubAgbot) waitInSync(ctx context.Context, agreementID string) (delivery.Status, error) {
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	st, err := a.Engine().Wait(wctx, agreementID)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		why := st.LastError
		if st.Rejection != "" {
			why = "the agent rejected it: " + st.Rejection
		}
		if why == "" && st.Reason != nil {
			why = st.Reason.Message
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

// cancelled is the engine's cancel hook: a bound secret was deleted or
// access to it revoked, confirmed in healthy cycles. The engine already
// sends the agent the cancellation until it is acknowledged; an agbot
// would end the agreement in the exchange here.
func (a *hubAgbot) cancelled(_ context.Context, agreementID string, c state.Cancellation) {
	a.mu.Lock()
	a.cancels[agreementID] = true
	a.mu.Unlock()
	a.say.sayf("agbot", "engine cancel hook: %s is %s, so %s is cancelled; the engine tells the agent", c.StoreName, c.Kind, agreementID)
}

// hooked reports whether the cancel hook was called for the agreement.
func (a *hubAgbot) hooked(agreementID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cancels[agreementID]
}

func (a *hubAgbot) close() error {
	a.api.Close()
	return a.state.Close()
}
