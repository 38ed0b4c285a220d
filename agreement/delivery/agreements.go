package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/ctxtime"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Register records an agreement: the engine proposes it to the node's
// agent and keeps its secrets current until it is ended. It returns once
// the record is stored; the proposal is sent by Run's reconcile loop, as
// soon as the bound secrets can be read (a store outage delays it, and it
// is retried like everything else).
//
// Registering the same agreement again with the same node and bindings
// does nothing. Registering it again with other store names for the same
// service secrets (a changed secretBinding, other candidates) rebinds it
// in place: the agent keeps its instance and its files and is sent the
// new store secrets' content as an update, like a rotation, keeping the
// old content until it accepts. Registering it again with another node,
// other services, other service secret names or formats is an error
// matching ErrExists that names what differs (that is a new agreement),
// and so is registering an agreement that is being cancelled. Invalid
// agreements are errors matching edgesecrets.ErrInvalid that name every
// problem.
func (e *Engine) Register(ctx context.Context, a Agreement) error {
	if err := checkAgreement(a); err != nil {
		return err
	}
	r := newRecord(a, time.Now())
	// A fresh epoch: the id may be that of an agreement that ended, whose
	// agent keeps the id's replay floor; every sequence of this one must
	// be above every sequence of that one, whichever member sent them.
	epoch, err := e.state.NewEpoch(ctx)
	if err != nil {
		return fmt.Errorf("delivery: register agreement %q: %w", a.ID, err)
	}
	r.Epoch = epoch
	err = e.state.Create(ctx, r)
	if errors.Is(err, state.ErrExists) {
		return e.reregister(ctx, a, r)
	}
	if err != nil {
		return fmt.Errorf("delivery: register agreement %q: %w", a.ID, err)
	}
	e.track(r, r.CreatedAt)
	e.log.Info("agreement registered", slog.String("agreement", a.ID), slog.String("node", a.Node), slog.Any("bindings", bindingsLog(r)))
	e.notify()
	e.changedNow()
	return nil
}

// reregister is Register of an agreement already stored: nothing when r
// binds what is stored, a rebind when only store names differ, an error
// naming the difference otherwise. A rebind that conflicts with another
// write (the reconcile loop, another member's lease) is retried on the
// fresh record after a backoff.
func (e *Engine) reregister(ctx context.Context, a Agreement, r *state.Record) error {
	for try := 1; ; try++ {
		old, err := e.state.Get(ctx, a.ID)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return e.Register(ctx, a) // ended meanwhile
		case err != nil:
			return fmt.Errorf("delivery: register agreement %q: %w", a.ID, err)
		case old.Phase != state.PhaseActive:
			return fmt.Errorf("delivery: register agreement %q: %w: %w", a.ID, state.ErrExists, errBeingCancelled)
		}
		rebound, problem := rebindable(&old, r)
		if problem != "" {
			return fmt.Errorf("delivery: register agreement %q: %w: %s; only the store names of its secrets can change in place", a.ID, state.ErrExists, problem)
		}
		if len(rebound) == 0 {
			return nil
		}
		was := bindingsLog(&old)
		now := time.Now()
		old.Services = cloneServices(r.Services)
		for _, i := range rebound {
			// Nothing desired until the new names are resolved: the
			// agreement is not in sync before the agent has their content.
			old.Slots[i].Desired = state.Content{}
		}
		old.NextAttempt, old.Attempts, old.UpdatedAt = now, 0, now
		err = e.state.Rebind(ctx, e.cfg.Member, &old)
		var ce *state.ConflictError
		switch {
		case err == nil:
			e.log.Info("agreement rebound: its agent is sent the new store secrets' content", slog.String("agreement", a.ID), slog.String("node", a.Node),
				slog.Any("was", was), slog.Any("bindings", bindingsLog(&old)))
			e.notify()
			e.changedNow()
			return nil
		case !errors.As(err, &ce) || try == maxEditTries:
			return fmt.Errorf("delivery: register agreement %q: rebinding it: %w", a.ID, err)
		case try > 1 && !ctxtime.Sleep(ctx, e.backoff(try-1)):
			return fmt.Errorf("delivery: register agreement %q: rebinding it: %w", a.ID, ctx.Err())
		}
	}
}

// rebindable compares the stored record old with r, a new record of the
// same id: it returns the slots whose store names differ, or, when more
// than store names differ, what does.
func rebindable(old, r *state.Record) (rebound []int, problem string) {
	if old.Node != r.Node {
		return nil, fmt.Sprintf("it is on node %q, not %q", old.Node, r.Node)
	}
	refs := func(rec *state.Record) []string {
		out := make([]string, len(rec.Services))
		for i, sb := range rec.Services {
			out[i] = sb.Service.String()
		}
		return out
	}
	if !slices.EqualFunc(old.Services, r.Services, func(a, b binding.ServiceBinding) bool { return a.Service == b.Service }) {
		return nil, fmt.Sprintf("its services are %s, not %s", strings.Join(refs(old), ", "), strings.Join(refs(r), ", "))
	}
	slotKeys := func(rec *state.Record) []string {
		out := make([]string, len(rec.Slots))
		for i, s := range rec.Slots {
			out[i] = fmt.Sprintf("%d/%s", s.Service, s.Name)
		}
		return out
	}
	if !slices.Equal(slotKeys(old), slotKeys(r)) {
		var diffs []string
		for i, sb := range old.Services {
			have, want := slices.Sorted(maps.Keys(sb.Secrets)), slices.Sorted(maps.Keys(r.Services[i].Secrets))
			if !slices.Equal(have, want) {
				diffs = append(diffs, fmt.Sprintf("service %s binds secrets %s, not %s", sb.Service, quoteNames(have), quoteNames(want)))
			}
		}
		return nil, strings.Join(diffs, "; ")
	}
	var diffs []string
	for i, s := range old.Slots {
		have, want := slotBinding(old, s), slotBinding(r, r.Slots[i])
		if have.Format != want.Format {
			diffs = append(diffs, fmt.Sprintf("secret %q of service %s has format %q, not %q", s.Name, old.Services[s.Service].Service, have.Format, want.Format))
			continue
		}
		if !slices.Equal(have.StoreNames, want.StoreNames) {
			rebound = append(rebound, i)
		}
	}
	if len(diffs) > 0 {
		return nil, strings.Join(diffs, "; ")
	}
	return rebound, ""
}

// End ends an agreement: the engine sends the agent a cancellation (an
// update of kind agreement.UpdateKindCancel) until the agent acknowledges
// it, then deletes the record. An agreement whose agent was never sent
// anything is deleted at once. Ending an agreement that is already being
// cancelled does nothing; an unknown one is an error matching ErrNotFound.
// The cancel hook is not called: it is for the engine's own decisions.
func (e *Engine) End(ctx context.Context, id string) error {
	now := time.Now()
	n, err := e.editIDs(ctx, []string{id}, func(r *state.Record) action {
		switch {
		case r.Phase != state.PhaseActive:
			return keep
		case neverSent(r):
			return remove
		}
		r.Phase, r.Held = state.PhaseCancelling, nil
		r.Cancel = &state.Cancellation{Reason: "ended by the agbot", DecidedAt: now, Notified: true}
		r.Attempts, r.NextAttempt = 0, now
		return save
	})
	if err != nil {
		return fmt.Errorf("delivery: end agreement %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("delivery: end agreement %q: %w", id, state.ErrNotFound)
	}
	e.log.Info("agreement ending", slog.String("agreement", id))
	e.notify()
	return nil
}

// Drop forgets an agreement without telling its agent, for a node that is
// gone for good. Dropping an unknown agreement does nothing.
func (e *Engine) Drop(ctx context.Context, id string) error {
	err := e.state.Delete(ctx, id)
	if err != nil {
		return fmt.Errorf("delivery: drop agreement %q: %w", id, err)
	}
	e.conds.drop(id)
	e.log.Info("agreement dropped", slog.String("agreement", id))
	e.changedNow()
	return nil
}

// Resync tells the engine that the agent on node is back (it reconnected
// or restarted): its agreements are looked at now, with their backoff
// reset, and messages still unanswered are sent again. An agent with new
// keys is proposed its agreements again.
func (e *Engine) Resync(ctx context.Context, node string) error {
	if node == "" {
		return fmt.Errorf("delivery: resync: %w: node is empty", edgesecrets.ErrInvalid)
	}
	n, err := e.state.MarkDue(ctx, state.Selector{Nodes: []string{node}}, time.Now(), true)
	if err != nil {
		return fmt.Errorf("delivery: resync node %q: %w", node, err)
	}
	e.log.Info("node resynced", slog.String("node", node), slog.Int("agreements", n))
	e.notify()
	return nil
}

// ProposeAgain tells the engine that the agent of agreement id holds
// nothing of it: it said so (it started over empty files, keeping its
// keys), so no rotation may ever bring it its secrets again. An active
// agreement the agent accepted is proposed again now, as to a new agent; a
// message in flight is no longer waited for. An agreement not proposed yet
// (a proposal on its way), being cancelled, or unknown is left as it is,
// so saying it again and again costs at most one proposal per answer of
// the agent.
func (e *Engine) ProposeAgain(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("delivery: propose again: %w: agreement id is empty", edgesecrets.ErrInvalid)
	}
	now := time.Now()
	_, err := e.editIDs(ctx, []string{id}, func(r *state.Record) action {
		if r.Phase != state.PhaseActive || !r.Proposed {
			return keep
		}
		e.log.Info("the agent holds nothing of the agreement; proposing it again", slog.String("agreement", r.ID), slog.String("node", r.Node))
		forgetAgentHolds(r)
		r.Attempts, r.NextAttempt = 0, now
		return save
	})
	if err != nil {
		return fmt.Errorf("delivery: propose agreement %q again: %w", id, err)
	}
	return nil
}

// HandleReply takes an agent's sealed reply that came back through an
// asynchronous transport (one whose Send returned no reply). node is the
// node it came from. An error says why the reply was not applied: it
// does not open (matching the agreement package's errors, ErrReplay for a
// replayed one), the agreement is unknown (ErrNotFound) or belongs to
// another node. An authentic reply to an earlier message than the one in
// flight changes nothing and is no error.
func (e *Engine) HandleReply(ctx context.Context, node string, envelope []byte) error {
	h, err := agreement.PeekHeader(envelope, agreement.Options{})
	if err != nil {
		return fmt.Errorf("delivery: reply from node %q: %w", node, err)
	}
	if h.Type != agreement.TypeReply {
		return fmt.Errorf("delivery: reply from node %q: %w: the envelope holds a %.32q", node, edgesecrets.ErrInvalid, string(h.Type))
	}
	keys, err := e.agents.Keys(ctx, node)
	if err != nil {
		return fmt.Errorf("delivery: reply from node %q: the agent's keys: %w", node, err)
	}
	now := time.Now()
	var applyErr error
	fx := newReplyEffects()
	n, err := e.editIDs(ctx, []string{h.AgreementID}, func(r *state.Record) action {
		if r.Node != node {
			applyErr = fmt.Errorf("delivery: reply from node %q: %w: agreement %q is on node %q", node, edgesecrets.ErrInvalid, r.ID, r.Node)
			return keep
		}
		var a action
		a, applyErr = e.applyReply(ctx, r, keys, envelope, now, fx)
		return a
	})
	switch {
	case err != nil:
		return fmt.Errorf("delivery: reply of agreement %q: %w", h.AgreementID, err)
	case n == 0:
		return fmt.Errorf("delivery: reply of agreement %q: %w", h.AgreementID, state.ErrNotFound)
	case errors.Is(applyErr, errLateReply):
		e.log.Debug("the agent answered an earlier message", slog.String("agreement", h.AgreementID), slog.String("err", applyErr.Error()))
		return nil
	}
	e.finishReplies(ctx, fx, now)
	e.notify()
	return applyErr
}

// WaitForSecrets records that a deployment was refused because store
// secrets it binds do not exist (or could not be read), and watches them:
// OnReady is called with deploymentID once any of them exists, after which
// the wait is forgotten. The hook deploys again; a deployment that still
// lacks a secret waits again (Deploy does so itself). Any one, not all:
// the names are often alternatives, a binding's node-level candidate and
// the organisation's it falls back to, only one of which will be written.
// Calling it again for the deployment adds to its names, never drops one:
// the agbots sharing a state may each wait for the same deployment, one
// knowing fewer of its candidates than another, and a name no longer
// needed only has the hook deploy again, which waits again for what is
// still missing. (A crash between the hook and forgetting the wait calls
// the hook again after the restart.)
func (e *Engine) WaitForSecrets(ctx context.Context, deploymentID string, storeNames ...string) error {
	var problems []error
	if deploymentID == "" {
		problems = append(problems, errors.New("deployment id is empty"))
	}
	if len(storeNames) == 0 {
		problems = append(problems, errors.New("no store secret named"))
	}
	for _, n := range storeNames {
		if err := secretstore.ValidateName(n); err != nil {
			problems = append(problems, fmt.Errorf("store name %.80q: %w", n, err))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("delivery: wait of deployment %q: %w: %w", deploymentID, edgesecrets.ErrInvalid, errors.Join(problems...))
	}
	waits, err := e.state.Waits(ctx)
	if err != nil {
		return fmt.Errorf("delivery: wait of deployment %q: %w", deploymentID, err)
	}
	since := time.Now()
	for _, w := range waits {
		if w.ID == deploymentID {
			storeNames = append(slices.Clone(storeNames), w.StoreNames...)
			since = w.CreatedAt
		}
	}
	names := slices.Compact(slices.Sorted(slices.Values(storeNames)))
	err = e.state.PutWait(ctx, state.Wait{ID: deploymentID, StoreNames: names, CreatedAt: since})
	if err != nil {
		return fmt.Errorf("delivery: wait of deployment %q: %w", deploymentID, err)
	}
	e.log.Info("deployment waits for secrets", slog.String("deployment", deploymentID), slog.Any("secrets", names))
	return nil
}

// ReleaseHeld turns every cancellation the budget held into a
// cancellation (the operator checked that the secrets are really gone),
// calls the cancel hook for each, and returns how many it released.
func (e *Engine) ReleaseHeld(ctx context.Context) (int, error) {
	var ids []string
	err := e.state.Records(ctx, func(r state.Record) bool {
		if r.Held != nil && r.Phase == state.PhaseActive {
			ids = append(ids, r.ID)
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("delivery: release held cancellations: %w", err)
	}
	now := time.Now()
	released := map[string]state.Cancellation{}
	_, err = e.editIDs(ctx, ids, func(r *state.Record) action {
		if r.Held == nil || r.Phase != state.PhaseActive {
			return keep
		}
		c := *r.Held
		c.DecidedAt, c.Notified = now, false
		r.Phase, r.Cancel, r.Held = state.PhaseCancelling, &c, nil
		r.Attempts, r.NextAttempt = 0, now
		released[r.ID] = c
		return save
	})
	if len(released) > 0 {
		e.log.Warn("held cancellations released by the operator", slog.Int("agreements", len(released)))
		e.inst.cancellation(eventReleased, len(released))
		e.notify()
		e.notifyCancels(ctx, released)
		e.mu.Lock()
		e.health.Held = max(0, e.health.Held-len(released))
		e.mu.Unlock()
	}
	if err != nil {
		return len(released), fmt.Errorf("delivery: release held cancellations: %w", err)
	}
	return len(released), nil
}

// Status returns where an agreement stands, with its desired content as
// the latest observations show it; an unknown agreement is an error
// matching ErrNotFound.
func (e *Engine) Status(ctx context.Context, id string) (Status, error) {
	r, err := e.state.Get(ctx, id)
	if err != nil {
		return Status{}, fmt.Errorf("delivery: status of agreement %q: %w", id, err)
	}
	obs, err := e.state.Observations(ctx, state.StoreNames(r.Services))
	if err != nil {
		return Status{}, fmt.Errorf("delivery: status of agreement %q: %w", id, err)
	}
	now := time.Now()
	ev := evaluate(&r, obs, now, e.confirmation(now, now))
	st := Status{
		ID: r.ID, Node: r.Node, Phase: r.Phase, InSync: ev.inSync, Services: r.Services,
		Diverged: e.diverged(&r, now), Held: r.Held, Cancel: r.Cancel,
		Attempts: r.Attempts, NextAttempt: r.NextAttempt, LastError: r.LastError, Rejection: r.Rejection, LastReply: r.LastReply,
		Reason: e.reasonOf(&r),
	}
	for i, s := range r.Slots {
		s.Desired = ev.desired[i]
		st.Slots = append(st.Slots, s)
	}
	switch {
	case r.Held != nil:
		st.Waiting = "cancellation held by the budget (ReleaseHeld): " + r.Held.Reason
	case ev.lost != nil && r.Phase == state.PhaseActive:
		st.Waiting = ev.lost.Reason
	case !st.InSync:
		if p := e.Health(ctx).StoreProblem; p != "" {
			st.Waiting = p
		} else if st.Reason != nil {
			st.Waiting = st.Reason.Message
		}
	}
	return st, nil
}

// Wait blocks until the agreement is in sync (its agent acknowledged the
// desired content of every secret) and returns its status, or until it
// ended (an error matching ErrNotFound) or ctx ends (ctx's error, with the
// last status).
func (e *Engine) Wait(ctx context.Context, id string) (Status, error) {
	for {
		changed := e.changes()
		st, err := e.Status(ctx, id)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return st, err
		case err == nil && st.InSync:
			return st, nil
		}
		t := time.NewTimer(e.cfg.InitialDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// Health returns the engine's overall state: the store's problem and the
// counts as of the last watcher cycle, the last successful store call,
// and the state's problem as of the last call.
func (e *Engine) Health(context.Context) Health {
	e.mu.Lock()
	h := e.health
	if e.stateErr != nil {
		h.StateProblem = e.stateErr.Error()
	}
	h.Reasons = e.reasonCounts()
	h.Conditions = e.conditionCounts()
	e.mu.Unlock()
	if h.StateProblem == "" {
		h.StateProblem = e.member.Problem()
	}
	h.LastStoreSuccess = e.store.LastSuccess()
	return h
}

// bindingsLog renders a record's bindings for a log line: service secret
// → store names.
func bindingsLog(r *state.Record) []string {
	out := make([]string, 0, len(r.Slots))
	for _, s := range r.Slots {
		out = append(out, r.Services[s.Service].Service.URL+":"+s.Name+"="+strings.Join(slotBinding(r, s).StoreNames, "|"))
	}
	return out
}
