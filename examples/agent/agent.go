package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/examples/internal/relay"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// agent handles the agbot's messages for one node.
type agent struct {
	log       *slog.Logger
	keys      *agreement.PrivateKeys
	agbotKeys *agreement.PublicKeys // pinned: the only sender accepted
	node      relay.Node
	relay     *relay.Client
	identity  *identity.Agent
	store     *agentapi.Store
	tokens    *agentapi.TokenTable
	guard     agreement.ReplayGuard
	seq       *demo.Sequencer
	envDir    string
	apiURL    string

	published *x509.Certificate // the certificate last published on the relay
	after     uint64            // the id of the last relay message handled
}

// poll publishes the current certificate when it changed and handles the
// relay's messages, every interval until ctx ends.
func (a *agent) poll(ctx context.Context, interval time.Duration) {
	for {
		if cert := a.identity.Certificate(); cert != a.published {
			chain := identity.EncodeCertificatesPEM(a.identity.CertificateChain()...)
			if err := a.relay.PublishCertificate(ctx, a.node, chain); err != nil {
				a.log.Warn("publishing the certificate failed; retrying", slog.String("err", err.Error()))
			} else {
				a.published = cert
				a.log.Info("certificate published on the relay", slog.String("serial", cert.SerialNumber.Text(16)))
			}
		}
		for ctx.Err() == nil {
			m, ok, err := a.relay.Next(ctx, a.node, a.after)
			if err != nil {
				if ctx.Err() == nil {
					a.log.Warn("polling the relay failed", slog.String("err", err.Error()))
				}
				break
			}
			if !ok {
				break
			}
			a.after = m.ID
			a.handle(ctx, m)
		}
		if !demo.Sleep(ctx, interval) {
			return
		}
	}
}

// handle opens one message, applies it and replies. Messages that do not
// open (not from the pinned agbot, not for this agent, altered, replayed)
// are logged and dropped without a reply.
func (a *agent) handle(ctx context.Context, m relay.Message) {
	peek, err := agreement.PeekHeader(m.Envelope)
	if err != nil {
		a.log.Warn("ignoring a relay message that is not an envelope", slog.Uint64("relay_id", m.ID), slog.String("err", err.Error()))
		return
	}
	var h agreement.Header
	switch peek.Type {
	case agreement.TypeProposal:
		var p agreement.Proposal
		if h, p, err = agreement.OpenProposal(ctx, a.keys, a.agbotKeys, m.Envelope, a.guard); err != nil {
			a.dropped(m.ID, err)
			return
		}
		err = a.applyProposal(ctx, p)
	case agreement.TypeUpdate:
		var u agreement.Update
		if h, u, err = agreement.OpenUpdate(ctx, a.keys, a.agbotKeys, m.Envelope, a.guard); err != nil {
			a.dropped(m.ID, err)
			return
		}
		err = a.applyUpdate(ctx, u)
	default:
		a.log.Warn("ignoring a relay message of an unexpected type", slog.Uint64("relay_id", m.ID), slog.String("type", string(peek.Type)))
		return
	}
	a.reply(ctx, m.ID, h, err)
}

func (a *agent) dropped(id uint64, err error) {
	if errors.Is(err, agreement.ErrReplay) {
		a.log.Debug("ignoring a replayed message", slog.Uint64("relay_id", id))
		return
	}
	a.log.Warn("ignoring a message that does not open", slog.Uint64("relay_id", id), slog.String("err", err.Error()))
}

// applyProposal stores a proposal's secrets, one instance per service
// (container), and hands each instance its environment file.
func (a *agent) applyProposal(ctx context.Context, p agreement.Proposal) error {
	instances := agentapi.Instances{}
	for _, ss := range p.Services {
		instances[ss.Service] = agentapi.Instance{ID: instanceID(ss.Service)}
	}
	if _, err := a.store.ApplyProposal(ctx, p, instances); err != nil {
		return err
	}
	for _, inst := range instances {
		if err := a.provide(inst.ID); err != nil {
			return err
		}
	}
	return nil
}

// applyUpdate applies a secrets update, or removes the agreement's
// instances on a cancellation.
func (a *agent) applyUpdate(ctx context.Context, u agreement.Update) error {
	switch u.Kind {
	case agreement.UpdateKindSecrets:
		_, err := a.store.ApplyUpdate(ctx, u)
		return err
	case demo.UpdateKindCancel:
		ids, err := a.store.RemoveAgreement(ctx, u.AgreementID)
		a.tokens.Delete(ids...)
		for _, id := range ids {
			if rerr := os.Remove(a.envPath(id)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		if err == nil {
			a.log.Info("agreement cancelled; instances wiped", slog.String("agreement", u.AgreementID), slog.Any("instances", ids))
		}
		return err
	default:
		return fmt.Errorf("%w: unknown update kind %q", secretstore.ErrInvalid, u.Kind)
	}
}

// reply seals the outcome of a message to the agbot and posts it.
func (a *agent) reply(ctx context.Context, relayID uint64, answered agreement.Header, applyErr error) {
	outcome := agentapi.Reply(answered.AgreementID, applyErr)
	if applyErr != nil {
		// The reply says why when the message was at fault; local failures
		// get a generic reason there and their detail here.
		a.log.Warn("message not applied", slog.String("agreement", answered.AgreementID), slog.String("type", string(answered.Type)), slog.String("err", applyErr.Error()))
	}
	r := agreement.NewReply(answered, outcome.Accepted, outcome.Reason)
	env, err := agreement.SealReply(a.keys, a.agbotKeys, r, agreement.Header{Sequence: a.seq.Next(answered.AgreementID, agreement.TypeReply)})
	if err == nil {
		err = a.relay.Reply(ctx, relayID, env)
	}
	if err != nil {
		a.log.Warn("replying failed; the agbot will resend", slog.String("agreement", answered.AgreementID), slog.String("err", err.Error()))
		return
	}
	a.log.Debug("replied", slog.String("agreement", answered.AgreementID), slog.String("type", string(answered.Type)), slog.Bool("accepted", r.Accepted))
}

// provide gives an instance a token, unless it has one, and writes its
// environment file.
func (a *agent) provide(instance string) error {
	mount, err := a.store.MountSource(instance)
	if err != nil {
		return err
	}
	token, ok := a.tokens.Token(context.Background(), instance)
	if ok {
		return nil
	}
	token = rand.Text()
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
