package agreement_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/edgesecrets/edgesecrets/internal/logtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// recordingQueue is an UpdateQueue that records what it is given.
type recordingQueue struct {
	mu      sync.Mutex
	queued  []agreement.Update
	forgot  []string
	failFor map[string]bool // agreement ids whose Queue fails
}

func (q *recordingQueue) Queue(_ context.Context, u agreement.Update) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failFor[u.AgreementID] {
		return errors.New("state unavailable")
	}
	q.queued = append(q.queued, u)
	return nil
}

func (q *recordingQueue) Forget(_ context.Context, id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.forgot = append(q.forgot, id)
	return nil
}

// take returns and clears the queued updates, keyed by agreement.
func (q *recordingQueue) take(t *testing.T) map[string]map[string]map[string]string {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string]map[string]map[string]string{}
	for _, u := range q.queued {
		require.NotContains(t, out, u.AgreementID, "one update per agreement per rotation")
		out[u.AgreementID] = contents(t, u)
	}
	q.queued = nil
	return out
}

// flakyReader fails the next n Gets.
type flakyReader struct {
	*secretstore.Reader
	mu   sync.Mutex
	fail int
}

func (r *flakyReader) Get(ctx context.Context, name string) (*secretstore.Secret, error) {
	r.mu.Lock()
	fail := r.fail > 0
	r.fail--
	r.mu.Unlock()
	if fail {
		return nil, secretstore.NewError(secretstore.OpGet, name, secretstore.ErrUnavailable, nil)
	}
	return r.Reader.Get(ctx, name)
}

type cancelCall struct {
	agreement string
	rev       agreement.Revocation
}

type trackerEnv struct {
	t       *testing.T
	mem     *memory.Store
	mon     *secretstore.Monitor
	reader  *flakyReader
	watcher *secretstore.Watcher
	queue   *recordingQueue
	clock   *clockwork.FakeClock
	tracker *agreement.Tracker
	logs    *logtest.Buffer

	mu      sync.Mutex
	cancels []cancelCall
	retries []string
}

func newTrackerEnv(t *testing.T, grace time.Duration) *trackerEnv {
	mem := memory.New()
	return newTrackerEnvOver(t, grace, mem, mem)
}

// newTrackerEnvOver returns an env whose agbot reads backend, a view of
// mem (the store the tests write to).
func newTrackerEnvOver(t *testing.T, grace time.Duration, mem *memory.Store, backend secretstore.Store) *trackerEnv {
	e := &trackerEnv{t: t, mem: mem, queue: &recordingQueue{}, clock: clockwork.NewFakeClock()}
	var logger *slog.Logger
	logger, e.logs = logtest.NewLogger()
	e.mon = secretstore.NewMonitor(backend)
	e.reader = &flakyReader{Reader: secretstore.NewReader(e.mon, secretstore.ReaderOptions{TTL: time.Hour})}
	var err error
	e.watcher, err = secretstore.NewWatcher(e.mon, secretstore.WatcherOptions{Clock: e.clock})
	require.NoError(t, err)
	e.tracker, err = agreement.NewTracker(agreement.TrackerOptions{
		Reader:      e.reader,
		Watcher:     e.watcher,
		Outbox:      e.queue,
		GracePeriod: grace,
		Clock:       e.clock,
		Logger:      logger,
		Cancel: func(_ context.Context, id string, r agreement.Revocation) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.cancels = append(e.cancels, cancelCall{id, r})
		},
		Retry: func(_ context.Context, dep string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.retries = append(e.retries, dep)
		},
	})
	require.NoError(t, err)
	t.Cleanup(e.tracker.Close)
	return e
}

// cycle runs one watcher cycle through the tracker.
func (e *trackerEnv) cycle() []secretstore.Event {
	ctx := context.Background()
	ev := e.watcher.Poll(ctx).Events
	e.tracker.HandleEvents(ctx, ev)
	return ev
}

func (e *trackerEnv) put(name, value string) {
	_, err := e.mem.Put(context.Background(), &secretstore.Secret{Name: name, Data: secretstore.Data{"value": []byte(value)}}, secretstore.PutOptions{})
	require.NoError(e.t, err)
}

func (e *trackerEnv) cancelled() []cancelCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.cancels)
}

func (e *trackerEnv) retried() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.retries)
}

func svc(url string, secrets map[string]string) agreement.ServiceBinding {
	sb := agreement.ServiceBinding{Service: agreement.ServiceRef{Org: "org", URL: url}, Secrets: map[string]agreement.BoundSecret{}}
	for name, vault := range secrets {
		sb.Secrets[name] = agreement.BoundSecret{VaultSecret: vault}
	}
	return sb
}

func TestTrackerRegisterValidates(t *testing.T) {
	e := newTrackerEnv(t, 0)
	bad := agreement.ServiceBinding{Service: agreement.ServiceRef{Org: "org", URL: "web"}, Secrets: map[string]agreement.BoundSecret{
		"a/b":                    {VaultSecret: "ok"},
		"..":                     {VaultSecret: "ok"},
		"c":                      {VaultSecret: "../escape"},
		"d":                      {VaultSecret: "ok", Format: "yaml"},
		"e":                      {VaultSecret: ""},
		"f\x1b":                  {VaultSecret: "ok"},
		strings.Repeat("g", 256): {VaultSecret: "ok"},
	}}
	noOrg := agreement.ServiceBinding{Service: agreement.ServiceRef{URL: "worker"}}
	err := e.tracker.Register("", []agreement.ServiceBinding{bad, svc("web", nil), noOrg})
	require.Error(t, err)
	for _, want := range []string{
		"agreement id is empty",
		`service org/web is listed twice`,
		`secret name "a/b" is not a single file name`,
		`secret name ".." is not a single file name`,
		`secret "c" is bound to an invalid store secret name "../escape"`,
		`secret "d" has unknown format "yaml"`,
		`secret "e" is bound to an invalid store secret name ""`,
		`secret name "f\x1b" is not a single file name: it contains a control character`,
		`is not a single file name: it is longer than 255 bytes`,
		`service "/worker": org and url are required`,
	} {
		assert.ErrorContains(t, err, want)
	}
	assert.Empty(t, e.watcher.Names(), "nothing watched when registration fails")

	err = e.tracker.Refused("", "../x")
	assert.ErrorContains(t, err, "deployment id is empty")
	assert.ErrorContains(t, err, `secret "../x"`)
	assert.ErrorContains(t, e.tracker.Refused("dep"), "no missing secret named")

	_, err = agreement.NewTracker(agreement.TrackerOptions{})
	assert.ErrorContains(t, err, "missing Reader, Watcher, Outbox")
}

func TestTrackerKeepsWatcherNamesInStep(t *testing.T) {
	ctx := context.Background()
	e := newTrackerEnv(t, 0)
	require.NoError(t, e.tracker.Register("a1", []agreement.ServiceBinding{svc("web", map[string]string{"db": "x", "api": "y"})}))
	require.NoError(t, e.tracker.Register("a2", []agreement.ServiceBinding{svc("web", map[string]string{"db": "y"}), svc("worker", map[string]string{"q": "z"})}))
	assert.Equal(t, []string{"x", "y", "z"}, e.watcher.Names())
	assert.Equal(t, []string{"a1", "a2"}, e.tracker.Agreements("y"))

	require.NoError(t, e.tracker.Register("a1", []agreement.ServiceBinding{svc("web", map[string]string{"db": "w"})}))
	assert.Equal(t, []string{"w", "y", "z"}, e.watcher.Names(), "re-registering replaces the bindings")
	assert.Equal(t, []string{"a2"}, e.tracker.Agreements("y"))

	require.NoError(t, e.tracker.Refused("dep1", "z", "v"))
	require.NoError(t, e.tracker.Unregister(ctx, "a2"))
	assert.Equal(t, []string{"v", "w", "z"}, e.watcher.Names(), "z is still needed by the refused deployment")
	assert.Equal(t, []string{"a2"}, e.queue.forgot, "the outbox record goes with the agreement")

	e.tracker.DropRefusal("dep1")
	require.NoError(t, e.tracker.Unregister(ctx, "a1"))
	assert.Empty(t, e.watcher.Names())
	require.NoError(t, e.tracker.Unregister(ctx, "never-registered"))
}

func TestTrackerRotation(t *testing.T) {
	e := newTrackerEnv(t, 0)
	for _, n := range []string{"s1", "s2", "s3", "s4"} {
		e.put(n, n+"-v1")
	}
	raw := svc("worker", map[string]string{"q": "s3"})
	raw.Secrets["q"] = agreement.BoundSecret{VaultSecret: "s3", Format: agreement.FormatRaw}
	require.NoError(t, e.tracker.Register("a1", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1", "api": "s2"})}))
	require.NoError(t, e.tracker.Register("a2", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1"}), raw}))
	require.NoError(t, e.tracker.Register("a3", []agreement.ServiceBinding{svc("web", map[string]string{"x": "s3", "y": "s3"})}))
	require.NoError(t, e.tracker.Register("a4", []agreement.ServiceBinding{svc("web", map[string]string{"z": "s4"})}))
	e.cycle()
	assert.Empty(t, e.queue.take(t), "first observations queue nothing")

	e.put("s1", "s1-v2")
	e.cycle()
	assert.Equal(t, map[string]map[string]map[string]string{
		"a1": {"web": {"db": "s1-v2"}},
		"a2": {"web": {"db": "s1-v2"}},
	}, e.queue.take(t), "exactly the agreements bound to s1, with only the s1 secrets")

	e.put("s1", "s1-v3")
	e.put("s3", "s3-v2")
	e.cycle()
	assert.Equal(t, map[string]map[string]map[string]string{
		"a1": {"web": {"db": "s1-v3"}},
		"a2": {"web": {"db": "s1-v3"}, "worker": {"q": "s3-v2"}},
		"a3": {"web": {"x": "s3-v2", "y": "s3-v2"}},
	}, e.queue.take(t), "two secrets rotated in one cycle: one update per agreement")

	e.queue.mu.Lock()
	e.queue.queued = nil
	e.queue.mu.Unlock()
	e.put("s3", "s3-v3")
	e.cycle()
	e.queue.mu.Lock()
	var a2 agreement.Update
	for _, u := range e.queue.queued {
		if u.AgreementID == "a2" {
			a2 = u
		}
	}
	e.queue.mu.Unlock()
	su, err := a2.Secrets()
	require.NoError(t, err)
	require.Len(t, su.Services, 1)
	assert.Equal(t, agreement.FormatRaw, su.Services[0].Secrets["q"].Format, "the binding's format travels with the secret")
	assert.Empty(t, e.cancelled())
}

func TestTrackerRevocation(t *testing.T) {
	e := newTrackerEnv(t, 0)
	e.put("s1", "v")
	e.put("s2", "v")
	require.NoError(t, e.tracker.Register("a1", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1"})}))
	require.NoError(t, e.tracker.Register("a2", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1", "api": "s2"})}))
	require.NoError(t, e.tracker.Register("a3", []agreement.ServiceBinding{svc("web", map[string]string{"api": "s2"})}))
	e.cycle()

	require.NoError(t, e.mem.Delete(context.Background(), "s1"))
	e.cycle()
	assert.Equal(t, []cancelCall{
		{"a1", agreement.Revocation{VaultSecret: "s1", Kind: secretstore.Deleted}},
		{"a2", agreement.Revocation{VaultSecret: "s1", Kind: secretstore.Deleted}},
	}, e.cancelled())
	e.cycle()
	assert.Len(t, e.cancelled(), 2, "a secret that stays deleted cancels once")

	e.tracker.HandleEvents(context.Background(), []secretstore.Event{{Kind: secretstore.Forbidden, Name: "s2", Err: secretstore.ErrPermission}})
	assert.Equal(t, []cancelCall{
		{"a2", agreement.Revocation{VaultSecret: "s2", Kind: secretstore.Forbidden}},
		{"a3", agreement.Revocation{VaultSecret: "s2", Kind: secretstore.Forbidden}},
	}, e.cancelled()[2:])
	assert.Empty(t, e.queue.take(t))
}

func TestTrackerGracePeriod(t *testing.T) {
	ctx := context.Background()
	const grace = time.Minute
	// revoked returns an env where s1, bound to the given agreements, was
	// deleted and its grace timer is running.
	revoked := func(t *testing.T, ids ...string) *trackerEnv {
		e := newTrackerEnv(t, grace)
		e.put("s1", "v1")
		for _, id := range ids {
			require.NoError(t, e.tracker.Register(id, []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1"})}))
		}
		e.cycle()
		require.NoError(t, e.mem.Delete(ctx, "s1"))
		e.cycle()
		waitCtx, cancel := context.WithTimeout(ctx, waitFor)
		defer cancel()
		require.NoError(t, e.clock.BlockUntilContext(waitCtx, 1))
		assert.Empty(t, e.cancelled(), "nothing cancelled during the grace period")
		return e
	}

	t.Run("back within the grace period: agreements kept", func(t *testing.T) {
		e := revoked(t, "a1")
		e.clock.Advance(grace - time.Second)
		e.put("s1", "v2") // replaced: UX-10, not UX-9
		ev := e.cycle()
		assert.Equal(t, []secretstore.EventKind{secretstore.Appeared, secretstore.Changed}, []secretstore.EventKind{ev[0].Kind, ev[1].Kind})
		e.clock.Advance(time.Hour)
		assert.Never(t, func() bool { return len(e.cancelled()) > 0 }, 50*time.Millisecond, 5*time.Millisecond)
		assert.Equal(t, map[string]map[string]map[string]string{"a1": {"web": {"db": "v2"}}}, e.queue.take(t),
			"the replacement is delivered as an update")
	})

	t.Run("not back: cancelled when the grace period ends", func(t *testing.T) {
		e := revoked(t, "a1", "a2")
		e.clock.Advance(grace - time.Second)
		e.cycle() // still deleted: the grace period is not restarted
		assert.Empty(t, e.cancelled())
		e.clock.Advance(time.Second)
		require.Eventually(t, func() bool { return len(e.cancelled()) == 2 }, waitFor, time.Millisecond)
		assert.Equal(t, []string{"a1", "a2"}, []string{e.cancelled()[0].agreement, e.cancelled()[1].agreement})
		e.clock.Advance(time.Hour)
		assert.Never(t, func() bool { return len(e.cancelled()) > 2 }, 50*time.Millisecond, 5*time.Millisecond)
	})

	t.Run("unregistered during the grace period: nothing to cancel", func(t *testing.T) {
		e := revoked(t, "a1")
		require.NoError(t, e.tracker.Unregister(ctx, "a1"))
		e.clock.Advance(time.Hour)
		assert.Never(t, func() bool { return len(e.cancelled()) > 0 }, 50*time.Millisecond, 5*time.Millisecond)
	})
}

func TestTrackerRetriesRefusedDeployments(t *testing.T) {
	e := newTrackerEnv(t, 0)
	e.put("present", "v")
	require.NoError(t, e.tracker.Refused("dep-two", "m1", "m2"))
	require.NoError(t, e.tracker.Refused("dep-one", "m1"))
	require.NoError(t, e.tracker.Refused("dep-raced", "present")) // created between the refusal and the first cycle
	e.cycle()
	assert.Equal(t, []string{"dep-raced"}, e.retried())

	e.put("m1", "v")
	e.cycle()
	assert.Equal(t, []string{"dep-raced", "dep-one"}, e.retried(), "dep-two still misses m2")
	e.put("m2", "v")
	e.cycle()
	assert.Equal(t, []string{"dep-raced", "dep-one", "dep-two"}, e.retried())
	assert.Empty(t, e.watcher.Names(), "secrets watched only for refusals are dropped once they exist")
	assert.Empty(t, e.cancelled())
}

func TestTrackerOutageCancelsNothing(t *testing.T) {
	e := newTrackerEnv(t, 0)
	e.put("s1", "v")
	require.NoError(t, e.tracker.Register("a1", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1"})}))
	e.cycle()
	require.NoError(t, e.mem.Close())
	ev := e.cycle()
	require.Len(t, ev, 1)
	assert.True(t, ev[0].Outage)
	assert.Empty(t, e.cancelled())
	assert.Empty(t, e.queue.take(t))
}

func TestTrackerRetriesFailedReadsAndQueues(t *testing.T) {
	e := newTrackerEnv(t, 0)
	e.put("s1", "v1")
	require.NoError(t, e.tracker.Register("a1", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1"})}))
	require.NoError(t, e.tracker.Register("a2", []agreement.ServiceBinding{svc("web", map[string]string{"db": "s1"})}))
	e.cycle()

	e.put("s1", "v2")
	e.reader.fail = 1
	e.cycle()
	assert.Empty(t, e.queue.take(t), "the read failed: nothing to send yet")
	e.cycle()
	assert.Equal(t, map[string]map[string]map[string]string{"a1": {"web": {"db": "v2"}}, "a2": {"web": {"db": "v2"}}}, e.queue.take(t),
		"the next cycle reports the change again")

	e.put("s1", "v3")
	e.queue.failFor = map[string]bool{"a2": true}
	e.cycle()
	assert.Equal(t, map[string]map[string]map[string]string{"a1": {"web": {"db": "v3"}}}, e.queue.take(t))
	e.queue.failFor = nil
	e.cycle()
	assert.Equal(t, map[string]map[string]map[string]string{"a1": {"web": {"db": "v3"}}, "a2": {"web": {"db": "v3"}}}, e.queue.take(t),
		"a failed queue is retried next cycle (the outbox merges the repeat for a1)")
}

func TestTrackerLogsNoValues(t *testing.T) {
	ctx := context.Background()
	e := newTrackerEnv(t, 0)
	const canary = "canary-Zq8pX1-value"
	e.put("db/password", canary+"-1")
	require.NoError(t, e.tracker.Register("a1", []agreement.ServiceBinding{svc("web", map[string]string{"db": "db/password"})}))
	require.NoError(t, e.tracker.Refused("dep1", "missing/secret"))
	e.cycle()
	e.put("db/password", canary+"-2")
	e.cycle()
	require.NoError(t, e.mem.Delete(ctx, "db/password"))
	e.cycle()
	require.NoError(t, e.tracker.Unregister(ctx, "a1"))

	logs := e.logs.String()
	assert.Contains(t, logs, `"secrets rotated; updates queued"`)
	assert.Contains(t, logs, `db/password`, "logs name the secrets")
	assert.Contains(t, logs, `web:db=db/password`, "and the bindings")
	for _, leak := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary + "-2"))[:16]} {
		assert.NotContains(t, logs, leak)
	}
}

// TestRotationEndToEnd: 1,000 agreements over 20 secrets, on 16 nodes with
// their own agent keys; rotating 3 secrets sends exactly the affected
// agreements exactly one sealed update each, carrying only the changed
// secrets, for at most 3 store reads. Every update and reply travels sealed: the agents
// open the updates with their keys and replay guards, the agbot opens the
// replies.
func TestRotationEndToEnd(t *testing.T) {
	const agreements, secrets = 1000, 20
	rotated := []int{3, 7, 15}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clockwork.NewFakeClock()
	mem := memory.New()
	mon := secretstore.NewMonitor(mem)
	reader := secretstore.NewReader(mon, secretstore.ReaderOptions{TTL: time.Hour})
	name := func(i int) string { return fmt.Sprintf("org/app/secret%02d", i) }
	for i := range secrets {
		_, err := mem.Put(ctx, &secretstore.Secret{Name: name(i), Data: secretstore.Data{"value": []byte(name(i) + "@v1")}}, secretstore.PutOptions{})
		require.NoError(t, err)
	}

	// Each agreement: service web with two secrets, service worker with one
	// raw secret, spread over the 20 store secrets.
	type binding struct{ service, secret, vault string }
	table := map[string][]binding{}
	for i := range agreements {
		id := fmt.Sprintf("ag%04d", i)
		table[id] = []binding{
			{"web", "db", name(i % secrets)},
			{"web", "api", name((i / secrets) % secrets)},
			{"worker", "queue", name((i*7 + 3) % secrets)},
		}
	}

	// Agents on 16 nodes (a node runs many agreements; 1,000 key sets would
	// only slow the test): every tenth agreement rejects the update, the
	// rest accept.
	const nodes = 16
	agbot := mustGenerate(t)
	link := newAgentLink()
	decide := func(u agreement.Update) (bool, string) {
		var n int
		fmt.Sscanf(u.AgreementID, "ag%d", &n)
		if n%10 == 0 {
			return false, "updates disabled on this node"
		}
		return true, ""
	}
	var agents []*sealedAgent
	for range nodes {
		agents = append(agents, newSealedAgent(t, agbot.Public(), decide))
	}
	for i := range agreements {
		link.agents[fmt.Sprintf("ag%04d", i)] = agents[i%nodes]
	}
	outbox, err := agreement.NewOutbox(ctx, newSealingTransport(t, agbot, link), agreement.OutboxOptions{Clock: clock, Senders: 16})
	require.NoError(t, err)
	watcher, err := secretstore.NewWatcher(mon, secretstore.WatcherOptions{Clock: clock})
	require.NoError(t, err)
	var cancelMu sync.Mutex
	var cancelled []string
	tracker, err := agreement.NewTracker(agreement.TrackerOptions{
		Reader: reader, Watcher: watcher, Outbox: outbox, Clock: clock,
		Cancel: func(_ context.Context, id string, _ agreement.Revocation) {
			cancelMu.Lock()
			defer cancelMu.Unlock()
			cancelled = append(cancelled, id)
		},
	})
	require.NoError(t, err)
	defer tracker.Close()

	for _, id := range slices.Sorted(maps.Keys(table)) {
		web := agreement.ServiceBinding{Service: agreement.ServiceRef{Org: "org", URL: "web"}, Secrets: map[string]agreement.BoundSecret{}}
		worker := agreement.ServiceBinding{Service: agreement.ServiceRef{Org: "org", URL: "worker"}, Secrets: map[string]agreement.BoundSecret{}}
		for _, b := range table[id] {
			// The proposal read the values through the coalescing reader.
			_, err := reader.Get(ctx, b.vault)
			require.NoError(t, err)
			if b.service == "web" {
				web.Secrets[b.secret] = agreement.BoundSecret{VaultSecret: b.vault}
			} else {
				worker.Secrets[b.secret] = agreement.BoundSecret{VaultSecret: b.vault, Format: agreement.FormatRaw}
			}
		}
		require.NoError(t, tracker.Register(id, []agreement.ServiceBinding{web, worker}))
	}
	assert.Len(t, watcher.Names(), secrets)
	assert.Equal(t, int64(secrets), mon.Stats()[secretstore.OpGet].Calls, "proposals: one read per distinct secret")

	watchDone := make(chan error, 1)
	outboxDone := make(chan error, 1)
	go func() {
		watchDone <- watcher.Run(ctx, func(ctx context.Context, c secretstore.Cycle) { tracker.HandleEvents(ctx, c.Events) })
	}()
	go func() { outboxDone <- outbox.Run(ctx) }()
	require.Eventually(t, func() bool { return mon.Stats()[secretstore.OpStat].Calls == secrets }, waitFor, time.Millisecond,
		"the first cycle has seen every secret")

	rotatedNames := map[string]string{}
	for _, i := range rotated {
		rotatedNames[name(i)] = name(i) + "@v2"
		_, err := mem.Put(ctx, &secretstore.Secret{Name: name(i), Data: secretstore.Data{"value": []byte(name(i) + "@v2")}}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	readsBefore := mon.Stats()[secretstore.OpGet].Calls
	advanceWhenWaiting(t, clock, watcher.Interval())

	// What each agreement must receive, from the binding table alone.
	want := map[string]map[string]map[string]string{}
	for id, bs := range table {
		for _, b := range bs {
			if v, ok := rotatedNames[b.vault]; ok {
				if want[id] == nil {
					want[id] = map[string]map[string]string{}
				}
				if want[id][b.service] == nil {
					want[id][b.service] = map[string]string{}
				}
				want[id][b.service][b.secret] = v
			}
		}
	}
	require.Greater(t, len(want), 100)
	require.Less(t, len(want), agreements)

	require.Eventually(t, func() bool {
		recs := outbox.Records()
		if len(recs) != len(want) {
			return false
		}
		for _, r := range recs {
			if r.Status == agreement.StatusPending {
				return false
			}
		}
		return true
	}, 6*waitFor, 10*time.Millisecond, "hundreds of updates sealed and opened under -race on a busy machine")

	got := map[string]map[string]map[string]string{}
	for id := range table {
		agent := link.agents[id]
		assert.Empty(t, agent.refused(), "agreement %s: every envelope opens", id)
		ups := agent.updates(id)
		if _, affected := want[id]; !affected {
			assert.Empty(t, ups, "agreement %s uses no rotated secret", id)
			assert.Empty(t, link.envelopes(id))
			continue
		}
		require.Len(t, ups, 1, "agreement %s gets exactly one update", id)
		require.Len(t, link.envelopes(id), 1, "agreement %s: one envelope on the link", id)
		got[id] = contents(t, ups[0].update)
		rec, _ := outbox.Lookup(id)
		assert.Equal(t, rec.Sequence, ups[0].sequence, "agreement %s: sealed with the sequence the outbox recorded", id)
		assert.Equal(t, ups[0].sequence, agent.guard.Last(id, agreement.TypeUpdate))
	}
	assert.Equal(t, want, got, "each update carries exactly the changed secrets with their new values")
	assert.LessOrEqual(t, mon.Stats()[secretstore.OpGet].Calls-readsBefore, int64(len(rotated)), "store reads for the rotation")

	rejected := 0
	for _, r := range outbox.Records() {
		var n int
		fmt.Sscanf(r.AgreementID, "ag%d", &n)
		if n%10 == 0 {
			assert.Equal(t, agreement.StatusRejected, r.Status)
			assert.Equal(t, "updates disabled on this node", r.Reason)
			rejected++
		} else {
			assert.Equal(t, agreement.StatusAccepted, r.Status, r.AgreementID)
		}
	}
	assert.Positive(t, rejected)
	cancelMu.Lock()
	assert.Empty(t, cancelled, "rejected updates do not cancel agreements")
	cancelMu.Unlock()

	cancel()
	assert.ErrorIs(t, <-watchDone, context.Canceled)
	assert.ErrorIs(t, <-outboxDone, context.Canceled)
}
