package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/ctxtime"
	"github.com/edgesecrets/edgesecrets/relay"
)

// poll publishes the certificate on each agbot's relay when it changed and
// handles the relays' messages, every PollInterval until ctx ends.
func (a *Agent) poll(ctx context.Context) {
	for {
		for _, up := range a.upstreams {
			a.pollOne(ctx, up)
		}
		if !ctxtime.Sleep(ctx, a.opts.PollInterval) {
			return
		}
	}
}

// pollOne publishes the certificate on one agbot's relay if needed and
// handles the messages waiting there.
func (a *Agent) pollOne(ctx context.Context, up *upstream) {
	log := a.log
	if len(a.upstreams) > 1 {
		log = log.With(slog.String("agbot", up.url))
	}
	chain := a.identity.CertificateChain()
	if chain == nil {
		return // not registered (yet)
	}
	if !bytes.Equal(chain, up.published) && !bytes.Equal(chain, up.refused) {
		// An agent over empty files (new, or wiped with its keys kept)
		// says so: the agbot then proposes again what it believes the
		// agent holds, which no rotation might ever send again.
		holdsNothing := len(a.files.InstanceIDs()) == 0
		err := up.relay.PublishCertificate(ctx, relay.Publication{Node: a.node, ChainPEM: chain, HoldsNothing: holdsNothing})
		switch {
		case err == nil:
			up.published, up.refused = chain, nil
			log.Info("certificate published on the relay", slog.Bool("holds_nothing", holdsNothing))
		case a.identity.Refused(err):
			// The agbot does not know the identity (any more), or it is
			// revoked or expired: the identity Agent registers again (and
			// says so); the new certificate is published then.
			up.refused = chain
			log.Info("the agbot refused the certificate as a lost identity; publishing again once registered again", slog.String("err", err.Error()))
		case ctx.Err() == nil:
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
func (a *Agent) handle(ctx context.Context, up *upstream, m relay.Message) {
	// A new instance's service starts with its files: only instances
	// held before the message reload.
	held := a.files.InstanceIDs()
	got, err := a.receiver.Receive(ctx, m.Envelope)
	a.inst.message(got, err)
	if err == nil {
		for id, names := range got.Changes {
			if slices.Contains(held, id) {
				a.reloads.changed(id, names)
			}
		}
	}
	if a.opts.OnMessage != nil {
		a.opts.OnMessage(ctx, got, err)
	}
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
	if got.Kind == agreement.UpdateKindCancel && got.Err == nil {
		a.log.Info("agreement cancelled; instances wiped", slog.String("agreement", h.AgreementID), slog.Any("instances", got.Removed))
	}
	if err := up.relay.Reply(ctx, m.ID, got.Reply); err != nil {
		a.log.Warn("replying failed; the agbot will resend", slog.String("agreement", h.AgreementID), slog.String("err", err.Error()))
		return
	}
	a.log.Debug("replied", slog.String("agreement", h.AgreementID), slog.String("type", string(h.Type)), slog.Bool("accepted", got.Err == nil))
}
