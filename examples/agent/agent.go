package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/relay"
)

// agent handles the agbot's messages for one node.
type agent struct {
	log       *slog.Logger
	node      relay.Node
	upstreams []*upstream
	store     *agentapi.Store
	tokens    *agentapi.TokenTable // the store's: removing an instance revokes its token
	receiver  *agentapi.Receiver
	envDir    string
	apiURL    string
}

// upstream is one agbot the agent takes messages from: its relay, and the
// agent's identity, whose certificate it publishes there. Agbots that share
// a PostgreSQL state share the identity records too (and the hub CA and
// the agreement keys the agent pins): the agent registers once, through
// whichever of them it reaches, and every upstream has the same identity.
type upstream struct {
	url      string
	relay    *relay.Client
	identity *identity.Agent

	// Used by poll only.
	published []byte // the certificate chain (PEM) last published on the relay
	refused   []byte // the chain the agbot refused as a lost identity: not published again
	after     uint64 // the id of the last relay message handled
}

// agentOptions are what newAgent needs besides the store.
type agentOptions struct {
	log       *slog.Logger
	keys      *agreement.PrivateKeys
	agbotKeys *agreement.PublicKeys // pinned: the only sender accepted
	node      relay.Node
	upstreams []*upstream
	envDir    string
}

// newAgent wires an agent to its store: the library's Receiver opens,
// checks (replay floor kept in the store) and applies each message and
// seals the reply; the agent assigns instances and hands each its
// environment file.
func newAgent(store *agentapi.Store, tokens *agentapi.TokenTable, o agentOptions) (*agent, error) {
	a := &agent{log: o.log, node: o.node, upstreams: o.upstreams, store: store, tokens: tokens, envDir: o.envDir}
	var err error
	a.receiver, err = agentapi.NewReceiver(store, agentapi.ReceiverOptions{
		Keys: o.keys, Agbot: o.agbotKeys, Assign: assign, Provision: a.provisionAll, Logger: o.log,
	})
	return a, err
}

// serveAPI serves the services' secrets API on hardened servers
// (timeouts, size limits, a connection bound): the design profile on
// loopback (demo.Listen), or Open Horizon's profile over HTTPS on a unix
// socket and loopback (demo.ListenESS), as Open Horizon's agent serves its
// ESS API. It returns the API's URL and how to shut it down.
func (a *agent) serveAPI(c config, openHorizon bool) (string, func() error, error) {
	h, err := agentapi.NewHandler(a.store, agentapi.HandlerOptions{OpenHorizon: openHorizon, Authenticate: a.tokens.Authenticate, Logger: a.log})
	if err != nil {
		return "", nil, err
	}
	if !openHorizon {
		srv, err := demo.Listen(c.listen, c.addrFile, h, a.log)
		if err != nil {
			return "", nil, err
		}
		a.apiURL = srv.URL
		return srv.URL, srv.Shutdown, nil
	}
	dir := filepath.Join(c.dir, "ess")
	if c.essSocket == "" {
		c.essSocket = filepath.Join(dir, demo.ESSSocketFile)
	}
	ess, err := demo.ListenESS(demo.ESSOptions{Addr: c.listen, AddrFile: c.addrFile, Socket: c.essSocket, Dir: dir, Handler: h, Logger: a.log})
	if err != nil {
		return "", nil, err
	}
	a.log.Info("ESS endpoint", slog.String("socket", ess.Socket), slog.String("cert", ess.CertFile))
	a.apiURL = ess.URL
	return ess.URL, ess.Shutdown, nil
}

// poll publishes the current certificate on each agbot's relay when it
// changed and handles the relays' messages, every interval until ctx ends.
func (a *agent) poll(ctx context.Context, interval time.Duration) {
	for {
		for _, up := range a.upstreams {
			a.pollOne(ctx, up)
		}
		if !demo.Sleep(ctx, interval) {
			return
		}
	}
}

// pollOne publishes the certificate on one agbot's relay if needed and
// handles the messages waiting there.
func (a *agent) pollOne(ctx context.Context, up *upstream) {
	log := a.log
	if len(a.upstreams) > 1 {
		log = log.With(slog.String("agbot", up.url))
	}
	chain := up.identity.CertificateChain()
	if chain == nil {
		return // not registered with this agbot (yet)
	}
	if !bytes.Equal(chain, up.published) && !bytes.Equal(chain, up.refused) {
		err := up.relay.PublishCertificate(ctx, a.node, chain)
		switch {
		case err == nil:
			up.published, up.refused = chain, nil
			log.Info("certificate published on the relay")
		case up.identity.Refused(err):
			// The agbot does not know the identity (any more), or it is
			// revoked or expired: the identity Agent registers again
			// (and says so); the new certificate is published then.
			up.refused = chain
			log.Info("the agbot refused the certificate as a lost identity; publishing again once registered again", slog.String("err", err.Error()))
		default:
			log.Warn("publishing the certificate failed; retrying", slog.String("err", err.Error()))
		}
	}
	for ctx.Err() == nil {
		m, ok, certified, err := up.relay.Poll(ctx, a.node, up.after)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("polling the relay failed", slog.String("err", err.Error()))
			}
			return
		}
		if !certified && up.published != nil {
			// The agbot restarted: its relay no longer holds the
			// certificate, and the agbot can seal nothing to this agent
			// until it is published again.
			log.Info("the relay holds no certificate for this node (the agbot restarted); publishing it again")
			up.published = nil
		}
		if !ok {
			return
		}
		up.after = m.ID
		a.handle(ctx, up, m)
	}
}

// handle opens one message, applies it and replies. Messages that do not
// open (not from the pinned agbot, not for this agent, altered, replayed)
// are logged and dropped without a reply.
func (a *agent) handle(ctx context.Context, up *upstream, m relay.Message) {
	got, err := a.receiver.Receive(ctx, m.Envelope)
	switch {
	case errors.Is(err, agreement.ErrReplay):
		a.log.Debug("ignoring a replayed message", slog.Uint64("relay_id", m.ID))
		return
	case err != nil:
		a.log.Warn("ignoring a message that does not open", slog.Uint64("relay_id", m.ID), slog.String("err", err.Error()))
		return
	}
	h := got.Header
	if got.Err != nil {
		// The reply says why when the message was at fault; local failures
		// get a generic reason there and their detail here.
		a.log.Warn("message not applied", slog.String("agreement", h.AgreementID), slog.String("type", string(h.Type)), slog.String("err", got.Err.Error()))
	}
	for _, id := range got.Removed {
		if err := os.Remove(a.envPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("could not remove an instance's environment file", slog.String("instance", id), slog.String("err", err.Error()))
		}
	}
	if got.Kind == agreement.UpdateKindCancel && got.Err == nil {
		a.log.Info("agreement cancelled; instances wiped", slog.String("agreement", h.AgreementID), slog.Any("instances", got.Removed))
	}
	if err := up.relay.Reply(ctx, m.ID, got.Reply); err != nil {
		a.log.Warn("replying failed; the agbot will resend", slog.String("agreement", h.AgreementID), slog.String("err", err.Error()))
		return
	}
	a.log.Debug("replied", slog.String("agreement", h.AgreementID), slog.String("type", string(h.Type)), slog.Bool("accepted", got.Err == nil))
}

// assign gives each service (container) of a proposal its instance.
func assign(_ context.Context, p agreement.Proposal) (agentapi.Instances, error) {
	instances := agentapi.Instances{}
	for _, ss := range p.Services {
		instances[ss.Service] = agentapi.Instance{ID: instanceID(ss.Service)}
	}
	return instances, nil
}

// provisionAll hands each instance of an applied proposal its environment
// file and token.
func (a *agent) provisionAll(_ context.Context, _ agreement.Proposal, instances agentapi.Instances) error {
	for _, inst := range instances {
		if err := a.provide(inst.ID); err != nil {
			return err
		}
	}
	return nil
}

// provide gives an instance a token, unless it has one, and writes its
// environment file.
func (a *agent) provide(instance string) error {
	info, ok := a.store.Instance(instance)
	if !ok {
		return errors.New("agent: no instance " + instance)
	}
	mount := info.MountSource
	if _, ok := a.tokens.Token(context.Background(), instance); ok {
		return nil
	}
	token := rand.Text()
	if err := demo.WriteEnv(a.envPath(instance), demo.Env{API: a.apiURL, Instance: instance, Token: token, Mount: mount}); err != nil {
		return err
	}
	return a.tokens.Set(instance, token)
}

func (a *agent) envPath(instance string) string {
	return filepath.Join(a.envDir, instance+".json")
}

// instanceID names the instance of a service (container): the container
// name, or the service URL for a service without one. The store checks
// that it is a safe file name.
func instanceID(ref agreement.ServiceRef) string {
	if ref.Container != "" {
		return ref.Container
	}
	return ref.URL
}
