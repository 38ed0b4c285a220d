package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// cancelPayload is the payload of a cancellation.
var cancelPayload = json.RawMessage(`{}`)

// maxReason bounds the rejection reasons and errors kept in a record.
const maxReason = 512

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
	rec *Record
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
	rec      *Record // as stored before the send
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
	e.noteState(err)
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
	if len(b.fresh) > 0 {
		err := e.state.PutObservations(ctx, e.cfg.Member, b.fresh...)
		e.noteState(err)
		if err != nil {
			e.log.Warn("could not store what reading the secrets found", slog.String("err", err.Error()))
		}
	}
	var saves []*Record
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
		e.noteState(err)
		if err == nil {
			e.log.Info("cancelled agreements whose agents were never sent anything", slog.Any("agreements", removes))
		}
	}
	conflicted := map[string]bool{}
	if err := e.state.Update(ctx, e.cfg.Member, saves...); err != nil {
		e.noteState(err)
		var ce *ConflictError
		if !errors.As(err, &ce) {
			// Nothing was stored, so nothing is sent: the leases run out
			// and the records are taken again.
			if ctx.Err() == nil {
				e.log.Error("could not store the agreements' messages before sending them; retrying", slog.String("err", err.Error()))
			}
			return len(recs)
		}
		// Changed meanwhile (marked due, ended, answered, notified): the
		// work prepared for them is void. Have them looked at again now
		// rather than when the lease runs out.
		for _, id := range ce.IDs {
			conflicted[id] = true
		}
		_, err := e.state.MarkDue(ctx, Selector{IDs: ce.IDs}, now, false)
		e.noteState(err)
		e.notify()
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
	for _, j := range jobs {
		if j.envelope == nil || j.remove || conflicted[j.rec.ID] {
			continue
		}
		select {
		case senders <- struct{}{}:
		case <-ctx.Done():
			return len(recs)
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
	return len(recs)
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
	obs   map[string]Observation
	reads map[string]*memo[*secretstore.Secret]
	keys  map[string]*memo[*agreement.PublicKeys]
	fresh []Observation // observations the reads corrected, to store
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

func (e *Engine) newBatch(ctx context.Context, recs []Record, now time.Time) *batch {
	b := &batch{e: e, now: now, reads: map[string]*memo[*secretstore.Secret]{}, keys: map[string]*memo[*agreement.PublicKeys]{}}
	var names []string
	for i := range recs {
		if recs[i].Phase == PhaseActive {
			names = append(names, StoreNames(recs[i].Services)...)
		}
	}
	obs, err := e.state.Observations(ctx, names)
	e.noteState(err)
	if err != nil {
		// Unknown names are read from the store.
		e.log.Warn("could not read the observations of the bound secrets", slog.String("err", err.Error()))
		obs = map[string]Observation{}
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

func (b *batch) observation(name string) Observation {
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
		if err == nil && o.State == Present && s.ContentTag() != o.Tag {
			e.reader.Invalidate(name)
			s, err = e.reader.Get(ctx, name)
		}
		if err == nil && (o.State != Present || s.ContentTag() != o.Tag) && b.others[name] {
			// Another member polls the name: this one cannot store what it
			// found (PutObservations refuses it), so it does not send it
			// either. Sent, it would be followed by the older content a
			// member whose cached value equals the stale observation seals
			// with a higher sequence. The record waits for the member that
			// polls the name to observe the change: one interval at most.
			r.val, r.err = nil, fmt.Errorf("delivery: secret %q: %w", name, errObservationBehind)
			return
		}
		if err == nil && (o.State != Present || s.ContentTag() != o.Tag) {
			fresh := Observation{Name: name, State: Present, Tag: s.ContentTag(), Since: b.now, CheckedAt: b.now}
			b.mu.Lock()
			b.obs[name] = fresh
			b.fresh = append(b.fresh, fresh)
			b.mu.Unlock()
		}
		r.val, r.err = s, err
	})
	return r.val, r.err
}

// errUnrenderable: a bound secret's content cannot be rendered in its
// declared format.
var errUnrenderable = errors.New("cannot be rendered in its declared format")

// errObservationBehind: a read found other content than the stored
// observation of a name another member of a shared State polls.
var errObservationBehind = errors.New("the store has other content than the member polling it observed; waiting for its next cycle")

// absentError says that every candidate of a binding is missing or
// forbidden.
type absentError struct{ names []string }

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
func (b *batch) resolve(ctx context.Context, names []string, value bool) (Content, *secretstore.Secret, error) {
	for _, n := range names {
		o := b.observation(n)
		switch o.State {
		case Missing, Forbidden:
			continue
		case Present:
			if !value {
				return Content{StoreName: n, Tag: o.Tag}, nil, nil
			}
		}
		s, err := b.read(ctx, n)
		switch {
		case err == nil:
			return Content{StoreName: n, Tag: s.ContentTag()}, s, nil
		case errors.Is(err, edgesecrets.ErrNotFound), errors.Is(err, edgesecrets.ErrPermission):
			continue
		default:
			return Content{}, nil, err
		}
	}
	return Content{}, nil, &absentError{names: names}
}

// prepare works out what record r needs and, when that is a message,
// seals it. r is changed in place to what is to be stored.
func (b *batch) prepare(ctx context.Context, r *Record) *job {
	j := &job{rec: r}
	r.UpdatedAt = b.now
	if r.Phase != PhaseActive {
		switch {
		case !r.agentToBeTold() && r.hookPending():
			// Nothing (more) to tell the agent, but the cancel hook has not
			// returned: the hook reads the record (the agbot's, for the
			// node and the binding's candidates), so it is removed once
			// notifyCancels marks it due again, and a crash before then
			// calls the hook again.
			r.NextAttempt = time.Time{}
			return j
		case !r.agentToBeTold():
			j.remove = true
			return j
		}
		b.prepareCancel(ctx, j)
		return j
	}
	b.prepareActive(ctx, j)
	return j
}

func (b *batch) prepareCancel(ctx context.Context, j *job) {
	r := j.rec
	keys, err := b.agentKeys(ctx, r.Node)
	if err != nil {
		b.wait(j, ReasonAgentUnverified, fmt.Sprintf("the agent on node %q cannot be verified: %v", r.Node, err))
		return
	}
	u := agreement.Update{AgreementID: r.ID, Kind: agreement.UpdateKindCancel, Payload: cancelPayload}
	if b.inFlight(r, agreement.TypeUpdate, agreement.UpdateKindCancel, nil, keys) {
		return
	}
	b.seal(ctx, j, keys, agreement.TypeUpdate, agreement.UpdateKindCancel, nil, func(h agreement.Header) ([]byte, error) {
		return agreement.Seal(b.e.keys, keys, u, h, b.e.cfg.EnvelopeOptions)
	})
}

func (b *batch) prepareActive(ctx context.Context, j *job) {
	e, r := b.e, j.rec
	keys, err := b.agentKeys(ctx, r.Node)
	if err != nil {
		b.wait(j, ReasonAgentUnverified, fmt.Sprintf("the agent on node %q cannot be verified: %v", r.Node, err))
		return
	}
	if r.Proposed && keys.EncryptionKeyID() != r.AgentKey {
		// A new agent on the node knows nothing of the agreement.
		e.log.Info("the agent has new keys; proposing the agreement again",
			slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("key", string(keys.EncryptionKeyID())))
		forgetAgentHolds(r)
		r.ReplySequence = 0
	}
	propose := !r.Proposed
	var (
		send     []int
		values   = map[int]*secretstore.Secret{}
		problems []string
		absent   bool
		code     ReasonCode
	)
	note := func(err error) {
		var ae *absentError
		c := ReasonStoreUnavailable
		switch {
		case errors.As(err, &ae):
			absent, c = true, ReasonSecretAbsent
		case errors.Is(err, errObservationBehind):
			c = ReasonObservationBehind
		case errors.Is(err, errUnrenderable):
			c = ReasonFormatUnrenderable
		case errors.Is(err, edgesecrets.ErrPermission):
			c = ReasonStoreCredentials
		}
		if len(problems) == 0 || c.rank() < code.rank() {
			code = c
		}
		problems = append(problems, err.Error())
	}
	for i := range r.Slots {
		s := &r.Slots[i]
		names := r.binding(*s).StoreNames
		if !propose {
			c, _, err := b.resolve(ctx, names, false)
			if err != nil {
				note(err)
				continue
			}
			s.Desired = c
			if c == s.Acked && !inFlightOther(r, i, c) {
				continue
			}
		}
		c, v, err := b.resolve(ctx, names, true)
		if err != nil {
			note(err)
			continue
		}
		s.Desired = c
		if err := (agreement.SecretDetails{Format: r.binding(*s).Format, Data: v.Data}).Validate(); err != nil {
			note(fmt.Errorf("service %s: secret %q: store secret %q %w: %w", r.Services[s.Service].Service, s.Name, c.StoreName, errUnrenderable, err))
			continue
		}
		send = append(send, i)
		values[i] = v
	}
	switch {
	case len(problems) > 0 && (propose || len(send) == 0):
		// A proposal carries every secret; wait for them all.
		why := strings.Join(problems, "; ")
		if absent {
			why = "waiting: " + why
		}
		b.wait(j, code, why)
		return
	case len(send) == 0:
		// In sync.
		r.InFlight, r.Attempts, r.Unanswered = nil, 0, time.Time{}
		r.LastError, r.Rejection = "", ""
		r.NextAttempt = time.Time{}
		return
	}
	if len(problems) > 0 {
		// The others are sent; these wait.
		r.LastError = clip(strings.Join(problems, "; "))
		j.reason = &Reason{Code: code, Message: r.LastError}
	}

	contents := make(map[int]Content, len(send))
	for _, i := range send {
		contents[i] = r.Slots[i].Desired
	}
	if propose {
		p := agreement.Proposal{AgreementID: r.ID, Services: servicesOf(r, send, values)}
		if b.inFlight(r, agreement.TypeProposal, "", contents, keys) {
			return
		}
		b.seal(ctx, j, keys, agreement.TypeProposal, "", contents, func(h agreement.Header) ([]byte, error) {
			return agreement.Seal(e.keys, keys, p, h, e.cfg.EnvelopeOptions)
		})
		return
	}
	if b.inFlight(r, agreement.TypeUpdate, agreement.UpdateKindSecrets, contents, keys) {
		return
	}
	b.seal(ctx, j, keys, agreement.TypeUpdate, agreement.UpdateKindSecrets, contents, func(h agreement.Header) ([]byte, error) {
		// One buffer holds the values' encoding, cleared once sealed.
		return agreement.SealSecretsUpdate(e.keys, keys, r.ID, agreement.SecretsUpdate{Services: servicesOf(r, send, values)}, h, e.cfg.EnvelopeOptions)
	})
}

// forgetUnanswered clears the acknowledged content of every slot the
// message in flight changes: whether the agent holds the old or the new
// content is unknown until it answers again.
func forgetUnanswered(r *Record) {
	if r.InFlight == nil {
		return
	}
	for i, c := range r.InFlight.Contents {
		if i >= 0 && i < len(r.Slots) && r.Slots[i].Acked != c {
			r.Slots[i].Acked = Content{}
		}
	}
}

// inFlightOther reports whether the message in flight carries other
// content than c for slot i: the agent may hold it, so c is sent again.
func inFlightOther(r *Record, i int, c Content) bool {
	if r.InFlight == nil {
		return false
	}
	sent, ok := r.InFlight.Contents[i]
	return ok && sent != c
}

// servicesOf returns the service secrets of the slots send, with values.
func servicesOf(r *Record, send []int, values map[int]*secretstore.Secret) []agreement.ServiceSecrets {
	var out []agreement.ServiceSecrets
	for _, i := range send {
		s := r.Slots[i]
		if len(out) == 0 || out[len(out)-1].Service != r.Services[s.Service].Service {
			out = append(out, agreement.ServiceSecrets{Service: r.Services[s.Service].Service, Secrets: map[string]agreement.SecretDetails{}})
		}
		out[len(out)-1].Secrets[s.Name] = agreement.SecretDetails{Format: r.binding(s).Format, Data: values[i].Data}
	}
	return out
}

// inFlight reports whether the same message is already in flight and its
// answer not yet overdue; then r waits for it.
func (b *batch) inFlight(r *Record, typ agreement.MessageType, kind string, contents map[int]Content, keys *agreement.PublicKeys) bool {
	in := r.InFlight
	// Attempts is 0 with a message in flight only after Resync: the agent
	// is back and likely lost it.
	if in == nil || r.Attempts == 0 || in.Type != typ || in.Kind != kind || in.AgentKey != keys.EncryptionKeyID() ||
		!maps.Equal(in.Contents, contents) {
		return false
	}
	due := in.At.Add(b.e.cfg.ReplyTimeout)
	if !b.now.Before(due) {
		r.LastError = fmt.Sprintf("no reply within %s", b.e.cfg.ReplyTimeout)
		return false
	}
	r.NextAttempt = due
	return true
}

// seal gives r its next sequence, seals the message with it and records
// it in flight. A failure to seal is recorded and retried after a backoff.
func (b *batch) seal(ctx context.Context, j *job, keys *agreement.PublicKeys, typ agreement.MessageType, kind string, contents map[int]Content, seal func(agreement.Header) ([]byte, error)) {
	e, r := b.e, j.rec
	seq, err := e.nextSequence(ctx, r)
	if err == nil {
		start := time.Now()
		j.envelope, err = seal(agreement.Header{Sequence: seq, Time: b.now})
		e.inst.seal.Record(ctx, time.Since(start).Seconds())
	}
	if err != nil {
		b.wait(j, ReasonSealFailed, "sealing the "+string(typ)+": "+err.Error())
		return
	}
	e.inst.message(eventSealed)
	j.keys = keys
	// The message this one replaces may have been applied, its answer
	// lost: what it changed is unknown too (seed 1403 of three agbots).
	forgetUnanswered(r)
	r.InFlight = &Sent{Type: typ, Kind: kind, Sequence: seq, Contents: contents, AgentKey: keys.EncryptionKeyID(), At: b.now}
	r.Attempts++
	if r.Unanswered.IsZero() {
		r.Unanswered = b.now
	}
	r.NextAttempt = b.now.Add(max(e.cfg.ReplyTimeout, e.backoff(r.Attempts)))
	e.log.Debug("sending", slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("type", string(typ)),
		slog.String("kind", kind), slog.Uint64("sequence", seq), slog.Any("secrets", slotNames(r, contents)), slog.Int("attempt", r.Attempts))
}

// wait records why nothing is sent now (code and why) and when to try
// again.
func (b *batch) wait(j *job, code ReasonCode, why string) {
	r := j.rec
	r.Attempts++
	r.LastError = clip(why)
	j.reason = &Reason{Code: code, Message: r.LastError}
	r.NextAttempt = b.now.Add(b.e.backoff(r.Attempts))
	b.e.log.Debug("agreement waiting", slog.String("agreement", r.ID), slog.String("why", r.LastError),
		slog.Duration("retry_in", r.NextAttempt.Sub(b.now)))
}

// nextSequence returns the record's next envelope sequence, Epoch<<32 |
// Counter, moving it to the engine's epoch first.
func (e *Engine) nextSequence(ctx context.Context, r *Record) (uint64, error) {
	if epoch := e.epoch.Load(); r.Epoch < epoch {
		r.Epoch, r.Counter = epoch, 0
	}
	if r.Counter == math.MaxUint32 {
		// 4 billion messages within one epoch: take a fresh one.
		if err := e.renewEpoch(ctx); err != nil {
			return 0, err
		}
		r.Epoch, r.Counter = e.epoch.Load(), 0
	}
	if !brokenEqualSequences || r.Counter == 0 {
		r.Counter++
	}
	return r.Epoch<<32 | uint64(r.Counter), nil
}

// commitLoop records what the transport did with each envelope, in
// batches, until outcomes is closed.
func (e *Engine) commitLoop(ctx context.Context, outcomes <-chan outcome) {
	for o := range outcomes {
		batch := []outcome{o}
	drain:
		for len(batch) < e.cfg.batch {
			select {
			case o, ok := <-outcomes:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		e.commit(ctx, batch)
	}
}

// commit records a batch of outcomes: the replies of synchronous
// transports and the failed sends. It finishes after ctx ends, so that
// answers already received are not lost.
func (e *Engine) commit(ctx context.Context, batch []outcome) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	now := time.Now()
	byID := map[string]outcome{}
	var recs []*Record
	for _, o := range batch {
		if o.err == nil && o.reply == nil {
			continue // the reply comes through HandleReply
		}
		if o.err != nil && ctx.Err() != nil {
			continue // shutting down: the next run sends again
		}
		// Of two messages of one agreement, the later one is current.
		if prev, ok := byID[o.rec.ID]; !ok || prev.sequence < o.sequence {
			byID[o.rec.ID] = o
		}
	}
	for _, o := range byID {
		recs = append(recs, o.rec)
	}
	if len(recs) == 0 {
		return
	}
	fx := newReplyEffects()
	unreachable := map[string]*Record{}
	err := e.edit(cctx, recs, func(r *Record) action {
		o := byID[r.ID]
		if o.err != nil {
			if r.InFlight == nil || r.InFlight.Sequence != o.sequence {
				return keep
			}
			// The agent may have applied the message and its answer been
			// lost: a slot it changed holds either content now, so the
			// desired content is sent again even if it comes back to what
			// was acknowledged (found by the fault simulation, seeds 557
			// and 4435 of three agbots: a fallback sent while the
			// node-level secret was denied, unanswered, stayed on the node
			// once the node-level secret was back).
			forgetUnanswered(r)
			r.InFlight = nil
			r.LastError = clip("sending to the agent on node " + strconv.Quote(r.Node) + ": " + o.err.Error())
			unreachable[r.ID] = r
			if brokenGiveUp {
				r.NextAttempt = now.AddDate(100, 0, 0)
				return save
			}
			settle(r, now.Add(e.backoff(r.Attempts)), now)
			e.log.Debug("could not send to the agent; will try again", slog.String("agreement", r.ID), slog.String("node", r.Node),
				slog.Int("attempt", r.Attempts), slog.String("err", r.LastError))
			return save
		}
		a, err := e.applyReply(cctx, r, o.keys, o.reply, now, fx)
		if errors.Is(err, errLateReply) {
			e.log.Debug("the agent answered an earlier message", slog.String("agreement", r.ID), slog.String("err", err.Error()))
		} else if err != nil {
			e.log.Warn("ignoring the agent's reply", slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("err", err.Error()))
		}
		return a
	})
	if err != nil {
		e.noteState(err)
		e.log.Error("could not record the agents' replies; the messages will be sent again", slog.String("err", err.Error()))
		return
	}
	notes := e.reasonNotes()
	for _, r := range unreachable {
		notes.note(r.ID, r.Node, &Reason{Code: ReasonAgentUnreachable, Message: r.LastError}, now)
		e.track(r, now)
	}
	notes.flush()
	e.finishReplies(cctx, fx, now)
}

// replyGuard is the replay guard of one agreement's replies: the record's
// ReplySequence, advanced by storing the record.
type replyGuard struct{ floor uint64 }

// Accept implements agreement.ReplayGuard.
func (g replyGuard) Accept(_ context.Context, id string, typ agreement.MessageType, seq uint64) error {
	if seq <= g.floor {
		return fmt.Errorf("%w: %s sequence %d of agreement %q is not above %d", agreement.ErrReplay, typ, seq, id, g.floor)
	}
	return nil
}

// errLateReply: an authentic reply to a message that is no longer the one
// in flight.
var errLateReply = errors.New("the reply answers an earlier message")

// applyReply opens an agent's sealed reply to r and applies it. An
// accepted message becomes what the agent holds (for a proposal: the
// agreement is proposed; for a cancellation: the record is removed); a
// rejected one is tried again after a backoff, never cancelled. A reply
// that does not open, is replayed or answers an earlier message changes
// nothing else.
func (e *Engine) applyReply(ctx context.Context, r *Record, keys *agreement.PublicKeys, envelope []byte, now time.Time, fx *replyEffects) (action, error) {
	h, reply, err := agreement.Open[agreement.Reply](ctx, e.keys, keys, envelope, replyGuard{floor: r.ReplySequence}, e.cfg.EnvelopeOptions)
	if err != nil {
		return keep, fmt.Errorf("delivery: reply of agreement %q: %w", r.ID, err)
	}
	if h.AgreementID != r.ID {
		return keep, fmt.Errorf("delivery: reply of agreement %q: %w: it is for agreement %q", r.ID, edgesecrets.ErrInvalid, h.AgreementID)
	}
	r.ReplySequence = h.Sequence
	r.LastReply = now
	in := r.InFlight
	if in == nil || reply.InReplyTo != (agreement.MessageRef{Type: in.Type, Sequence: in.Sequence}) {
		return save, fmt.Errorf("delivery: reply of agreement %q to %s %d: %w", r.ID, reply.InReplyTo.Type, reply.InReplyTo.Sequence, errLateReply)
	}
	r.InFlight, r.Unanswered = nil, time.Time{}
	fx.answered(r, in, reply.Accepted)
	e.clearReason(r.ID, r.Node, ReasonAgentUnreachable, now) // it answered
	if !reply.Accepted && reply.Unknown && in.Type == agreement.TypeUpdate && in.Kind == agreement.UpdateKindSecrets {
		// The agent lost the agreement (its files and replay state) but
		// kept its keys: propose it again, now (seed 7 of the fault
		// simulation retried the update forever).
		e.log.Info("the agent holds nothing of the agreement; proposing it again", slog.String("agreement", r.ID), slog.String("node", r.Node))
		forgetAgentHolds(r)
		r.Attempts, r.NextAttempt = 0, now
		return save, nil
	}
	if !reply.Accepted {
		level := slog.LevelDebug // the same refusal again
		if prev := r.Rejection; prev != clip(reply.Reason) {
			level = slog.LevelWarn
		}
		r.Rejection = clip(reply.Reason)
		r.LastError = ""
		settle(r, now.Add(e.backoff(r.Attempts)), now)
		e.log.Log(ctx, level, "the agent rejected a message; will try again", slog.String("agreement", r.ID), slog.String("node", r.Node),
			slog.String("reason", string(ReasonAgentRejected)), slog.String("why", r.Rejection),
			slog.String("type", string(in.Type)), slog.String("kind", in.Kind), slog.Int("attempt", r.Attempts))
		return save, nil
	}
	if r.Rejection != "" {
		e.log.Info("agreement no longer held back", slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("was", string(ReasonAgentRejected)))
	}
	if in.Kind == agreement.UpdateKindCancel {
		e.log.Info("the agent removed the agreement's secrets; agreement ended", slog.String("agreement", r.ID), slog.String("node", r.Node))
		if r.hookPending() {
			// Kept for the cancel hook, which reads it, and removed once the
			// hook returned (notifyCancels); a crash before then calls the
			// hook again.
			r.Phase, r.Attempts, r.NextAttempt = PhaseCancelled, 0, time.Time{}
			return save, nil
		}
		return remove, nil
	}
	if in.Type == agreement.TypeProposal {
		r.Proposed, r.AgentKey = true, in.AgentKey
	}
	for i, c := range in.Contents {
		if i < len(r.Slots) {
			r.Slots[i].Acked = c
		}
	}
	// A secret held back while the others were sent keeps its reason
	// until the next prepare finds it again or sends it.
	heldBack := !r.inSync() && e.reasonOf(r) != nil && r.Rejection == ""
	r.Attempts, r.Rejection = 0, ""
	if !heldBack {
		r.LastError = ""
	}
	if r.inSync() {
		settle(r, time.Time{}, now)
	} else {
		r.NextAttempt = now
	}
	e.log.Info("the agent accepted", slog.String("agreement", r.ID), slog.String("node", r.Node), slog.String("type", string(in.Type)),
		slog.Any("secrets", slotNames(r, in.Contents)))
	return save, nil
}

// settle sets r's next attempt to next, unless r is already due: then
// something asked for it to be looked at (MarkDue) and that stays.
func settle(r *Record, next, now time.Time) {
	if !r.NextAttempt.IsZero() && !r.NextAttempt.After(now) {
		return
	}
	r.NextAttempt = next
}

// inSync reports whether the agent acknowledged the stored desired content
// of every slot of an active agreement, with nothing in flight.
func (r *Record) inSync() bool {
	if r.Phase != PhaseActive || !r.Proposed || r.InFlight != nil {
		return false
	}
	for _, s := range r.Slots {
		if s.Desired.IsZero() || s.Desired != s.Acked {
			return false
		}
	}
	return true
}

// action is what edit does with a record after its change.
type action uint8

const (
	keep action = iota
	save
	remove
)

// maxEditTries bounds the retries of a record whose update conflicts.
const maxEditTries = 8

// forgetAgentHolds makes r as to an agent that holds nothing of it (new
// keys, or its files lost): the engine proposes it again, with every
// secret's content, and a message in flight is not waited for.
func forgetAgentHolds(r *Record) {
	r.Proposed, r.AgentKey, r.Rejection, r.LastError = false, "", "", ""
	r.InFlight, r.Unanswered = nil, time.Time{}
	for i := range r.Slots {
		r.Slots[i].Acked = Content{}
	}
}

// edit applies change to each record and stores the results in one
// Update (and one Delete), then applies it again to a fresh copy of each
// record that changed meanwhile, until stored. change must decide from
// the record it is given alone. Records deleted meanwhile are skipped.
func (e *Engine) edit(ctx context.Context, recs []*Record, change func(*Record) action) error {
	defer e.changedNow()
	defer e.notify()
	for try := 1; len(recs) > 0; try++ {
		var saves []*Record
		var removes []string
		for _, r := range recs {
			switch change(r) {
			case save:
				r.UpdatedAt = time.Now()
				saves = append(saves, r)
			case remove:
				removes = append(removes, r.ID)
			}
		}
		if len(removes) > 0 {
			if err := e.state.Delete(ctx, removes...); err != nil {
				return err
			}
		}
		for _, id := range removes {
			e.conds.drop(id)
		}
		if len(saves) == 0 {
			return nil
		}
		err := e.state.Update(ctx, e.cfg.Member, saves...)
		var ce *ConflictError
		if err == nil {
			e.trackAll(saves, nil)
			return nil
		}
		if !errors.As(err, &ce) || try == maxEditTries {
			return err
		}
		e.trackAll(saves, ce.IDs)
		recs = recs[:0:0]
		for _, id := range ce.IDs {
			fresh, err := e.state.Get(ctx, id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			recs = append(recs, &fresh)
		}
	}
	return nil
}

// editIDs is edit for records named by id, read in batches. It returns
// how many of them exist.
func (e *Engine) editIDs(ctx context.Context, ids []string, change func(*Record) action) (int, error) {
	found := 0
	for start := 0; start < len(ids); start += e.cfg.batch {
		var recs []*Record
		for _, id := range ids[start:min(start+e.cfg.batch, len(ids))] {
			r, err := e.state.Get(ctx, id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				e.noteState(err)
				return found, err
			}
			recs = append(recs, &r)
		}
		found += len(recs)
		if err := e.edit(ctx, recs, change); err != nil {
			e.noteState(err)
			return found, err
		}
	}
	return found, nil
}

// slotNames names the service secrets of the slots in contents, for logs.
func slotNames(r *Record, contents map[int]Content) []string {
	var out []string
	for i := range r.Slots {
		if _, ok := contents[i]; ok {
			out = append(out, r.Services[r.Slots[i].Service].Service.URL+":"+r.Slots[i].Name)
		}
	}
	return out
}

// clip bounds a reason kept in a record.
func clip(s string) string {
	if len(s) <= maxReason {
		return s
	}
	return strings.ToValidUTF8(s[:maxReason], "") + "…"
}

// quoteNames quotes store names for messages: "a" or "a", "b".
func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
