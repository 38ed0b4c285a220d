package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agent"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// pollInterval is how often the demo's agent polls the exchange for
// messages; a real agent polls every second or so.
const pollInterval = 100 * time.Millisecond

// nodeAgent is the agent on the edge node, the library's agent front door
// (package agent). It never talks to the secret store: it registers an
// identity certificate carrying its agreement keys, opens what the agbot
// seals to them, keeps the secrets in root-only files mounted into the
// service's container, and serves the service the /secrets API.
type nodeAgent struct {
	*agent.Agent
	instance identity.Identity
	keys     *agreement.PublicKeys
	root     string // the on-node store's root directory
	api      *httptest.Server
	say      *narrator

	mu        sync.Mutex
	instances map[string]serviceAccess // by agreement id, its running service
	ended     map[string]bool          // cancelled agreements
	outcomes  chan outcome             // what became of each message
}

// serviceAccess is what the agent gives a service container it starts:
// its mount and its credentials for the /secrets API.
type serviceAccess struct {
	instanceID string
	token      string
	mount      string // bind-mounted read-only at agentapi.MountTarget
}

type nodeAgentOptions struct {
	instance  identity.Identity
	attest    func(context.Context) (identity.Attestation, error)
	exchange  string                // the exchange's URL, in front of the agbot
	agbotKeys *agreement.PublicKeys // pinned: only the agbot's envelopes are opened
	root      string                // the agent's secret storage
	say       *narrator
	logger    *slog.Logger
}

func newNodeAgent(ctx context.Context, opts nodeAgentOptions) (_ *nodeAgent, err error) {
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	if err != nil {
		return nil, err
	}
	a := &nodeAgent{instance: opts.instance, keys: keys.Public(), root: opts.root, say: opts.say,
		instances: map[string]serviceAccess{}, ended: map[string]bool{}, outcomes: make(chan outcome, 64)}
	a.Agent, err = agent.New(ctx, agent.Options{
		Instance:     opts.instance,
		Keys:         keys,
		Agbot:        opts.agbotKeys,
		Agbots:       []string{opts.exchange},
		Attest:       opts.attest,
		Files:        agentapi.Options{Root: opts.root, StatusFiles: true},
		OnInstance:   a.started,
		OnMessage:    a.received,
		PollInterval: pollInterval,
		Logger:       opts.logger.With("component", "agent"),
	})
	if err != nil {
		return nil, err
	}
	a.api = httptest.NewServer(a.Handler())
	return a, nil
}

// started is the agent's instance hook: the service (container) of a
// proposal got its files and its token.
func (a *nodeAgent) started(_ context.Context, inst agent.Instance) error {
	info, ok := a.Files().Instance(inst.ID)
	if !ok {
		return fmt.Errorf("no instance %s", inst.ID)
	}
	a.mu.Lock()
	a.instances[info.AgreementID] = serviceAccess{instanceID: inst.ID, token: string(inst.Token), mount: inst.Mount}
	a.mu.Unlock()
	return nil
}

// outcome is what became of one message: what the agent did, or why it
// did not open.
type outcome struct {
	got agentapi.Received
	err error
}

// received is the agent's message hook: it narrates what each message
// did, or why it did not open.
func (a *nodeAgent) received(_ context.Context, got agentapi.Received, err error) {
	select {
	case a.outcomes <- outcome{got, err}:
	default: // nobody waits for them
	}
	h := got.Header
	switch {
	case err != nil:
	case got.Err != nil:
		a.say.sayf("agent", "rejected the %s of %s: %v", h.Type, h.AgreementID, got.Err)
	case got.Kind == agreement.UpdateKindCancel:
		a.mu.Lock()
		a.ended[h.AgreementID] = true
		delete(a.instances, h.AgreementID)
		a.mu.Unlock()
		a.say.sayf("agent", "%s cancelled: removed instance %s (files overwritten with random bytes, synced, deleted)",
			h.AgreementID, strings.Join(got.Removed, ", "))
	case h.Type == agreement.TypeProposal:
		for id, names := range got.Changes {
			a.say.sayf("agent", "opened the proposal of %s: wrote %s for instance %s; it is mounted at %s",
				h.AgreementID, strings.Join(names, ", "), id, agentapi.MountTarget)
		}
	default:
		for id, names := range got.Changes {
			a.say.sayf("agent", "opened the update of %s: rewrote %s for instance %s; GET /secrets now lists it",
				h.AgreementID, strings.Join(names, ", "), id)
		}
	}
}

// forgetOutcomes drops the outcomes of the messages handled so far.
func (a *nodeAgent) forgetOutcomes() {
	for {
		select {
		case <-a.outcomes:
		default:
			return
		}
	}
}

// nextOutcome waits for what becomes of the next message the agent takes.
func (a *nodeAgent) nextOutcome(ctx context.Context) (agentapi.Received, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	select {
	case o := <-a.outcomes:
		return o.got, o.err
	case <-ctx.Done():
		return agentapi.Received{}, errors.New("the agent took no message")
	}
}

// cancelled reports whether the agreement was cancelled and its files
// removed.
func (a *nodeAgent) cancelled(agreementID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ended[agreementID]
}

// access returns how the agreement's service reaches its secrets.
func (a *nodeAgent) access(agreementID string) (serviceAccess, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.instances[agreementID]
	if !ok {
		return serviceAccess{}, fmt.Errorf("agent: agreement %s runs no service", agreementID)
	}
	return s, nil
}

func (a *nodeAgent) close() error {
	a.api.Close()
	return a.Close()
}

// nodeName is the node the agent runs on.
const nodeName = "node-1"

// registerAgent starts the agent: it registers its identity with the hub,
// on an attestation document the provider hands it, and publishes its
// certificate through the exchange on the agbot's relay.
func (f *flow) registerAgent(ctx context.Context) (err error) {
	id := identity.Identity{Provider: f.provider.name, Org: org, Node: nodeName, InstanceID: "agent-1"}
	f.agent, err = newNodeAgent(ctx, nodeAgentOptions{
		instance: id,
		attest: func(context.Context) (identity.Attestation, error) {
			return f.provider.attestation(id.InstanceID, f.value()), nil
		},
		exchange:  f.exchange.srv.URL,
		agbotKeys: f.pinned(),
		root:      filepath.Join(f.workDir, "agent-secrets"),
		say:       f.say,
		logger:    f.opts.Logger,
	})
	if err != nil {
		return err
	}
	f.goBackground("agent", f.agent.Run)
	var cert *x509.Certificate
	if err := waitFor(ctx, "the agent's certificate on the agbot's relay", func() (bool, error) {
		cert = f.exchange.certificate()
		return cert != nil, nil
	}); err != nil {
		return err
	}
	f.say.sayf("agent", "storage root %s (0700); registered as %s: certificate serial %x, expires %s, carries its %s key %s; publishes it on the agbot's relay",
		f.agent.root, id, cert.SerialNumber, cert.NotAfter.Format("2006-01-02 15:04"), f.agent.keys.Suite(), f.agent.keys.EncryptionKeyID())
	f.exchange.release()
	return nil
}

// awaitAgreement is the agbot deploying the policy to the agent's node:
// it verified the certificate, validated the policy against the store for
// the node, and registered the agreement with its engine, which seals the
// proposal to the certified key and sends it until the agent accepts.
func (f *flow) awaitAgreement(ctx context.Context) error {
	if err := waitFor(ctx, "the agbot to register the agreement", func() (bool, error) {
		_, err := f.agbot.Engine().Status(ctx, f.agreementID)
		return err == nil, nil
	}); err != nil {
		return err
	}
	st, err := f.agbot.waitInSync(ctx, f.agreementID)
	if err != nil {
		return err
	}
	f.say.sayf("agbot", "the agent accepted %s; it holds %s", f.agreementID, slotsNote(st))
	return nil
}
