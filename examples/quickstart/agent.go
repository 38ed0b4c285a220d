package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// nodeAgent is the agent on the edge node. It never talks to the secret
// store: it holds agreement keys certified by the hub, opens what the
// agbot seals to them, keeps the secrets in root-only files mounted into
// the service's container, and serves the service the /secrets API.
type nodeAgent struct {
	instance  identity.Identity
	keys      *agreement.PrivateKeys
	identity  *identity.Agent
	agbotKeys *agreement.PublicKeys // pinned: only the agbot's envelopes are opened
	guard     agreement.ReplayGuard
	store     *agentapi.Store
	root      string // the store's root directory
	tokens    *agentapi.TokenTable
	api       *httptest.Server
	newToken  func() string
	say       *narrator
	log       *slog.Logger

	mu        sync.Mutex
	replySeq  map[string]uint64          // agreement id → last reply sequence
	instances map[string][]serviceAccess // agreement id → its running services
	ended     map[string]bool            // cancelled agreements
}

// serviceAccess is what the agent gives a service container it starts:
// its mount and its credentials for the /secrets API.
type serviceAccess struct {
	service    agreement.ServiceRef
	instanceID string
	token      string
	mount      string // bind-mounted read-only at agentapi.MountTarget
}

type nodeAgentOptions struct {
	instance  identity.Identity
	hub       *identity.Issuer // the hub's identity API, in process
	agbotKeys *agreement.PublicKeys
	root      string // the agent's secret storage
	newToken  func() string
	say       *narrator
	logger    *slog.Logger
}

func newNodeAgent(ctx context.Context, opts nodeAgentOptions) (_ *nodeAgent, err error) {
	log := opts.logger.With("component", "agent")
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	if err != nil {
		return nil, err
	}
	// The identity certificate carries the agreement keys: the signing key
	// as its public key, the HPKE key in an extension.
	ident, err := identity.NewAgent(identity.AgentOptions{
		Instance:      opts.instance,
		SigningKey:    keys.Signer(),
		EncryptionKey: keys.Public().EncryptionKey(),
		Issuer:        opts.hub,
		Lifetime:      time.Hour,
		Logger:        log,
	})
	if err != nil {
		return nil, err
	}
	store, err := agentapi.Open(ctx, agentapi.Options{Root: opts.root, StatusFiles: true, Logger: log})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, store.Close())
		}
	}()
	tokens := &agentapi.TokenTable{}
	handler, err := agentapi.NewHandler(store, agentapi.HandlerOptions{Authenticate: tokens.Authenticate, Logger: log})
	if err != nil {
		return nil, err
	}
	return &nodeAgent{
		instance:  opts.instance,
		keys:      keys,
		identity:  ident,
		agbotKeys: opts.agbotKeys,
		guard:     agreement.NewMemoryReplayGuard(),
		store:     store,
		root:      opts.root,
		tokens:    tokens,
		api:       httptest.NewServer(handler),
		newToken:  opts.newToken,
		say:       opts.say,
		log:       log,
		replySeq:  map[string]uint64{},
		instances: map[string][]serviceAccess{},
		ended:     map[string]bool{},
	}, nil
}

// registerAgent starts the agent and registers its identity with the hub,
// on the provider's attestation.
func (f *flow) registerAgent(ctx context.Context) (err error) {
	id := identity.Identity{Provider: f.provider.name, Org: org, Node: "node-1", InstanceID: "agent-1"}
	f.agent, err = newNodeAgent(ctx, nodeAgentOptions{
		instance:  id,
		hub:       f.issuer,
		agbotKeys: f.agbot.keys.Public(),
		root:      filepath.Join(f.workDir, "agent-secrets"),
		newToken:  f.value,
		say:       f.say,
		logger:    f.opts.Logger,
	})
	if err != nil {
		return err
	}
	f.exchange = &exchange{agent: f.agent, tap: f.opts.OnEnvelope, last: map[agreement.MessageType][]byte{}}

	cert, err := f.agent.identity.Register(ctx, f.provider.attestation(id.InstanceID, f.value()))
	if err != nil {
		return err
	}
	f.say.sayf("agent", "storage root %s (0700); registered as %s: certificate serial %x, expires %s, carries its %s key %s",
		f.agent.root, id, cert.SerialNumber, cert.NotAfter.Format("15:04"), f.agent.keys.Public().Suite(), f.agent.keys.Public().EncryptionKeyID())
	return nil
}

// propose is the agbot making the agreement with the registered agent.
func (f *flow) propose(ctx context.Context) error {
	agent := &agentContact{chain: f.agent.identity.CertificateChain(), endpoint: f.exchange}
	return f.agbot.propose(ctx, f.agreementID, f.agent.instance.Node, f.target, agent)
}

// Receive opens a sealed proposal or update (a cancellation is an update
// too) from the agbot, applies it,
// and returns the sealed reply. An envelope that does not open (forged,
// altered, replayed, not for this agent) is refused with an error and no
// reply: nothing in it can be trusted, not even whom to answer.
func (a *nodeAgent) Receive(ctx context.Context, envelope []byte) ([]byte, error) {
	h, err := agreement.PeekHeader(envelope, agreement.Options{})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	var applyErr error
	switch h.Type {
	case agreement.TypeProposal:
		var p agreement.Proposal
		h, p, err = agreement.Open[agreement.Proposal](ctx, a.keys, a.agbotKeys, envelope, a.guard, agreement.Options{})
		if err != nil {
			return nil, fmt.Errorf("agent: refused a proposal: %w", err)
		}
		applyErr = a.applyProposal(ctx, p)
	case agreement.TypeUpdate:
		var u agreement.Update
		h, u, err = agreement.Open[agreement.Update](ctx, a.keys, a.agbotKeys, envelope, a.guard, agreement.Options{})
		if err != nil {
			return nil, fmt.Errorf("agent: refused an update: %w", err)
		}
		if u.Kind == agreement.UpdateKindCancel {
			applyErr = a.cancel(ctx, u.AgreementID)
		} else {
			applyErr = a.applyUpdate(ctx, u)
		}
	default:
		return nil, fmt.Errorf("agent: refused a %s message: not one the agbot sends", h.Type)
	}
	if applyErr != nil {
		a.log.Error("could not apply agreement message", "agreement", h.AgreementID, "type", string(h.Type), "err", applyErr.Error())
	}

	// agentapi.Reply says why a rejected message was at fault, or gives a
	// generic reason for a local failure (whose details are in our log).
	r := agentapi.Reply(h.AgreementID, applyErr)
	reply := agreement.NewReply(h, r.Accepted, r.Reason)
	a.mu.Lock()
	a.replySeq[h.AgreementID]++
	seq := a.replySeq[h.AgreementID]
	a.mu.Unlock()
	return agreement.Seal(a.keys, a.agbotKeys, reply, agreement.Header{Sequence: seq}, agreement.Options{})
}

// applyProposal writes the proposal's secrets: each service (container)
// becomes an instance with its own directory and credentials.
func (a *nodeAgent) applyProposal(ctx context.Context, p agreement.Proposal) error {
	instances := agentapi.Instances{}
	var started []serviceAccess
	for _, ss := range p.Services {
		id := instanceID(p.AgreementID, ss.Service)
		if err := agreement.CheckSecretName(id); err != nil {
			return err
		}
		instances[ss.Service] = agentapi.Instance{ID: id}
		started = append(started, serviceAccess{service: ss.Service, instanceID: id, token: a.newToken()})
	}
	changes, err := a.store.ApplyProposal(ctx, p, instances)
	if err != nil {
		return err
	}
	for i := range started {
		s := &started[i]
		info, ok := a.store.Instance(s.instanceID)
		if !ok {
			return fmt.Errorf("no instance %s", s.instanceID)
		}
		s.mount = info.MountSource
		if err := a.tokens.Set(s.instanceID, s.token); err != nil {
			return err
		}
		a.say.sayf("agent", "opened the proposal of %s: wrote %s for instance %s; it is mounted at %s",
			p.AgreementID, strings.Join(changes[s.instanceID], ", "), s.instanceID, agentapi.MountTarget)
	}
	a.mu.Lock()
	a.instances[p.AgreementID] = started
	a.mu.Unlock()
	return nil
}

// applyUpdate rewrites the files whose secrets changed.
func (a *nodeAgent) applyUpdate(ctx context.Context, u agreement.Update) error {
	changes, err := a.store.ApplyUpdate(ctx, u)
	if err != nil {
		return err
	}
	for id, names := range changes {
		a.say.sayf("agent", "opened the update of %s: rewrote %s for instance %s; GET /secrets now lists it",
			u.AgreementID, strings.Join(names, ", "), id)
	}
	return nil
}

// instanceID names the instance that runs one service (container) of an
// agreement. An Open Horizon agent would use its container instance key.
func instanceID(agreementID string, svc agreement.ServiceRef) string {
	name := svc.Container
	if name == "" {
		name = "service"
	}
	return agreementID + "-" + name
}

// cancel ends an agreement: the services' files are overwritten with
// random bytes, synced and deleted, and their credentials dropped. The
// replay guard keeps the agreement's sequences, so a replayed proposal
// cannot bring the secrets back.
func (a *nodeAgent) cancel(ctx context.Context, agreementID string) error {
	removed, err := a.store.RemoveAgreement(ctx, agreementID)
	a.mu.Lock()
	for _, s := range a.instances[agreementID] {
		a.tokens.Delete(s.instanceID)
	}
	delete(a.instances, agreementID)
	a.ended[agreementID] = err == nil
	a.mu.Unlock()
	if err != nil {
		return err
	}
	a.say.sayf("agent", "%s cancelled: removed instance %s (files overwritten with random bytes, synced, deleted)",
		agreementID, strings.Join(removed, ", "))
	return nil
}

// cancelled reports whether the agreement was cancelled and its files
// removed.
func (a *nodeAgent) cancelled(agreementID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ended[agreementID]
}

// access returns how the agreement's one service reaches its secrets.
func (a *nodeAgent) access(agreementID string) (serviceAccess, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.instances[agreementID]; len(s) == 1 {
		return s[0], nil
	}
	return serviceAccess{}, fmt.Errorf("agent: agreement %s runs %d services, want 1", agreementID, len(a.instances[agreementID]))
}

func (a *nodeAgent) close() error {
	a.api.Close()
	return a.store.Close()
}
