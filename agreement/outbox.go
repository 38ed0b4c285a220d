package agreement

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
)

// Transport delivers agreement updates to agents. Sealing the update to the
// agent's key and opening the reply happen inside it, so the outbox never
// handles envelopes; SealingTransport does both over any EnvelopeSender.
type Transport interface {
	// Deliver seals d.Update with envelope sequence d.Sequence for the
	// agent of the agreement, sends it, and returns the agent's reply. An
	// error means no usable reply: the send failed, or no reply came
	// within the transport's own timeout, which is also how a downlevel
	// agent that ignores the message looks. The outbox tries again later
	// with the same update and a higher sequence, so the agent's replay
	// guard accepts the resend and rejects a stale envelope arriving late.
	Deliver(ctx context.Context, d Delivery) (Reply, error)
}

// Delivery is one attempt to deliver an agreement's update. Printing it
// shows the payload's size only (see Update).
type Delivery struct {
	Update Update
	// Sequence is the envelope sequence to seal this attempt with. The
	// outbox gives every attempt of an agreement a higher one than the
	// attempt before, also across restarts (see OutboxRecord.Sequence). A
	// reply that names another message in InReplyTo is not an answer to
	// this attempt.
	Sequence uint64
	// Attempt counts the attempts at this content, from 1.
	Attempt int
}

// UpdateStatus is where an agreement's latest update stands.
type UpdateStatus uint8

// Update statuses.
const (
	// StatusPending: waiting for a (next) delivery attempt or its reply.
	StatusPending UpdateStatus = iota + 1
	// StatusAccepted: the agent applied the update.
	StatusAccepted
	// StatusRejected: the agent refused it; Reason says why. The agreement
	// is not cancelled.
	StatusRejected
	// StatusUnacknowledged: no reply after the last attempt. The agreement
	// is not cancelled.
	StatusUnacknowledged
)

// String returns the status's lower-case name.
func (s UpdateStatus) String() string {
	switch s {
	case StatusPending:
		return "pending"
	case StatusAccepted:
		return "accepted"
	case StatusRejected:
		return "rejected"
	case StatusUnacknowledged:
		return "unacknowledged"
	}
	return fmt.Sprintf("UpdateStatus(%d)", s)
}

// OutboxRecord is an agreement's entry in the outbox: its latest update and
// how its delivery went.
//
// While pending, Update.Payload holds the update in the clear (for a
// secrets update: the secret values), because every attempt is sealed
// afresh; once the record is final the payload is dropped. Printing a
// record shows the payload's size only.
type OutboxRecord struct {
	AgreementID string
	// Update is the content to deliver: the newest update, merged with any
	// older pending one it superseded.
	Update Update
	// Generation increases every time newer content supersedes the record.
	Generation uint64
	Status     UpdateStatus
	// Attempts counts the deliveries tried for this generation.
	Attempts int
	// Sequence is the envelope sequence of the agreement's latest attempt,
	// of any generation. The next attempt uses the larger of Sequence+1
	// and the current Unix time in microseconds: sequences keep increasing
	// across restarts with a persistent state, and, as long as the clock
	// does not go back, also when the state was lost.
	Sequence uint64
	// NextAttempt is when a pending record is due.
	NextAttempt time.Time
	// Reason is the agent's reason for a rejection, or the last delivery
	// error of an unacknowledged or retrying update.
	Reason    string
	UpdatedAt time.Time
}

// clone returns a deep copy, without the payload when withPayload is false.
func (r OutboxRecord) clone(withPayload bool) OutboxRecord {
	if withPayload {
		r.Update.Payload = bytes.Clone(r.Update.Payload)
	} else {
		r.Update.Payload = nil
	}
	return r
}

// OutboxState persists outbox records so an agbot restart resumes pending
// updates. Pending records carry secret values (see OutboxRecord): a
// persistent implementation must keep them as protected as the store
// credentials (encrypted at rest, owner-only files).
type OutboxState interface {
	// Load returns every record, in any order.
	Load(ctx context.Context) ([]OutboxRecord, error)
	// Save stores rec, replacing the agreement's previous record.
	Save(ctx context.Context, rec OutboxRecord) error
	// Delete removes the agreement's record; deleting a missing one is not
	// an error.
	Delete(ctx context.Context, agreementID string) error
}

// MemoryOutboxState is the default OutboxState: records live in memory
// only, so they survive a restart of the Outbox but not of the process.
// Safe for concurrent use.
type MemoryOutboxState struct {
	mu   sync.Mutex
	recs map[string]OutboxRecord
}

// NewMemoryOutboxState returns an empty state.
func NewMemoryOutboxState() *MemoryOutboxState {
	return &MemoryOutboxState{recs: map[string]OutboxRecord{}}
}

// Load implements OutboxState.
func (m *MemoryOutboxState) Load(context.Context) ([]OutboxRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]OutboxRecord, 0, len(m.recs))
	for _, r := range m.recs {
		out = append(out, r.clone(true))
	}
	return out, nil
}

// Save implements OutboxState.
func (m *MemoryOutboxState) Save(_ context.Context, rec OutboxRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[rec.AgreementID] = rec.clone(true)
	return nil
}

// Delete implements OutboxState.
func (m *MemoryOutboxState) Delete(_ context.Context, agreementID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, agreementID)
	return nil
}

// Outbox defaults.
const (
	DefaultMaxAttempts = 5
	DefaultBackoff     = 30 * time.Second
	DefaultMaxBackoff  = 10 * time.Minute
	DefaultSenders     = 8
)

// maxRecordedReason bounds the rejection reason kept from an agent.
const maxRecordedReason = 256

// OutboxOptions configure an Outbox. The zero value is usable.
type OutboxOptions struct {
	// State keeps the records; nil means a new MemoryOutboxState.
	State OutboxState
	// MaxAttempts is how many deliveries are tried before an update is
	// recorded unacknowledged. Zero means DefaultMaxAttempts.
	MaxAttempts int
	// Backoff is the wait after the first failed delivery; it doubles
	// after each further one, up to MaxBackoff. Zero means DefaultBackoff.
	Backoff time.Duration
	// MaxBackoff caps the wait. Zero means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Senders is how many deliveries run at once. Zero means DefaultSenders.
	Senders int
	// Clock schedules retries; nil means the real clock.
	Clock clockwork.Clock
	// Logger receives delivery outcomes: agreement ids, kinds, statuses and
	// reasons, never payloads. Nil discards.
	Logger *slog.Logger
}

// Outbox delivers agreement updates from the agbot to agents (the
// agreement-update protocol extension):
//
//   - per agreement it holds one update: a newer one supersedes a pending
//     older one (two secrets updates are merged, the newer secret winning,
//     so nothing the older one carried is lost);
//   - it delivers through a Transport, retrying with exponential backoff
//     until the agent replies or MaxAttempts deliveries went unanswered
//     (downlevel agents ignore unknown messages);
//   - an accepted update is done; a rejected one is recorded with the
//     agent's reason and an unanswered one as unacknowledged. Neither
//     cancels the agreement: that stays the agbot's decision.
//
// Records are kept in an OutboxState, so a new Outbox over the same state
// resumes the pending updates. A finished record stays (without payload)
// for Lookup until Forget; Tracker.Unregister calls it.
type Outbox struct {
	transport   Transport
	state       OutboxState
	maxAttempts int
	backoff     time.Duration
	maxBackoff  time.Duration
	senders     int
	clock       clockwork.Clock
	log         *slog.Logger

	running atomic.Bool
	wake    chan struct{}

	mu       sync.Mutex
	recs     map[string]*outboxEntry
	due      dueHeap
	busy     int // deliveries in flight
	schedSeq uint64
}

// outboxEntry is a record plus in-memory scheduling state.
type outboxEntry struct {
	rec      OutboxRecord
	inflight bool
	sched    uint64 // token of the entry's current place in the due heap
}

// NewOutbox returns an outbox delivering through transport, with the
// records found in opts.State (pending ones are resumed by Run).
func NewOutbox(ctx context.Context, transport Transport, opts OutboxOptions) (*Outbox, error) {
	if transport == nil {
		return nil, errors.New("agreement: outbox: transport is nil")
	}
	o := &Outbox{
		transport:   transport,
		state:       opts.State,
		maxAttempts: opts.MaxAttempts,
		backoff:     opts.Backoff,
		maxBackoff:  opts.MaxBackoff,
		senders:     opts.Senders,
		clock:       opts.Clock,
		log:         opts.Logger,
		wake:        make(chan struct{}, 1),
		recs:        map[string]*outboxEntry{},
	}
	if o.state == nil {
		o.state = NewMemoryOutboxState()
	}
	if o.maxAttempts <= 0 {
		o.maxAttempts = DefaultMaxAttempts
	}
	if o.backoff <= 0 {
		o.backoff = DefaultBackoff
	}
	if o.maxBackoff <= 0 {
		o.maxBackoff = DefaultMaxBackoff
	}
	o.maxBackoff = max(o.maxBackoff, o.backoff)
	if o.senders <= 0 {
		o.senders = DefaultSenders
	}
	if o.clock == nil {
		o.clock = clockwork.NewRealClock()
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	recs, err := o.state.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("agreement: outbox: loading state: %w", err)
	}
	resumed := 0
	for _, r := range recs {
		e := &outboxEntry{rec: r}
		o.recs[r.AgreementID] = e
		if r.Status == StatusPending {
			o.schedule(e, r.NextAttempt)
			resumed++
		}
	}
	if resumed > 0 {
		o.log.Info("outbox resumed pending updates", slog.Int("pending", resumed))
	}
	return o, nil
}

// Queue adds u for delivery. If the agreement has a pending update, u
// supersedes it: for two secrets updates the result carries the secrets of
// both (u's win where both have one), otherwise u replaces it. The merged
// update starts afresh: attempts reset and it is due now. Queue returns an
// error, and changes nothing, if u is malformed or the state cannot save it.
func (o *Outbox) Queue(ctx context.Context, u Update) error {
	if u.AgreementID == "" {
		return errors.New("agreement: outbox: update has no agreement id")
	}
	if u.Kind == "" {
		return fmt.Errorf("agreement: outbox: update for agreement %s has no kind", u.AgreementID)
	}
	if u.Kind == UpdateKindSecrets {
		if _, err := u.Secrets(); err != nil {
			return fmt.Errorf("agreement: outbox: %w", err)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock.Now()
	next := OutboxRecord{AgreementID: u.AgreementID, Update: u, Generation: 1, Status: StatusPending, NextAttempt: now, UpdatedAt: now}
	superseded := false
	if e, ok := o.recs[u.AgreementID]; ok {
		next.Generation = e.rec.Generation + 1
		next.Sequence = e.rec.Sequence
		if e.rec.Status == StatusPending {
			merged, err := supersede(e.rec.Update, u)
			if err != nil {
				return fmt.Errorf("agreement: outbox: %w", err)
			}
			next.Update = merged
			superseded = true
		}
	}
	next.Update.Payload = bytes.Clone(next.Update.Payload)
	if err := o.state.Save(ctx, next); err != nil {
		return fmt.Errorf("agreement: outbox: saving update for agreement %s: %w", u.AgreementID, err)
	}
	e, ok := o.recs[u.AgreementID]
	if !ok {
		e = &outboxEntry{}
		o.recs[u.AgreementID] = e
	}
	e.rec = next
	if !e.inflight {
		o.schedule(e, now)
	} // else: rescheduled when the delivery in flight returns
	o.log.Debug("outbox queued update", slog.String("agreement", u.AgreementID), slog.String("kind", next.Update.Kind),
		slog.Uint64("generation", next.Generation), slog.Bool("superseded", superseded))
	o.signal()
	return nil
}

// supersede returns the update that replaces pending older by newer.
func supersede(older, newer Update) (Update, error) {
	if older.Kind != UpdateKindSecrets || newer.Kind != UpdateKindSecrets {
		return newer, nil
	}
	a, err := older.Secrets()
	if err != nil {
		return Update{}, err
	}
	b, err := newer.Secrets()
	if err != nil {
		return Update{}, err
	}
	for _, sb := range b.Services {
		i := slices.IndexFunc(a.Services, func(sa ServiceSecrets) bool { return sa.Service == sb.Service })
		if i < 0 {
			a.Services = append(a.Services, sb)
			continue
		}
		if a.Services[i].Secrets == nil {
			a.Services[i].Secrets = map[string]SecretDetails{}
		}
		for name, d := range sb.Secrets {
			a.Services[i].Secrets[name] = d
		}
	}
	return NewSecretsUpdate(newer.AgreementID, a)
}

// Lookup returns a copy of the agreement's record, without the payload.
func (o *Outbox) Lookup(agreementID string) (OutboxRecord, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.recs[agreementID]
	if !ok {
		return OutboxRecord{}, false
	}
	return e.rec.clone(false), true
}

// Records returns a copy of every record, without payloads, sorted by
// agreement id.
func (o *Outbox) Records() []OutboxRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]OutboxRecord, 0, len(o.recs))
	for _, e := range o.recs {
		out = append(out, e.rec.clone(false))
	}
	slices.SortFunc(out, func(a, b OutboxRecord) int { return strings.Compare(a.AgreementID, b.AgreementID) })
	return out
}

// Forget drops the agreement's record, pending or not: the agreement has
// ended. A delivery in flight finishes but its outcome is not recorded.
func (o *Outbox) Forget(ctx context.Context, agreementID string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.state.Delete(ctx, agreementID); err != nil {
		return fmt.Errorf("agreement: outbox: forgetting agreement %s: %w", agreementID, err)
	}
	delete(o.recs, agreementID) // its heap item goes stale and is skipped
	return nil
}

// Run delivers pending updates until ctx is done, then waits for the
// deliveries in flight and returns ctx.Err(). Only one Run may be active.
func (o *Outbox) Run(ctx context.Context) error {
	if !o.running.CompareAndSwap(false, true) {
		return errors.New("agreement: outbox: Run is already active")
	}
	defer o.running.Store(false)

	jobs := make(chan job, o.senders)
	var wg sync.WaitGroup
	for range o.senders {
		wg.Go(func() {
			for d := range jobs {
				o.deliver(ctx, d)
			}
		})
	}
	defer func() {
		close(jobs)
		wg.Wait()
	}()

	for {
		ready, wait := o.take(ctx)
		for _, d := range ready {
			jobs <- d // never blocks: take hands out at most the free senders
		}
		var timer clockwork.Timer
		var fire <-chan time.Time
		if wait > 0 {
			timer = o.clock.NewTimer(wait)
			fire = timer.Chan()
		}
		select {
		case <-ctx.Done():
		case <-o.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// job is one attempt handed to a sender.
type job struct {
	entry      *outboxEntry // the entry must still be the agreement's when the reply comes
	delivery   Delivery
	generation uint64
}

// take marks due records in flight and returns them (at most as many as
// there are free senders), and how long until the next record is due
// (0: nothing scheduled, or no sender free).
func (o *Outbox) take(ctx context.Context) ([]job, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock.Now()
	var ready []job
	for o.due.Len() > 0 {
		it := o.due[0]
		e, ok := o.recs[it.id]
		if !ok || e.sched != it.seq || e.inflight || e.rec.Status != StatusPending {
			heap.Pop(&o.due) // stale
			continue
		}
		if it.at.After(now) {
			if o.busy >= o.senders {
				return ready, 0
			}
			return ready, it.at.Sub(now)
		}
		if o.busy >= o.senders {
			return ready, 0 // a sender finishing wakes the loop
		}
		heap.Pop(&o.due)
		if e.rec.Attempts >= o.maxAttempts {
			// Only after a restart that interrupted the last attempt.
			o.finish(ctx, e, StatusUnacknowledged, "no reply after the last attempt")
			continue
		}
		e.rec.Attempts++
		e.rec.Sequence = nextSequence(e.rec.Sequence, now)
		e.rec.UpdatedAt = now
		e.inflight = true
		o.busy++
		o.save(ctx, e) // before sending: a restart never reuses the sequence
		ready = append(ready, job{
			entry:      e,
			delivery:   Delivery{Update: e.rec.Update, Sequence: e.rec.Sequence, Attempt: e.rec.Attempts},
			generation: e.rec.Generation,
		})
	}
	return ready, 0
}

// nextSequence returns the envelope sequence after last: see
// OutboxRecord.Sequence.
func nextSequence(last uint64, now time.Time) uint64 {
	return max(last+1, uint64(max(now.UnixMicro(), 0)))
}

// deliver runs one attempt and records its outcome.
func (o *Outbox) deliver(ctx context.Context, j job) {
	d := j.delivery
	id := d.Update.AgreementID
	var reply Reply
	err := ctx.Err() // a job left in the queue at shutdown is not sent
	if err == nil {
		reply, err = o.transport.Deliver(ctx, d)
	}
	if err == nil {
		err = checkReply(reply, d)
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	defer o.signal()
	o.busy--
	e := j.entry
	if o.recs[id] != e {
		return // forgotten meanwhile
	}
	e.inflight = false
	now := o.clock.Now()
	switch {
	case err != nil && ctx.Err() != nil:
		// Shutting down: the attempt does not count; it is due again at
		// once, in this process or after a restart.
		e.rec.Attempts--
		o.schedule(e, now)
		o.save(context.WithoutCancel(ctx), e)
	case e.rec.Generation != j.generation:
		// Superseded while in flight: the newer content is due now,
		// whatever the agent answered to the older.
		o.log.Debug("outbox update superseded in flight", slog.String("agreement", id))
		o.schedule(e, now)
	case err != nil && d.Attempt >= o.maxAttempts:
		o.finish(ctx, e, StatusUnacknowledged, "no reply: "+cleanText(err.Error()))
	case err != nil:
		wait := o.backoffAfter(d.Attempt)
		e.rec.NextAttempt = now.Add(wait)
		e.rec.Reason = "no reply: " + cleanText(err.Error())
		o.save(ctx, e)
		o.schedule(e, e.rec.NextAttempt)
		o.log.Debug("outbox delivery unanswered; will retry", slog.String("agreement", id),
			slog.Int("attempt", d.Attempt), slog.Duration("retryIn", wait))
	case reply.Accepted:
		o.finish(ctx, e, StatusAccepted, "")
	default:
		o.finish(ctx, e, StatusRejected, cleanText(reply.Reason))
	}
}

// checkReply returns an error unless r answers the attempt d: it is for d's
// agreement and, when it names the message it answers (InReplyTo), names
// d's envelope. A reply to an earlier attempt, perhaps of an update that
// has been superseded since, says nothing about this one. Replies that name
// nothing (from transports without envelopes) are taken as answers.
func checkReply(r Reply, d Delivery) error {
	if r.AgreementID != d.Update.AgreementID {
		return fmt.Errorf("reply is for agreement %q", cleanText(r.AgreementID))
	}
	if r.InReplyTo != (MessageRef{}) && r.InReplyTo != (MessageRef{Type: TypeUpdate, Sequence: d.Sequence}) {
		return fmt.Errorf("reply answers %s %d, not update %d: a stale reply to an earlier or superseded update",
			cleanText(string(r.InReplyTo.Type)), r.InReplyTo.Sequence, d.Sequence)
	}
	return nil
}

// finish records a final status and drops the payload. o.mu is held.
func (o *Outbox) finish(ctx context.Context, e *outboxEntry, status UpdateStatus, reason string) {
	e.rec.Status = status
	e.rec.Reason = reason
	e.rec.NextAttempt = time.Time{}
	e.rec.UpdatedAt = o.clock.Now()
	e.rec.Update.Payload = nil
	o.save(ctx, e)
	attrs := []any{slog.String("agreement", e.rec.AgreementID), slog.String("kind", e.rec.Update.Kind),
		slog.String("status", status.String()), slog.Int("attempts", e.rec.Attempts)}
	switch status {
	case StatusAccepted:
		o.log.Info("agreement update accepted", attrs...)
	default:
		o.log.Warn("agreement update not applied; agreement kept", append(attrs, slog.String("reason", reason))...)
	}
}

// save writes e's record to the state; a failure is logged, the in-memory
// record stays authoritative. o.mu is held, so saves reach the state in
// the order of the changes.
func (o *Outbox) save(ctx context.Context, e *outboxEntry) {
	if err := o.state.Save(ctx, e.rec); err != nil {
		o.log.Error("outbox could not save its state", slog.String("agreement", e.rec.AgreementID), slog.String("err", err.Error()))
	}
}

// schedule (re)places e in the due heap at time at. o.mu is held.
func (o *Outbox) schedule(e *outboxEntry, at time.Time) {
	o.schedSeq++
	e.sched = o.schedSeq
	e.rec.NextAttempt = at
	heap.Push(&o.due, dueItem{at: at, id: e.rec.AgreementID, seq: e.sched})
}

// backoffAfter returns the wait after the given failed attempt.
func (o *Outbox) backoffAfter(attempt int) time.Duration {
	d := o.backoff
	for i := 1; i < attempt && d < o.maxBackoff; i++ {
		d *= 2
	}
	return min(d, o.maxBackoff)
}

func (o *Outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// cleanText makes untrusted text (an agent's reason, a transport error)
// safe to keep and log: valid UTF-8, no control characters, bounded.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxRecordedReason {
		cut := maxRecordedReason
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// dueHeap orders scheduled records by due time. Items whose seq no longer
// matches their entry are stale and skipped.
type dueHeap []dueItem

type dueItem struct {
	at  time.Time
	id  string
	seq uint64
}

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
