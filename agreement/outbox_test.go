package agreement_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/testgate"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

const waitFor = 10 * time.Second

// fakeAgent is a Transport answering for agents in process, without
// envelopes (SealingTransport is tested on its own and end to end). respond
// decides each reply; gate holds every delivery while held.
type fakeAgent struct {
	clock   clockwork.Clock
	respond func(d agreement.Delivery) (agreement.Reply, error)

	gate testgate.Gate

	mu          sync.Mutex
	calls       map[string][]agreement.Delivery
	times       map[string][]time.Time
	inflight    int
	maxInflight int
}

func newFakeAgent(clock clockwork.Clock, respond func(agreement.Delivery) (agreement.Reply, error)) *fakeAgent {
	return &fakeAgent{clock: clock, respond: respond, calls: map[string][]agreement.Delivery{}, times: map[string][]time.Time{}}
}

// accept answers as an agent behind a transport without envelopes does:
// accepted, naming no message.
func accept(d agreement.Delivery) (agreement.Reply, error) {
	return agreement.Reply{Version: agreement.MessageVersion, AgreementID: d.Update.AgreementID, Accepted: true}, nil
}

func silent(agreement.Delivery) (agreement.Reply, error) {
	return agreement.Reply{}, errors.New("no reply within 30s")
}

func (f *fakeAgent) Deliver(ctx context.Context, d agreement.Delivery) (agreement.Reply, error) {
	id := d.Update.AgreementID
	f.mu.Lock()
	f.calls[id] = append(f.calls[id], d)
	f.times[id] = append(f.times[id], f.clock.Now())
	f.inflight++
	f.maxInflight = max(f.maxInflight, f.inflight)
	respond := f.respond
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	if err := f.gate.Wait(ctx); err != nil {
		return agreement.Reply{}, err
	}
	return respond(d)
}

func (f *fakeAgent) setRespond(r func(agreement.Delivery) (agreement.Reply, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.respond = r
}

func (f *fakeAgent) deliveries(id string) []agreement.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls[id])
}

func (f *fakeAgent) updates(id string) []agreement.Update {
	var out []agreement.Update
	for _, d := range f.deliveries(id) {
		out = append(out, d.Update)
	}
	return out
}

func (f *fakeAgent) count(id string) int { return len(f.deliveries(id)) }

func (f *fakeAgent) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += len(c)
	}
	return n
}

// secretsUpdate builds a secrets update: service URL → secret name → value.
func secretsUpdate(t testing.TB, id string, services map[string]map[string]string) agreement.Update {
	t.Helper()
	var su agreement.SecretsUpdate
	for _, url := range slices.Sorted(maps.Keys(services)) {
		ss := agreement.ServiceSecrets{Service: agreement.ServiceRef{Org: "org", URL: url}, Secrets: map[string]agreement.SecretDetails{}}
		for name, v := range services[url] {
			ss.Secrets[name] = agreement.SecretDetails{Data: secretstore.Data{"value": []byte(v)}}
		}
		su.Services = append(su.Services, ss)
	}
	u, err := agreement.NewSecretsUpdate(id, su)
	require.NoError(t, err)
	return u
}

// contents decodes a secrets update back to service URL → name → value.
func contents(t testing.TB, u agreement.Update) map[string]map[string]string {
	t.Helper()
	su, err := u.Secrets()
	require.NoError(t, err)
	out := map[string]map[string]string{}
	for _, ss := range su.Services {
		out[ss.Service.URL] = map[string]string{}
		for name, d := range ss.Secrets {
			out[ss.Service.URL][name] = string(d.Data["value"])
		}
	}
	return out
}

type outboxRun struct {
	o      *agreement.Outbox
	cancel context.CancelFunc
	done   chan error
}

func runOutbox(t *testing.T, o *agreement.Outbox) *outboxRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &outboxRun{o: o, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- o.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *outboxRun) stop(t *testing.T) {
	r.cancel()
	select {
	case <-r.done:
		r.done <- nil // later stops return at once
	case <-time.After(waitFor):
		t.Error("outbox Run did not return after cancel")
	}
}

func newOutbox(t *testing.T, agent *fakeAgent, opts agreement.OutboxOptions) *agreement.Outbox {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = agent.clock
	}
	o, err := agreement.NewOutbox(context.Background(), agent, opts)
	require.NoError(t, err)
	return o
}

// advanceWhenWaiting advances clock by d once something waits on it, such
// as the outbox on its retry timer or the watcher on its ticker.
func advanceWhenWaiting(t *testing.T, clock *clockwork.FakeClock, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, clock.BlockUntilContext(ctx, 1), "something waits on the clock")
	clock.Advance(d)
}

func status(o *agreement.Outbox, id string) agreement.UpdateStatus {
	r, _ := o.Lookup(id)
	return r.Status
}

func TestOutboxAccepted(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	agent := newFakeAgent(clock, accept)
	state := agreement.NewMemoryOutboxState()
	o := newOutbox(t, agent, agreement.OutboxOptions{State: state})
	runOutbox(t, o)

	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"svc": {"db": "s3cret"}})))
	require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusAccepted }, waitFor, time.Millisecond)
	rec, ok := o.Lookup("ag1")
	require.True(t, ok)
	assert.Equal(t, 1, rec.Attempts)
	assert.Empty(t, rec.Reason)
	assert.Nil(t, rec.Update.Payload, "Lookup never returns the payload")
	assert.Equal(t, agreement.UpdateKindSecrets, rec.Update.Kind)
	assert.Equal(t, map[string]map[string]string{"svc": {"db": "s3cret"}}, contents(t, agent.updates("ag1")[0]))

	saved, err := state.Load(ctx)
	require.NoError(t, err)
	require.Len(t, saved, 1)
	assert.Equal(t, agreement.StatusAccepted, saved[0].Status)
	assert.Nil(t, saved[0].Update.Payload, "a finished record keeps no secret values")

	clock.Advance(time.Hour)
	assert.Never(t, func() bool { return agent.count("ag1") > 1 }, 50*time.Millisecond, 5*time.Millisecond, "done means done")
}

func TestOutboxRejectedIsRecordedNotRetried(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	reason := "update kind \"secrets\" refused by node policy\n\x1b[31m" + strings.Repeat("x", 1000) + "\xff"
	agent := newFakeAgent(clock, func(d agreement.Delivery) (agreement.Reply, error) {
		return agreement.Reply{Version: 1, AgreementID: d.Update.AgreementID, Accepted: false, Reason: reason}, nil
	})
	o := newOutbox(t, agent, agreement.OutboxOptions{})
	runOutbox(t, o)
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"svc": {"db": "v"}})))
	require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusRejected }, waitFor, time.Millisecond)
	rec, _ := o.Lookup("ag1")
	assert.True(t, strings.HasPrefix(rec.Reason, `update kind "secrets" refused by node policy `), rec.Reason)
	assert.LessOrEqual(t, len(rec.Reason), 256+3, "an agent's reason is bounded")
	assert.NotContains(t, rec.Reason, "\n")
	assert.NotContains(t, rec.Reason, "\x1b")
	assert.Equal(t, 1, rec.Attempts)
	clock.Advance(time.Hour)
	assert.Never(t, func() bool { return agent.count("ag1") > 1 }, 50*time.Millisecond, 5*time.Millisecond, "a rejection is final")
}

func TestOutboxSilentAgent(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	start := clock.Now()
	agent := newFakeAgent(clock, silent)
	o := newOutbox(t, agent, agreement.OutboxOptions{MaxAttempts: 4, Backoff: 10 * time.Second, MaxBackoff: 25 * time.Second})
	runOutbox(t, o)
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"svc": {"db": "v"}})))

	// Waits after attempts 1, 2, 3: 10s, 20s, then 40s capped at 25s.
	for i, wait := range []time.Duration{10 * time.Second, 20 * time.Second, 25 * time.Second} {
		require.Eventually(t, func() bool { return agent.count("ag1") == i+1 }, waitFor, time.Millisecond)
		waitCtx, cancel := context.WithTimeout(ctx, waitFor)
		require.NoError(t, clock.BlockUntilContext(waitCtx, 1), "the outbox waits on its retry timer")
		cancel()
		assert.Equal(t, agreement.StatusPending, status(o, "ag1"))
		clock.Advance(wait - time.Second)
		assert.Never(t, func() bool { return agent.count("ag1") > i+1 }, 50*time.Millisecond, 5*time.Millisecond, "no retry before the backoff")
		clock.Advance(time.Second)
	}
	require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusUnacknowledged }, waitFor, time.Millisecond)
	rec, _ := o.Lookup("ag1")
	assert.Equal(t, 4, rec.Attempts)
	assert.Contains(t, rec.Reason, "no reply within 30s")
	agent.mu.Lock()
	times := agent.times["ag1"]
	agent.mu.Unlock()
	var offsets []time.Duration
	for _, at := range times {
		offsets = append(offsets, at.Sub(start))
	}
	assert.Equal(t, []time.Duration{0, 10 * time.Second, 30 * time.Second, 55 * time.Second}, offsets)

	clock.Advance(time.Hour)
	assert.Never(t, func() bool { return agent.count("ag1") > 4 }, 50*time.Millisecond, 5*time.Millisecond, "gave up after MaxAttempts")
}

func TestOutboxWrongReplyIsNoReply(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	agent := newFakeAgent(clock, func(agreement.Delivery) (agreement.Reply, error) {
		return agreement.Reply{AgreementID: "someone-else", Accepted: true}, nil
	})
	o := newOutbox(t, agent, agreement.OutboxOptions{MaxAttempts: 2, Backoff: time.Second})
	runOutbox(t, o)
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"svc": {"db": "v"}})))
	require.Eventually(t, func() bool { return agent.count("ag1") == 1 }, waitFor, time.Millisecond)
	require.Eventually(t, func() bool { r, _ := o.Lookup("ag1"); return r.Reason != "" }, waitFor, time.Millisecond)
	assert.Equal(t, agreement.StatusPending, status(o, "ag1"), "a reply for another agreement does not count")
	clock.Advance(time.Second)
	require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusUnacknowledged }, waitFor, time.Millisecond)
	rec, _ := o.Lookup("ag1")
	assert.Contains(t, rec.Reason, `reply is for agreement "someone-else"`)
}

func TestOutboxSupersedesInFlight(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	agent := newFakeAgent(clock, accept)
	agent.gate.Hold()
	o := newOutbox(t, agent, agreement.OutboxOptions{})
	runOutbox(t, o)

	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v1"}})))
	require.Eventually(t, func() bool { return agent.count("ag1") == 1 }, waitFor, time.Millisecond)
	// Two newer updates while the first is in flight.
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"api": "a1"}})))
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v2"}, "worker": {"q": "q1"}})))
	agent.gate.Release()

	require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusAccepted && agent.count("ag1") == 2 }, waitFor, time.Millisecond)
	assert.Never(t, func() bool { return agent.count("ag1") > 2 }, 50*time.Millisecond, 5*time.Millisecond)
	sent := agent.updates("ag1")
	assert.Equal(t, map[string]map[string]string{"web": {"db": "v1"}}, contents(t, sent[0]))
	assert.Equal(t, map[string]map[string]string{"web": {"db": "v2", "api": "a1"}, "worker": {"q": "q1"}}, contents(t, sent[1]),
		"the newest value of each secret, and nothing the older updates carried is lost")
	rec, _ := o.Lookup("ag1")
	assert.Equal(t, uint64(3), rec.Generation)
	assert.Equal(t, 1, rec.Attempts)
}

func TestOutboxSupersedesWhileWaiting(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	agent := newFakeAgent(clock, silent)
	o := newOutbox(t, agent, agreement.OutboxOptions{MaxAttempts: 3, Backoff: time.Minute})
	runOutbox(t, o)
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v1"}})))
	require.Eventually(t, func() bool { return agent.count("ag1") == 1 }, waitFor, time.Millisecond)
	require.Eventually(t, func() bool { r, _ := o.Lookup("ag1"); return r.Reason != "" }, waitFor, time.Millisecond)

	agent.setRespond(accept)
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v2"}})))
	// Due at once: no clock advance needed.
	require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusAccepted }, waitFor, time.Millisecond)
	sent := agent.updates("ag1")
	require.Len(t, sent, 2)
	assert.Equal(t, map[string]map[string]string{"web": {"db": "v2"}}, contents(t, sent[1]))
	rec, _ := o.Lookup("ag1")
	assert.Equal(t, 1, rec.Attempts, "a superseding update starts with fresh attempts")
}

func TestOutboxOtherKindsReplace(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	agent := newFakeAgent(clock, accept)
	agent.gate.Hold()
	o := newOutbox(t, agent, agreement.OutboxOptions{})
	runOutbox(t, o)
	require.NoError(t, o.Queue(ctx, agreement.Update{Version: 1, AgreementID: "ag1", Kind: "config", Payload: []byte(`{"n":0}`)}))
	require.Eventually(t, func() bool { return agent.count("ag1") == 1 }, waitFor, time.Millisecond)
	require.NoError(t, o.Queue(ctx, agreement.Update{Version: 1, AgreementID: "ag1", Kind: "config", Payload: []byte(`{"n":1}`)}))
	require.NoError(t, o.Queue(ctx, agreement.Update{Version: 1, AgreementID: "ag1", Kind: "config", Payload: []byte(`{"n":2}`)}))
	agent.gate.Release()
	require.Eventually(t, func() bool { return agent.count("ag1") == 2 && status(o, "ag1") == agreement.StatusAccepted }, waitFor, time.Millisecond)
	assert.JSONEq(t, `{"n":2}`, string(agent.updates("ag1")[1].Payload))
}

func TestOutboxRestartResumes(t *testing.T) {
	cases := []struct {
		name string
		// interrupt leaves the first outbox's delivery unanswered (false)
		// or still in flight when it stops (true).
		inFlight     bool
		wantAttempts int // recorded before the restart
		advance      time.Duration
	}{
		{"retry pending", false, 1, time.Minute},
		{"delivery in flight at shutdown", true, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clock := clockwork.NewFakeClock()
			state := agreement.NewMemoryOutboxState()
			first := newFakeAgent(clock, silent)
			if c.inFlight {
				first.gate.Hold()
			}
			o1 := newOutbox(t, first, agreement.OutboxOptions{State: state, Backoff: time.Minute})
			run1 := runOutbox(t, o1)
			require.NoError(t, o1.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v1"}})))
			require.NoError(t, o1.Queue(ctx, secretsUpdate(t, "ag2", map[string]map[string]string{"web": {"db": "v1"}})))
			require.Eventually(t, func() bool { return first.total() == 2 }, waitFor, time.Millisecond)
			if c.inFlight {
				// Were the agbot to crash now, the state already holds the
				// sequence in flight, so no envelope sequence is reused.
				saved, err := state.Load(ctx)
				require.NoError(t, err)
				for _, rec := range saved {
					assert.Equal(t, first.deliveries(rec.AgreementID)[0].Sequence, rec.Sequence)
				}
			}
			if !c.inFlight {
				require.Eventually(t, func() bool {
					a, _ := o1.Lookup("ag1")
					b, _ := o1.Lookup("ag2")
					return a.Reason != "" && b.Reason != ""
				}, waitFor, time.Millisecond)
			}
			run1.stop(t) // the agbot restarts

			second := newFakeAgent(clock, accept)
			o2 := newOutbox(t, second, agreement.OutboxOptions{State: state, Backoff: time.Minute})
			for _, id := range []string{"ag1", "ag2"} {
				rec, ok := o2.Lookup(id)
				require.True(t, ok, "resumed from the state")
				assert.Equal(t, agreement.StatusPending, rec.Status)
				assert.Equal(t, c.wantAttempts, rec.Attempts)
			}
			runOutbox(t, o2)
			if c.advance > 0 {
				advanceWhenWaiting(t, clock, c.advance)
			}
			require.Eventually(t, func() bool {
				return status(o2, "ag1") == agreement.StatusAccepted && status(o2, "ag2") == agreement.StatusAccepted
			}, waitFor, time.Millisecond)
			assert.Equal(t, map[string]map[string]string{"web": {"db": "v1"}}, contents(t, second.updates("ag1")[0]))
			assert.Equal(t, 1, second.count("ag1"))
		})
	}
}

func TestOutboxSendersBound(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	agent := newFakeAgent(clock, accept)
	agent.gate.Hold()
	o := newOutbox(t, agent, agreement.OutboxOptions{Senders: 3})
	runOutbox(t, o)
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	for _, id := range ids {
		require.NoError(t, o.Queue(ctx, secretsUpdate(t, id, map[string]map[string]string{"web": {"db": "v"}})))
	}
	require.Eventually(t, func() bool { return agent.total() == 3 }, waitFor, time.Millisecond)
	assert.Never(t, func() bool { return agent.total() > 3 }, 50*time.Millisecond, 5*time.Millisecond)
	agent.gate.Release()
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if status(o, id) != agreement.StatusAccepted {
				return false
			}
		}
		return true
	}, waitFor, time.Millisecond)
	agent.mu.Lock()
	assert.LessOrEqual(t, agent.maxInflight, 3)
	agent.mu.Unlock()
	assert.Equal(t, len(ids), agent.total())
	assert.Len(t, o.Records(), len(ids))
}

func TestOutboxForget(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	agent := newFakeAgent(clock, silent)
	state := agreement.NewMemoryOutboxState()
	o := newOutbox(t, agent, agreement.OutboxOptions{State: state})
	runOutbox(t, o)
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v"}})))
	require.Eventually(t, func() bool { return agent.count("ag1") == 1 }, waitFor, time.Millisecond)
	require.NoError(t, o.Forget(ctx, "ag1"))
	_, ok := o.Lookup("ag1")
	assert.False(t, ok)
	saved, err := state.Load(ctx)
	require.NoError(t, err)
	assert.Empty(t, saved)
	clock.Advance(time.Hour)
	assert.Never(t, func() bool { return agent.count("ag1") > 1 }, 50*time.Millisecond, 5*time.Millisecond)
	_, ok = o.Lookup("ag1")
	assert.False(t, ok, "the attempt in flight is not recorded after Forget")
}

type failingState struct{ agreement.OutboxState }

func (failingState) Save(context.Context, agreement.OutboxRecord) error {
	return errors.New("disk full")
}

func TestOutboxQueueRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	o := newOutbox(t, newFakeAgent(clock, accept), agreement.OutboxOptions{})
	cases := []struct {
		name    string
		u       agreement.Update
		wantErr string
	}{
		{"no agreement", agreement.Update{Kind: "secrets"}, "no agreement id"},
		{"no kind", agreement.Update{AgreementID: "a"}, "has no kind"},
		{"bad secrets payload", agreement.Update{AgreementID: "a", Kind: agreement.UpdateKindSecrets, Payload: []byte(`{"services":7}`)}, "malformed: agreement \"a\": secrets update"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.ErrorContains(t, o.Queue(ctx, c.u), c.wantErr)
			assert.Empty(t, o.Records())
		})
	}

	bad, err := agreement.NewOutbox(ctx, newFakeAgent(clock, accept), agreement.OutboxOptions{State: failingState{agreement.NewMemoryOutboxState()}})
	require.NoError(t, err)
	err = bad.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v"}}))
	assert.ErrorContains(t, err, "disk full")
	_, ok := bad.Lookup("ag1")
	assert.False(t, ok, "nothing half-written")

	_, err = agreement.NewOutbox(ctx, nil, agreement.OutboxOptions{})
	assert.ErrorContains(t, err, "transport is nil")
}

func TestOutboxRunTwice(t *testing.T) {
	ctx := context.Background()
	o := newOutbox(t, newFakeAgent(clockwork.NewFakeClock(), accept), agreement.OutboxOptions{})
	runOutbox(t, o)
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v"}})))
	require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusAccepted }, waitFor, time.Millisecond)
	assert.ErrorContains(t, o.Run(ctx), "already active")
}

func TestOutboxRecordPrintsNoPayload(t *testing.T) {
	u := secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "canary-value-123"}})
	rec := agreement.OutboxRecord{AgreementID: "ag1", Update: u, Status: agreement.StatusPending}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, rec)
		assert.NotContains(t, out, "canary")
		assert.NotContains(t, out, "Y2FuYXJ5", "nor its base64")
	}
	assert.Equal(t, "pending", agreement.StatusPending.String())
	assert.Equal(t, "UpdateStatus(0)", agreement.UpdateStatus(0).String())
}

// answering returns a responder that accepts each attempt with a reply
// naming the message ref(d) picks.
func answering(ref func(d agreement.Delivery) agreement.MessageRef) func(agreement.Delivery) (agreement.Reply, error) {
	return func(d agreement.Delivery) (agreement.Reply, error) {
		return agreement.Reply{Version: 1, AgreementID: d.Update.AgreementID, InReplyTo: ref(d), Accepted: true}, nil
	}
}

func TestOutboxReplyMustAnswerTheAttempt(t *testing.T) {
	cases := []struct {
		name   string
		ref    func(d agreement.Delivery) agreement.MessageRef
		want   agreement.UpdateStatus
		reason string
	}{
		{"names this attempt", func(d agreement.Delivery) agreement.MessageRef {
			return agreement.MessageRef{Type: agreement.TypeUpdate, Sequence: d.Sequence}
		}, agreement.StatusAccepted, ""},
		{"names nothing (transport without envelopes)", func(agreement.Delivery) agreement.MessageRef { return agreement.MessageRef{} },
			agreement.StatusAccepted, ""},
		{"names an earlier update", func(d agreement.Delivery) agreement.MessageRef {
			return agreement.MessageRef{Type: agreement.TypeUpdate, Sequence: d.Sequence - 1}
		}, agreement.StatusUnacknowledged, "a stale reply to an earlier or superseded update"},
		{"names a proposal", func(d agreement.Delivery) agreement.MessageRef {
			return agreement.MessageRef{Type: agreement.TypeProposal, Sequence: d.Sequence}
		}, agreement.StatusUnacknowledged, "reply answers proposal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			agent := newFakeAgent(clock, answering(c.ref))
			o := newOutbox(t, agent, agreement.OutboxOptions{MaxAttempts: 1})
			runOutbox(t, o)
			require.NoError(t, o.Queue(context.Background(), secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v"}})))
			require.Eventually(t, func() bool { return status(o, "ag1") == c.want }, waitFor, time.Millisecond)
			rec, _ := o.Lookup("ag1")
			assert.Contains(t, rec.Reason, c.reason)
		})
	}
}

// A reply to a superseded update, arriving late on the link in answer to
// the newer update's envelope, does not mark the newer update accepted.
func TestOutboxIgnoresReplyToSupersededUpdate(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	agent := newFakeAgent(clock, silent)
	o := newOutbox(t, agent, agreement.OutboxOptions{Backoff: time.Minute})
	runOutbox(t, o)
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v1"}})))
	require.Eventually(t, func() bool { r, _ := o.Lookup("ag1"); return r.Reason != "" }, waitFor, time.Millisecond)
	first := agent.deliveries("ag1")[0]

	// The agent's acceptance of v1 is what comes back for v2's envelope.
	agent.setRespond(answering(func(agreement.Delivery) agreement.MessageRef {
		return agreement.MessageRef{Type: agreement.TypeUpdate, Sequence: first.Sequence}
	}))
	require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v2"}})))
	require.Eventually(t, func() bool {
		r, _ := o.Lookup("ag1")
		return agent.count("ag1") == 2 && strings.Contains(r.Reason, "stale reply")
	}, waitFor, time.Millisecond)
	assert.Equal(t, agreement.StatusPending, status(o, "ag1"), "v2 is not taken as accepted")

	// The agent's own answer to the resend is.
	agent.setRespond(answering(func(d agreement.Delivery) agreement.MessageRef {
		return agreement.MessageRef{Type: agreement.TypeUpdate, Sequence: d.Sequence}
	}))
	advanceWhenWaiting(t, clock, time.Minute)
	require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusAccepted }, waitFor, time.Millisecond)
	sent := agent.deliveries("ag1")
	require.Len(t, sent, 3)
	assert.Equal(t, map[string]map[string]string{"web": {"db": "v2"}}, contents(t, sent[2].Update))
}

func TestOutboxSequencesKeepIncreasing(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	state := agreement.NewMemoryOutboxState()
	var seqs []uint64
	collect := func(a *fakeAgent) {
		for _, d := range a.deliveries("ag1") {
			seqs = append(seqs, d.Sequence)
		}
	}
	queueAndFinish := func(o *agreement.Outbox, a *fakeAgent, value string) {
		t.Helper()
		r := runOutbox(t, o)
		require.NoError(t, o.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": value}})))
		require.Eventually(t, func() bool { return status(o, "ag1") == agreement.StatusAccepted }, waitFor, time.Millisecond)
		r.stop(t)
		collect(a)
	}

	// One outbox: a retry, then a newer update.
	a1 := newFakeAgent(clock, silent)
	o1 := newOutbox(t, a1, agreement.OutboxOptions{State: state, Backoff: time.Minute})
	r1 := runOutbox(t, o1)
	require.NoError(t, o1.Queue(ctx, secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "v1"}})))
	require.Eventually(t, func() bool { r, _ := o1.Lookup("ag1"); return r.Reason != "" }, waitFor, time.Millisecond)
	a1.setRespond(accept)
	advanceWhenWaiting(t, clock, time.Minute)
	require.Eventually(t, func() bool { return status(o1, "ag1") == agreement.StatusAccepted }, waitFor, time.Millisecond)
	r1.stop(t)
	queueAndFinish(o1, a1, "v2") // collects a1's three deliveries

	// Restart over the same state, the clock standing still: the state
	// carries the sequence on.
	a2 := newFakeAgent(clock, accept)
	queueAndFinish(newOutbox(t, a2, agreement.OutboxOptions{State: state}), a2, "v3")

	// Restart with the state lost: the clock carries it on.
	clock.Advance(time.Second)
	a3 := newFakeAgent(clock, accept)
	queueAndFinish(newOutbox(t, a3, agreement.OutboxOptions{}), a3, "v4")

	require.Len(t, seqs, 5)
	for i := 1; i < len(seqs); i++ {
		assert.Greater(t, seqs[i], seqs[i-1], "sequence %d of %v", i, seqs)
	}
}

func TestDeliveryPrintsNoPayload(t *testing.T) {
	d := agreement.Delivery{Update: secretsUpdate(t, "ag1", map[string]map[string]string{"web": {"db": "canary-value-123"}}), Sequence: 9, Attempt: 2}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, d)
		assert.NotContains(t, out, "canary")
		assert.NotContains(t, out, "Y2FuYXJ5", "nor its base64")
	}
}
