// The reconcile loop and its batches: the due records taken from the state
// and prepared in parallel, stored, and sent; the reads a batch shares.

package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// reconcileLoop takes the due records from the state, batch by batch,
// until ctx ends. Each batch is prepared in parallel (values read, messages
// sealed), stored with its messages in flight in one Update, and then
// handed to the transport; the sends run on, bounded by Options.Senders,
// while the next batch is prepared, and report to the commit loop.
func (e *Engine) reconcileLoop(ctx context.Context, sends *sync.WaitGroup, outcomes chan<- outcome) {
	poll := min(e.cfg.InitialDelay, time.Second)
	senders := make(chan struct{}, e.cfg.senders)
	for ctx.Err() == nil {
		if n := e.reconcileBatch(ctx, senders, sends, outcomes); n >= e.cfg.batch {
			continue // more may be due
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
		case <-e.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// job is what reconciling one record came to.
type job struct {
	rec *state.Record
	// remove: delete the record (a cancellation of an agreement whose
	// agent was never sent anything).
	remove bool
	// envelope is the sealed message to send, sealed to keys; nil when
	// there is nothing to send.
	envelope []byte
	keys     *agreement.PublicKeys
	// reason is why the agreement (or part of it) cannot be delivered
	// now; nil when nothing holds it back.
	reason *Reason
}

// outcome is what became of one envelope handed to the transport.
type outcome struct {
	rec      *state.Record // as stored before the send
	keys     *agreement.PublicKeys
	sequence uint64
	reply    []byte
	err      error
}

// reconcileBatch reconciles one batch of due records and returns how many
// the state gave.
func (e *Engine) reconcileBatch(ctx context.Context, senders chan struct{}, sends *sync.WaitGroup, outcomes chan<- outcome) int {
	if !e.member.entitled() {
		return 0 // no claim can be proven
	}
	now := time.Now()
	recs, err := e.state.Due(ctx, e.cfg.Member, now, e.cfg.lease, e.cfg.batch)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("could not read the due agreements from the state; retrying", slog.String("err", err.Error()))
		}
		return 0
	}
	if len(recs) == 0 {
		return 0
	}
	b := e.newBatch(ctx, recs, now)
	defer b.wipe()
	jobs := e.prepareAll(ctx, b, recs)
	e.noteReasons(jobs, now)
	conflicted, stored := e.storeBatch(ctx, b, jobs, now)
	if !stored {
		return len(recs)
	}
	for _, j := range jobs {
		switch {
		case j.remove:
			e.conds.drop(j.rec.ID)
		case !conflicted[j.rec.ID]:
			e.track(j.rec, now)
		}
	}
	e.changedNow()
	e.sendAll(ctx, jobs, conflicted, senders, sends, outcomes)
	return len(recs)
}

// prepareAll prepares a job for each record, on up to Options.Workers
// goroutines.
func (e *Engine) prepareAll(ctx context.Context, b *batch, recs []state.Record) []*job {
	jobs := make([]*job, len(recs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(e.cfg.workers, len(recs)) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(recs); k = int(next.Add(1) - 1) {
				jobs[k] = b.prepare(ctx, &recs[k])
			}
		})
	}
	wg.Wait()
	return jobs
}

// noteReasons records why each job's agreement waits, or that it does
// not.
func (e *Engine) noteReasons(jobs []*job, now time.Time) {
	notes := e.reasonNotes()
	for _, j := range jobs {
		switch {
		case j.remove:
			notes.note(j.rec.ID, j.rec.Node, nil, now)
		case j.reason == nil && j.envelope != nil && e.reasonCode(j.rec.ID) == ReasonAgentUnreachable:
			// Sent again: the agent is unreachable until it answers.
		default:
			notes.note(j.rec.ID, j.rec.Node, j.reason, now)
		}
	}
	notes.flush()
}

// storeBatch stores what the batch's reads found and the jobs' records
// before anything is sent: it deletes the records of cancellations never
// sent and updates the others. It returns the records that changed
// meanwhile (marked due again: their work is void), and false when
// nothing could be stored, so nothing may be sent.
func (e *Engine) storeBatch(ctx context.Context, b *batch, jobs []*job, now time.Time) (conflicted map[string]bool, stored bool) {
	if len(b.fresh) > 0 {
		err := e.state.PutObservations(ctx, e.cfg.Member, b.fresh...)
		if err != nil {
			e.log.Warn("could not store what reading the secrets found", slog.String("err", err.Error()))
		}
	}
	var saves []*state.Record
	var removes []string
	for _, j := range jobs {
		if j.remove {
			removes = append(removes, j.rec.ID)
		} else {
			saves = append(saves, j.rec)
		}
	}
	if len(removes) > 0 {
		err := e.state.Delete(ctx, removes...)
		if err == nil {
			e.log.Info("cancelled agreements whose agents were never sent anything", slog.Any("agreements", removes))
		}
	}
	conflicted = map[string]bool{}
	if err := e.state.Update(ctx, e.cfg.Member, saves...); err != nil {
		var ce *state.ConflictError
		if !errors.As(err, &ce) {
			// Nothing was stored, so nothing is sent: the leases run out
			// and the records are taken again.
			if ctx.Err() == nil {
				e.log.Error("could not store the agreements' messages before sending them; retrying", slog.String("err", err.Error()))
			}
			return nil, false
		}
		// Changed meanwhile (marked due, ended, answered, notified): the
		// work prepared for them is void. Have them looked at again now
		// rather than when the lease runs out.
		for _, id := range ce.IDs {
			conflicted[id] = true
		}
		// A failure is noted for Health; the records are taken again
		// when their leases run out.
		_, _ = e.state.MarkDue(ctx, state.Selector{IDs: ce.IDs}, now, false)
		e.notify()
	}
	return conflicted, true
}

// sendAll sends each stored job's envelope on a goroutine of its own, at
// most cap(senders) at once, and hands each outcome to the commit loop.
// It stops starting sends when ctx is done.
func (e *Engine) sendAll(ctx context.Context, jobs []*job, conflicted map[string]bool, senders chan struct{}, sends *sync.WaitGroup, outcomes chan<- outcome) {
	for _, j := range jobs {
		if j.envelope == nil || j.remove || conflicted[j.rec.ID] {
			continue
		}
		select {
		case senders <- struct{}{}:
		case <-ctx.Done():
			return
		}
		m := Message{Node: j.rec.Node, AgreementID: j.rec.ID, Envelope: j.envelope}
		o := outcome{rec: j.rec, keys: j.keys, sequence: j.rec.InFlight.Sequence}
		sends.Go(func() {
			defer func() { <-senders }()
			if !e.member.entitled() {
				// The membership lapsed while the batch was prepared: its
				// claims may be someone else's now. Not sent; the record
				// is taken again when its claim runs out.
				o.err = errNotEntitled
				outcomes <- o
				return
			}
			sctx, cancel := context.WithTimeout(ctx, e.cfg.ReplyTimeout)
			o.reply, o.err = e.transport.Send(sctx, m)
			cancel()
			switch {
			case o.err == nil:
				e.inst.message(eventSent)
			case errors.Is(o.err, context.DeadlineExceeded) && ctx.Err() == nil:
				e.inst.message(eventTimedOut)
			case ctx.Err() == nil:
				e.inst.message(eventSendFailed)
			}
			outcomes <- o
		})
	}
}

// errNotEntitled is the outcome of a message the engine did not send because
// its membership of the shared State lapsed.
var errNotEntitled = errors.New("not sent: the engine's membership of the shared state lapsed")

// batch is the shared work of one batch: the observations of the bound
// names, the values read and the agents' keys, each fetched once.
type batch struct {
	e   *Engine
	now time.Time

	mu    sync.Mutex
	obs   map[string]state.Observation
	reads map[string]*memo[*secretstore.Secret]
	keys  map[string]*memo[*agreement.PublicKeys]
	fresh []state.Observation // observations the reads corrected, to store
	// others are the bound names another member of a shared State polls.
	others map[string]bool
}

// memo is a result fetched once per batch.
type memo[T any] struct {
	once sync.Once
	val  T
	err  error
}

// memoOf returns the memo of key in m, adding it if need be.
func memoOf[T any](b *batch, m map[string]*memo[T], key string) *memo[T] {
	b.mu.Lock()
	defer b.mu.Unlock()
	x, ok := m[key]
	if !ok {
		x = &memo[T]{}
		m[key] = x
	}
	return x
}

// newBatch starts the batch of recs: the stored observations of the names
// the active ones bind, read once, and in a shared State which of those
// names another member polls.
func (e *Engine) newBatch(ctx context.Context, recs []state.Record, now time.Time) *batch {
	b := &batch{e: e, now: now, reads: map[string]*memo[*secretstore.Secret]{}, keys: map[string]*memo[*agreement.PublicKeys]{}}
	var names []string
	for i := range recs {
		if recs[i].Phase == state.PhaseActive {
			names = append(names, state.StoreNames(recs[i].Services)...)
		}
	}
	obs, err := e.state.Observations(ctx, names)
	if err != nil {
		// Unknown names are read from the store.
		e.log.Warn("could not read the observations of the bound secrets", slog.String("err", err.Error()))
		obs = map[string]state.Observation{}
	}
	b.obs = obs
	if e.member.m != nil {
		// In a shared State, the bound names this member does not poll.
		mine := e.polled()
		b.others = map[string]bool{}
		for _, n := range names {
			if !mine[n] {
				b.others[n] = true
			}
		}
	}
	return b
}

// wipe clears the values the batch read.
func (b *batch) wipe() {
	for _, r := range b.reads {
		if r.val != nil {
			r.val.Data.Wipe()
		}
	}
}

// observation returns the batch's observation of name: the stored one,
// or what a read of this batch found.
func (b *batch) observation(name string) state.Observation {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.obs[name]
}

// agentKeys returns the verified keys of node's agent, asked once per
// batch.
func (b *batch) agentKeys(ctx context.Context, node string) (*agreement.PublicKeys, error) {
	k := memoOf(b, b.keys, node)
	k.once.Do(func() {
		k.val, k.err = b.e.agents.Keys(ctx, node)
		if k.err == nil && k.val == nil {
			k.err = errors.New("no keys")
		}
	})
	return k.val, k.err
}

// read returns the named secret's current value, read once per batch
// through the engine's reader. A value whose tag is not the one observed
// is read again from the store; if the fresh read still differs, it is
// the newer content: it becomes the name's observation and is used.
func (b *batch) read(ctx context.Context, name string) (*secretstore.Secret, error) {
	r := memoOf(b, b.reads, name)
	r.once.Do(func() {
		e := b.e
		o := b.observation(name)
		s, err := e.reader.Get(ctx, name)
		if err == nil && o.State == state.Present && s.ContentTag() != o.Tag {
			e.reader.Invalidate(name)
			s, err = e.reader.Get(ctx, name)
		}
		if err == nil && (o.State != state.Present || s.ContentTag() != o.Tag) && b.others[name] {
			// Another member polls the name: this one cannot store what it
			// found (PutObservations refuses it), so it does not send it
			// either. Sent, it would be followed by the older content a
			// member whose cached value equals the stale observation seals
			// with a higher sequence. The record waits for the member that
			// polls the name to observe the change: one interval at most.
			r.val, r.err = nil, fmt.Errorf("delivery: secret %q: %w", name, errObservationBehind)
			return
		}
		if err == nil && (o.State != state.Present || s.ContentTag() != o.Tag) {
			fresh := state.Observation{Name: name, State: state.Present, Tag: s.ContentTag(), Since: b.now, CheckedAt: b.now}
			b.mu.Lock()
			b.obs[name] = fresh
			b.fresh = append(b.fresh, fresh)
			b.mu.Unlock()
		}
		r.val, r.err = s, err
	})
	return r.val, r.err
}

// errObservationBehind: a read found other content than the stored
// observation of a name another member of a shared State polls.
var errObservationBehind = errors.New("the store has other content than the member polling it observed; waiting for its next cycle")

// absentError says that every candidate of a binding is missing or
// forbidden.
type absentError struct{ names []string }

// Error names the absent secrets.
func (e *absentError) Error() string {
	return "store secret " + quoteNames(e.names) + " missing or forbidden"
}

// resolve returns the content a binding with candidates names should
// deliver: the first candidate that exists. Candidates observed missing
// or forbidden are skipped; one observed present is taken from its
// observation, or, with value, read (and checked against it); one not
// observed yet is read. A read that finds a candidate missing or forbidden
// goes on to the next one (a fallback changes what is delivered, never
// cancels). Errors: an *absentError when every candidate is absent, or
// the store's error when it could not answer.
func (b *batch) resolve(ctx context.Context, names []string, value bool) (state.Content, *secretstore.Secret, error) {
	for _, n := range names {
		o := b.observation(n)
		switch o.State {
		case state.Missing, state.Forbidden:
			continue
		case state.Present:
			if !value {
				return state.Content{StoreName: n, Tag: o.Tag}, nil, nil
			}
		}
		s, err := b.read(ctx, n)
		switch {
		case err == nil:
			return state.Content{StoreName: n, Tag: s.ContentTag()}, s, nil
		case errors.Is(err, edgesecrets.ErrNotFound), errors.Is(err, edgesecrets.ErrPermission):
			continue
		default:
			return state.Content{}, nil, err
		}
	}
	return state.Content{}, nil, &absentError{names: names}
}
