package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// canary starts every secret value the tests store, so that a scan of
// logs and state records finds any that leaked.
const canary = "c4n4ry-"

// errUnreachable is what the test transport returns for an agent that is
// down.
var errUnreachable = errors.New("test agent: unreachable")

// testAgent is a node agent as a real one works: it opens the agbot's
// envelopes with agreement.Open*, keeps one sequence floor per agreement
// across proposals and updates, applies them to a real agentapi.Store and
// answers with a sealed reply naming the message.
type testAgent struct {
	node  string
	keys  *agreement.PrivateKeys
	agbot *agreement.PublicKeys
	store *agentapi.Store

	mu            sync.Mutex
	floor         map[string]uint64
	down          bool
	loseReplies   bool     // applied, the answer lost
	async         bool     // replies are kept for HandleReply
	replies       [][]byte // kept replies, oldest first
	rejectUpdates string   // a reason to reject secrets updates with
	rejectErr     error    // an apply error to reject secrets updates with
	opened        []agreement.Header
	carried       []string // service:secret names of the last secrets update
	dropped       int      // envelopes that did not open (replays)
}

func newTestAgent(t testing.TB, node string, agbot *agreement.PublicKeys) *testAgent {
	t.Helper()
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	require.NoError(t, err)
	store, err := agentapi.Open(t.Context(), agentapi.Options{Root: filepath.Join(t.TempDir(), "agent")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return &testAgent{node: node, keys: keys, agbot: agbot, store: store, floor: map[string]uint64{}}
}

// floorGuard is the agent's replay guard: one floor per agreement, whatever
// the message type.
type floorGuard struct{ a *testAgent }

func (g floorGuard) Accept(_ context.Context, id string, typ agreement.MessageType, seq uint64) error {
	if seq <= g.a.floor[id] {
		return fmt.Errorf("%w: %s %d of %q is not above %d", agreement.ErrReplay, typ, seq, id, g.a.floor[id])
	}
	g.a.floor[id] = seq
	return nil
}

// receive handles one envelope and returns the sealed reply (nil for an
// asynchronous agent, or for an envelope that does not open, which a real
// agent drops without answering).
func (a *testAgent) receive(ctx context.Context, envelope []byte) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return nil, errUnreachable
	}
	peek, err := agreement.PeekHeader(envelope, agreement.Options{})
	if err != nil {
		return nil, err
	}
	var h agreement.Header
	var applyErr error
	switch peek.Type {
	case agreement.TypeProposal:
		var p agreement.Proposal
		if h, p, err = agreement.Open[agreement.Proposal](ctx, a.keys, a.agbot, envelope, floorGuard{a}, agreement.Options{}); err != nil {
			a.dropped++
			return nil, err
		}
		instances := agentapi.Instances{}
		for i, ss := range p.Services {
			instances[ss.Service] = agentapi.Instance{ID: instanceID(p.AgreementID, i)}
		}
		_, applyErr = a.store.ApplyProposal(ctx, p, instances)
	case agreement.TypeUpdate:
		var u agreement.Update
		if h, u, err = agreement.Open[agreement.Update](ctx, a.keys, a.agbot, envelope, floorGuard{a}, agreement.Options{}); err != nil {
			a.dropped++
			return nil, err
		}
		a.carried = nil
		if su, err := u.Secrets(); err == nil {
			for _, ss := range su.Services {
				for _, n := range slices.Sorted(maps.Keys(ss.Secrets)) {
					a.carried = append(a.carried, ss.Service.URL+":"+n)
				}
			}
		}
		switch {
		case u.Kind == agreement.UpdateKindCancel:
			_, applyErr = a.store.RemoveAgreement(ctx, u.AgreementID)
		case a.rejectUpdates != "":
			applyErr = fmt.Errorf("%w: %s", edgesecrets.ErrInvalid, a.rejectUpdates)
		case a.rejectErr != nil:
			applyErr = a.rejectErr
		default:
			_, applyErr = a.store.ApplyUpdate(ctx, u)
		}
	default:
		return nil, fmt.Errorf("test agent: unexpected %s", peek.Type)
	}
	a.opened = append(a.opened, h)
	outcome := agentapi.ReplyFor(h.AgreementID, applyErr)
	answer := agreement.NewReply(h, outcome.Accepted, outcome.Reason)
	answer.Unknown = outcome.Unknown
	reply, err := agreement.Seal(a.keys, a.agbot, answer, agreement.Header{Sequence: h.Sequence}, agreement.Options{})
	if err != nil {
		return nil, err
	}
	if a.async {
		a.replies = append(a.replies, reply)
		return nil, nil
	}
	if a.loseReplies {
		return nil, errUnreachable // applied, but the answer is lost
	}
	return reply, nil
}

// setLoseReplies makes the agent apply what it receives and lose its
// answers.
func (a *testAgent) setLoseReplies(lose bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.loseReplies = lose
}

func instanceID(agreementID string, service int) string {
	return fmt.Sprintf("%s-%d", agreementID, service)
}

// wipe loses the agent's files (a new, empty store), keeping its keys
// and its replay floors.
func (a *testAgent) wipe(t testing.TB) {
	t.Helper()
	store, err := agentapi.Open(t.Context(), agentapi.Options{Root: filepath.Join(t.TempDir(), "wiped")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	a.mu.Lock()
	defer a.mu.Unlock()
	a.store = store
}

func (a *testAgent) setDown(down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = down
}

func (a *testAgent) setRejectUpdates(reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rejectUpdates = reason
}

// setRejectUpdatesWith makes the agent reject secrets updates as
// agentapi answers an apply that failed with err.
func (a *testAgent) setRejectUpdatesWith(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rejectErr = err
}

// takeReplies returns and forgets the kept replies.
func (a *testAgent) takeReplies() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.replies
	a.replies = nil
	return r
}

// messages returns the headers of the envelopes the agent opened.
func (a *testAgent) messages() []agreement.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agreement.Header(nil), a.opened...)
}

// lastCarried returns the secrets the last secrets update carried.
func (a *testAgent) lastCarried() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.carried...)
}

// file returns the content of a service secret's file of an agreement's
// first service, and whether the agent holds it.
func (a *testAgent) file(agreementID, name string) (string, bool) {
	return a.serviceFile(agreementID, 0, name)
}

// serviceFile is file for the agreement's service-th service.
func (a *testAgent) serviceFile(agreementID string, service int, name string) (string, bool) {
	b, err := a.store.ReadSecret(context.Background(), instanceID(agreementID, service), name)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// fleet is the agents of the test's nodes: delivery.Agents and
// delivery.Transport at once.
type fleet struct {
	mu     sync.Mutex
	agents map[string]*testAgent
	sends  atomic.Int64
}

func newFleet() *fleet { return &fleet{agents: map[string]*testAgent{}} }

func (f *fleet) add(a *testAgent) *testAgent {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agents[a.node] = a
	return a
}

func (f *fleet) agent(node string) (*testAgent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.agents[node]
	if a == nil {
		return nil, fmt.Errorf("no agent on node %q", node)
	}
	return a, nil
}

func (f *fleet) Keys(_ context.Context, node string) (*agreement.PublicKeys, error) {
	a, err := f.agent(node)
	if err != nil {
		return nil, err
	}
	return a.keys.Public(), nil
}

func (f *fleet) Send(ctx context.Context, m delivery.Message) ([]byte, error) {
	f.sends.Add(1)
	a, err := f.agent(m.Node)
	if err != nil {
		return nil, err
	}
	return a.receive(ctx, m.Envelope)
}

// harness is an engine with its store, state, agents and hooks.
type harness struct {
	t      *testing.T
	store  *mock.Store
	state  state.Backend
	keys   *agreement.PrivateKeys
	fleet  *fleet
	opts   delivery.Options
	engine *delivery.Engine
	logs   *logtest.Buffer

	stopRun func()
	done    chan error

	mu      sync.Mutex
	cancels map[string][]state.Cancellation
	ready   []string
}

// Test timing: a cycle a minute, a grace of five, retries from a second
// up to a minute.
const (
	testInterval = time.Minute
	testGrace    = 5 * time.Minute
	testMaxDelay = time.Minute
)

func newHarness(t *testing.T, configure ...func(*delivery.Options)) *harness {
	t.Helper()
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	require.NoError(t, err)
	logger, logs := logtest.NewLogger()
	h := &harness{t: t, store: mock.NewStore(nil), state: state.NewMemory(), keys: keys, fleet: newFleet(), logs: logs,
		cancels: map[string][]state.Cancellation{}}
	h.opts = delivery.Options{
		Store: h.store.Store, State: h.state, Keys: keys, Agents: h.fleet, Transport: h.fleet,
		OnCancel: h.onCancel, OnReady: h.onReady,
		Interval: testInterval, Grace: testGrace, InitialDelay: time.Second, MaxDelay: testMaxDelay,
		ReplyTimeout: 10 * time.Second, Logger: logger,
	}
	for _, c := range configure {
		c(&h.opts)
	}
	h.engine, err = delivery.New(h.opts)
	require.NoError(t, err)
	return h
}

func (h *harness) onCancel(_ context.Context, id string, c state.Cancellation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cancels[id] = append(h.cancels[id], c)
}

func (h *harness) onReady(_ context.Context, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ready = append(h.ready, id)
}

// cancelled returns the cancel hook's calls by agreement.
func (h *harness) cancelled() map[string][]state.Cancellation {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]state.Cancellation{}
	for k, v := range h.cancels {
		out[k] = append([]state.Cancellation(nil), v...)
	}
	return out
}

func (h *harness) readied() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ready...)
}

// start runs the engine until stop.
func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.stopRun, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.engine.Run(ctx) }()
}

// stop ends Run, waits for it, and checks that no value reached the logs
// or the state.
func (h *harness) stop() {
	h.t.Helper()
	h.stopRun()
	assert.ErrorIs(h.t, <-h.done, context.Canceled)
	assert.NotContains(h.t, h.logs.String(), canary, "a secret value reached the logs")
	err := h.state.Records(context.Background(), func(r state.Record) bool {
		assert.NotContains(h.t, fmt.Sprintf("%#v", r), canary, "a secret value reached the state")
		return true
	})
	if errors.Is(err, state.ErrStateUnavailable) {
		return
	}
	require.NoError(h.t, err)
	names, err := h.state.Names(context.Background(), "")
	require.NoError(h.t, err)
	obs, err := h.state.Observations(context.Background(), names)
	require.NoError(h.t, err)
	waits, err := h.state.Waits(context.Background())
	require.NoError(h.t, err)
	assert.NotContains(h.t, fmt.Sprintf("%#v %#v", obs, waits), canary, "a secret value reached the state")
}

// restart replaces the engine by a new one on the same state, as an agbot
// restart does.
func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	var err error
	h.engine, err = delivery.New(h.opts)
	require.NoError(h.t, err)
	h.start()
}

// agent adds a test agent on node.
func (h *harness) agent(node string) *testAgent {
	return h.fleet.add(newTestAgent(h.t, node, h.keys.Public()))
}

// put stores a JSON secret {"password": value} under name.
func (h *harness) put(name, value string) {
	h.t.Helper()
	_, err := h.store.Inner.Put(context.Background(), &secretstore.Secret{Name: name, Data: edgesecrets.Data{"password": []byte(value)}}, secretstore.PutOptions{})
	require.NoError(h.t, err)
}

func (h *harness) delete(name string) {
	h.t.Helper()
	require.NoError(h.t, h.store.Inner.Delete(context.Background(), name))
}

// deployOne starts the engine with agreement agr-1 on node-1 bound to
// org/db, holding canary+"v1", and waits until its agent holds it.
func (h *harness) deployOne() *testAgent {
	h.t.Helper()
	agent := h.agent("node-1")
	h.put("org/db", canary+"v1")
	h.register("agr-1", "node-1", "org/db")
	h.start()
	h.wait("agr-1", time.Minute)
	return agent
}

// deployNodeLevel starts the engine with agreement agr-1 on node-1 bound
// to the node's own org/node/node-1/db (holding canary+"node") and the
// organisation's org/db (canary+"org") it falls back to, and waits until
// its agent holds the node's own.
func (h *harness) deployNodeLevel() *testAgent {
	h.t.Helper()
	agent := h.agent("node-1")
	h.put("org/node/node-1/db", canary+"node")
	h.put("org/db", canary+"org")
	h.register("agr-1", "node-1", "org/node/node-1/db", "org/db")
	h.start()
	h.wait("agr-1", time.Minute)
	got, _ := agent.file("agr-1", "pw")
	require.Equal(h.t, jsonFile(canary+"node"), got)
	return agent
}

// register registers an agreement of one service with one secret "pw"
// bound to the candidate store names.
func (h *harness) register(id, node string, names ...string) {
	h.t.Helper()
	require.NoError(h.t, h.engine.Register(context.Background(), testAgreement(id, node, names...)))
}

func testAgreement(id, node string, names ...string) delivery.Agreement {
	return delivery.Agreement{ID: id, Node: node, Services: []binding.ServiceBinding{{
		Service: agreement.ServiceRef{Org: "org", URL: "svc", Version: "1.0.0"},
		Secrets: map[string]binding.BoundSecret{"pw": {StoreNames: names}},
	}}}
}

// status returns the agreement's status.
func (h *harness) status(id string) delivery.Status {
	h.t.Helper()
	st, err := h.engine.Status(context.Background(), id)
	require.NoError(h.t, err)
	return st
}

// wait waits (in fake time) until the agreement is in sync.
func (h *harness) wait(id string, within time.Duration) delivery.Status {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	st, err := h.engine.Wait(ctx, id)
	require.NoError(h.t, err, "agreement %s not in sync within %s: %+v", id, within, st)
	return st
}

// cycles lets n watcher cycles run (in fake time) and everything they
// start settle.
func cycles(n int) {
	for range n {
		time.Sleep(testInterval)
		synctest.Wait()
	}
}

// json is the agent's file content of a {"password": value} secret.
func jsonFile(value string) string { return `{"password":"` + value + `"}` }

// forbid makes the store refuse the names (ErrPermission), or nothing for
// none.
func (h *harness) forbid(names ...string) {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	h.store.SetFaults(mock.Faults{Hook: func(_ context.Context, c mock.Call) error {
		if set[c.Name] {
			return &secretstore.Error{Op: c.Op, Name: c.Name, Kind: edgesecrets.ErrPermission, Err: mock.ErrInjected}
		}
		return nil
	}})
}
