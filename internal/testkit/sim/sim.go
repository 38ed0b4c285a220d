// Package sim is a randomized fault simulation of the whole system (issue
// 27): one to three agbots (package agbot's front door) over a memory
// state (one agbot) or a SharedState they share as members (several), a
// mock store, and agents (package agent's front door) reaching them
// through an in-process network, driven by a workload and faults drawn
// from one seed, with the system's invariants checked after every step.
// Run it inside a testing/synctest bubble: time is then the bubble's, and
// a run takes the CPU its work needs, not the seconds it simulates.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/agent"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// Canary starts every secret value the simulation writes: it must appear
// in no log line and no state record.
const Canary = "CANARY-"

const (
	org      = "myorg"
	interval = time.Second
	// period is a member's lease of the shared state (several agbots).
	period = 6 * time.Second
	grace  = 4 * time.Second
	// Bound is how long after the faults stop every agent must hold the
	// store's current content (or, for a secret deleted, nothing).
	Bound = 3*grace + 30*interval
)

// Config is one run.
type Config struct {
	// Seed drives the workload and the faults.
	Seed uint64
	// Steps is the number of workload or fault steps before the quiet
	// phase; zero means 40.
	Steps int
	// Agbots is the number of agbots; zero means 1. One agbot keeps its
	// delivery state in state.NewMemory; several share a
	// SharedState, each a member of it, and the agents poll them all.
	Agbots int
	// OpenState, when set, opens a connection to a durable state the
	// agbots share (pgstate over a test database): called at each
	// agbot's start and restart, as a process opens its connection, and
	// once for the invariants' reads. Such a run is not deterministic:
	// run it outside a synctest bubble, in real time.
	OpenState func(ctx context.Context) (state.Backend, error)
	// Store is the store the agbots read: StoreMemory (the zero value)
	// or StoreAWS.
	Store StoreKind
	// Agents and Names are the nodes and the organisation-level store
	// secrets they bind; zero means 4 and 10. Each node's service binds
	// two or three of them, a few secrets being bound by most nodes; half
	// the nodes bind with enableNodeLevelSecrets, each of their bindings
	// then resolving to a node-level secret first (which may or may not
	// exist) and to the organisation-level one next. The bounded run and
	// the soak give one seed in eight 20 agents.
	Agents, Names int
	// OneBinding makes each node's service bind one organisation-level
	// secret, of three unless Names says otherwise, drawn as the first
	// version of the simulation drew it: the seeds it found (TestFixedSeeds)
	// replay with it as they ran then.
	OneBinding bool
	// WipeKeepsKeys makes an agent restarted without its files keep its
	// keys. Off, the keys go with the files. On, the agent says it holds
	// nothing when it publishes its certificate again, and rejects the
	// agbot's updates as of an unknown agreement: either way it is
	// proposed to again (seed 7 in sim_test.go). The bounded run and the
	// soak set it for one seed in three.
	WipeKeepsKeys bool
	// EndAgreements adds to the workload agreements the agbots' embedder
	// ends, as when a node leaves: its deployment is no more (the
	// agbot's Deploy hook declines the node) and a running agbot's
	// Engine.End, called until one answers, tells the agent. Drawn from a
	// stream of its own, so that a seed's other steps stay as they were
	// without it; the bounded run and the soak set it.
	EndAgreements bool
	// Without names fault kinds (as counted in Stats.Faults) not to
	// inject: a step that draws one heals instead. "node.createOverMissing"
	// leaves out the creation of a node-level secret while the
	// organisation-level one it shadows does not exist.
	Without []string
	// TempDir returns a new temporary directory (testing.T.TempDir).
	TempDir func() string
}

// StoreKind names the store backend of a run.
type StoreKind string

// Store backends.
const (
	// StoreMemory is secretstore/memory.
	StoreMemory StoreKind = ""
	// StoreAWS is secretstore/awssm over the wire-level Secrets Manager
	// endpoint internal/testkit/awsmock.
	StoreAWS StoreKind = "aws"
)

// Stats count what runs did.
type Stats struct {
	Seeds, Steps, Agreements, Rotations, Deletions, Cancellations, Violations int
	// Bindings counts the service secrets bound (two or three an
	// agreement), NodeBindings those resolving to a node-level secret
	// first; NodeRotations and NodeDeletions count the writes (creations
	// included) and deletions of node-level secrets, also counted in
	// Rotations and Deletions.
	Bindings, NodeBindings, NodeRotations, NodeDeletions int
	// Faults counts the faults injected, by kind.
	Faults map[string]int
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Seeds += o.Seeds
	s.Steps += o.Steps
	s.Agreements += o.Agreements
	s.Rotations += o.Rotations
	s.Deletions += o.Deletions
	s.Cancellations += o.Cancellations
	s.Violations += o.Violations
	s.Bindings += o.Bindings
	s.NodeBindings += o.NodeBindings
	s.NodeRotations += o.NodeRotations
	s.NodeDeletions += o.NodeDeletions
	if s.Faults == nil {
		s.Faults = map[string]int{}
	}
	for k, v := range o.Faults {
		s.Faults[k] += v
	}
}

// String prints the statistics on one line, fault kinds sorted.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seeds=%d steps=%d agreements=%d bindings=%d (node-level %d) rotations=%d (node-level %d) deletions=%d (node-level %d) cancellations=%d violations=%d faults:",
		s.Seeds, s.Steps, s.Agreements, s.Bindings, s.NodeBindings, s.Rotations, s.NodeRotations, s.Deletions, s.NodeDeletions, s.Cancellations, s.Violations)
	for _, k := range slices.Sorted(maps.Keys(s.Faults)) {
		fmt.Fprintf(&b, " %s=%d", k, s.Faults[k])
	}
	return b.String()
}

// secret is what the simulation knows of a store secret: its store name,
// its last version written and the spans when it alone was unreadable
// (deleted, never written, or denied to the agbot).
type secret struct {
	name string
	// node is the node of a node-level secret; empty at organisation
	// level. base is the organisation-level secret it shadows.
	node    string
	base    int
	version int
	exists  bool
	denied  bool
	// goneSince is when the current span of unreadability started; zero
	// while readable.
	goneSince time.Time
	// spans are the spans of unreadability that ended: [from, to).
	spans [][2]time.Time
}

func (s *secret) readable() bool { return s.exists && !s.denied }

// unreadable returns the spans when s was unreadable up to now, the one
// going on included.
func (s *secret) unreadable(now time.Time) [][2]time.Time {
	out := slices.Clone(s.spans)
	if !s.goneSince.IsZero() {
		out = append(out, [2]time.Time{s.goneSince, now})
	}
	return out
}

// intersect returns the spans within both a and b (each sorted and
// disjoint).
func intersect(a, b [][2]time.Time) [][2]time.Time {
	var out [][2]time.Time
	for _, x := range a {
		for _, y := range b {
			from, to := x[0], x[1]
			if y[0].After(from) {
				from = y[0]
			}
			if y[1].Before(to) {
				to = y[1]
			}
			if from.Before(to) {
				out = append(out, [2]time.Time{from, to})
			}
		}
	}
	return out
}

// allGoneFor reports whether the secrets cands were all unreadable at once
// for at least d, by now; w.mu held.
func (w *World) allGoneFor(cands []int, now time.Time, d time.Duration) bool {
	spans := w.secrets[cands[0]].unreadable(now)
	for _, c := range cands[1:] {
		spans = intersect(spans, w.secrets[c].unreadable(now))
	}
	for _, sp := range spans {
		if sp[1].Sub(sp[0]) >= d {
			return true
		}
	}
	return false
}

// stayedGone reports whether every secret of cands has been unreadable
// since at least t; w.mu held.
func (w *World) stayedGone(cands []int, t time.Time) bool {
	for _, c := range cands {
		s := w.secrets[c]
		if s.readable() || s.goneSince.After(t) {
			return false
		}
	}
	return true
}

// current returns the secret a binding to cands resolves to now: the
// first readable; -1 when none is.
func (w *World) current(cands []int) int {
	for _, c := range cands {
		if w.secrets[c].readable() {
			return c
		}
	}
	return -1
}

// simAgbot is one agbot, across its restarts.
type simAgbot struct {
	host   string
	agbot  *agbot.Agbot
	cancel context.CancelFunc
	done   chan error
	state  *faultyState
	conn   state.Backend // its own connection to a shared state, closed when it stops; nil with one agbot in memory
}

// host names agbot k on the network and as a member of the shared state.
func host(k int) string { return "agbot-" + strconv.Itoa(k) }

// slot is one service secret of a node's service: the file its agent
// mounts and the store secrets the binding resolves to.
type slot struct {
	file string // the service secret's name, its file on the node
	// cands are the indexes of the secrets the binding resolves to, in
	// order of preference: the node-level one first, with
	// enableNodeLevelSecrets, then the organisation-level one (vault, the
	// last, is the name in the binding).
	cands []int
	// floor is the highest version of each secret seen in the file this
	// incarnation.
	floor map[int]int
	had   bool // the file existed at the last check
	// seen is when a check last found the file: one that finds it gone
	// dates the cancellation no later than this (it went in between).
	seen time.Time
}

// vault is the organisation-level secret the binding names.
func (s *slot) vault() int { return s.cands[len(s.cands)-1] }

// simAgent is one node's agent, across its restarts.
type simAgent struct {
	name string
	// slots are its service's secrets; nodeLevel says the binding has
	// enableNodeLevelSecrets.
	slots     []*slot
	nodeLevel bool
	keys      *agreement.PrivateKeys
	root      string
	agent     *agent.Agent
	cancel    context.CancelFunc
	done      chan struct{}
	logs      *logtest.Buffer
	// endedAt is when its file went with its agreement's cancellation;
	// zero while it holds one, or lost it otherwise.
	endedAt time.Time
	// ended says the embedder ended its agreement (Config.EndAgreements):
	// no deployment is made for it again, and once the faults stop it
	// holds nothing.
	ended   atomic.Bool
	wiped   bool // its files were lost since the last check
	started bool
}

// World is one run's system.
type World struct {
	cfg   Config
	rng   *rand.Rand
	ends  *rand.Rand // draws the agreements ended (Config.EndAgreements)
	net   *network
	store *mock.Store
	// state is the single agbot's delivery state; shared is the state
	// several agbots share (nil with one agbot).
	state  *faultyState
	shared *SharedState
	// checks reads the records for the invariants when OpenState is set.
	checks state.Backend
	outage *outage
	certs  *losingCerts
	keys   *agreement.PrivateKeys
	ca     identity.CertSigner

	agbots    []*simAgbot
	agbotLogs []*logtest.Buffer

	mu       sync.Mutex
	secrets  []*secret
	cancels  map[string]state.Cancellation // by agreement id
	problems []string
	denyAll  bool // a read-denied spell: every call but the credential check refused

	agents []*simAgent
	stats  Stats
}

// vault is the name in a binding of organisation-level secret i, and name
// its store name.
func vault(i int) string { return "s" + strconv.Itoa(i) }
func name(i int) string  { return org + "/" + vault(i) }

// nodeName is the store name of the node-level secret of node shadowing
// organisation-level secret i, as binding resolves it.
func nodeName(node string, i int) string { return org + "/node/" + node + "/" + vault(i) }

// value is secret i's content at version v.
func value(i, v int) string { return fmt.Sprintf("%ss%d-v%d", Canary, i, v) }

// parse returns the secret and version of a value.
func parse(s string) (i, v int, ok bool) {
	rest, found := strings.CutPrefix(s, Canary+"s")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-v")
	if !found {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	v, err2 := strconv.Atoi(b)
	return i, v, err1 == nil && err2 == nil
}

// violate records a broken invariant.
func (w *World) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, fmt.Sprintf("t=%s: ", time.Now().UTC().Format("15:04:05.000"))+fmt.Sprintf(format, args...))
}

// New builds a world: the store's secrets, the agbot running, no agent
// yet.
func New(ctx context.Context, cfg Config) (*World, error) {
	if cfg.Steps == 0 {
		cfg.Steps = 40
	}
	if cfg.Agents == 0 {
		cfg.Agents = 4
	}
	if cfg.Names == 0 {
		cfg.Names = 10
		if cfg.OneBinding {
			cfg.Names = 3
		}
	}
	if cfg.Agbots == 0 {
		cfg.Agbots = 1
	}
	if cfg.TempDir == nil {
		return nil, errors.New("sim: Config.TempDir is required")
	}
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	if err != nil {
		return nil, err
	}
	ca, err := identity.NewCA(identity.CAOptions{})
	if err != nil {
		return nil, err
	}
	inner := memory.New()
	if cfg.Store == StoreAWS {
		if inner, err = newAWSStore(ctx); err != nil {
			return nil, err
		}
	}
	w := &World{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x73696d)), ends: rand.New(rand.NewPCG(cfg.Seed, 0x656e64)), net: newNetwork(cfg.Seed),
		store: mock.NewStore(inner), outage: &outage{},
		certs: &losingCerts{CertStore: identity.NewMemoryCertStore(), lost: map[string]bool{}},
		keys:  keys, ca: ca, cancels: map[string]state.Cancellation{},
		stats: Stats{Seeds: 1, Faults: map[string]int{}}}
	w.store.SetFaults(mock.Faults{Hook: w.storeHook})
	for i := range cfg.Names {
		w.secrets = append(w.secrets, &secret{name: name(i)})
		if err := w.put(ctx, i); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.OpenState != nil:
		if w.checks, err = cfg.OpenState(ctx); err != nil {
			return nil, err
		}
	case cfg.Agbots == 1:
		w.state = &faultyState{Backend: state.NewMemory(), outage: w.outage}
	default:
		w.shared = NewSharedState(period)
		hosts := make([]string, cfg.Agbots)
		for k := range hosts {
			hosts[k] = host(k)
		}
		w.net.replay = newReplayer(w.net, hosts)
		w.net.set(replayHost, w.net.replay)
	}
	w.agbots = make([]*simAgbot, cfg.Agbots)
	for k := range w.agbots {
		w.agbots[k] = &simAgbot{host: host(k)}
		if err := w.startAgbot(k); err != nil {
			return nil, err
		}
	}
	for range cfg.Agents {
		if err := w.addAgent(ctx); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// storeHook denies the agbot the secrets whose denied flag is set, and
// every read during a read-denied spell.
func (w *World) storeHook(_ context.Context, c mock.Call) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.denyAll && c.Op != "check-credentials" {
		return fmt.Errorf("sim: every read denied: %w", edgesecrets.ErrPermission)
	}
	for _, s := range w.secrets {
		if s.denied && c.Name == s.name {
			return fmt.Errorf("sim: %s denied: %w", c.Name, edgesecrets.ErrPermission)
		}
	}
	return nil
}

// setStoreFault sets a fault of every call on top of the per-secret
// denials.
func (w *World) setStoreFault(f mock.Faults) {
	f.Hook = w.storeHook
	w.store.SetFaults(f)
}

// put writes secret i's next version.
func (w *World) put(ctx context.Context, i int) error {
	w.mu.Lock()
	s := w.secrets[i]
	s.version++
	v := s.version
	w.mu.Unlock()
	if _, err := w.store.Inner.Put(ctx, &secretstore.Secret{Name: s.name, Data: edgesecrets.Data{"value": []byte(value(i, v))}}, secretstore.PutOptions{}); err != nil {
		return fmt.Errorf("sim: writing %s: %w", s.name, err)
	}
	w.mu.Lock()
	s.exists = true
	w.mark(s)
	w.mu.Unlock()
	return nil
}

// mark ends or starts a span of unreadability after a change of s; w.mu
// held.
func (w *World) mark(s *secret) {
	now := time.Now()
	switch {
	case s.readable() && !s.goneSince.IsZero():
		s.spans = append(s.spans, [2]time.Time{s.goneSince, now})
		s.goneSince = time.Time{}
	case !s.readable() && s.goneSince.IsZero():
		s.goneSince = now
	}
}

func (w *World) del(ctx context.Context, i int) error {
	if err := w.store.Inner.Delete(ctx, w.secrets[i].name); err != nil && !errors.Is(err, edgesecrets.ErrNotFound) {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.secrets[i].exists = false
	w.mark(w.secrets[i])
	return nil
}

func (w *World) deny(i int, denied bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.secrets[i].denied = denied
	w.mark(w.secrets[i])
}

// deployment is what node's service gets: a secret of its agent's slots
// each, bound to the slot's organisation-level secret, with
// enableNodeLevelSecrets when the agent binds at node level.
func (w *World) deployment(n relay.Node) (agbot.Deployment, bool) {
	var a *simAgent
	for _, x := range w.agents {
		if x.name == n.Node {
			a = x
		}
	}
	if n.Org != org || a == nil || a.ended.Load() {
		return agbot.Deployment{}, false
	}
	declared := map[string]any{}
	bound := make([]map[string]string, 0, len(a.slots))
	for _, sl := range a.slots {
		declared[sl.file] = map[string]any{}
		bound = append(bound, map[string]string{sl.file: vault(sl.vault())})
	}
	svc, err := json.Marshal(map[string]any{"org": org, "url": "web", "version": "1.0.0", "arch": "amd64",
		"deployment": map[string]any{"services": map[string]any{"web": map[string]any{"image": "example/web:1", "secrets": declared}}}})
	if err != nil {
		panic(err) // maps of strings
	}
	policy, err := json.Marshal(map[string]any{
		"service": map[string]any{"name": "web", "org": org, "arch": "amd64", "serviceVersions": []any{map[string]any{"version": "1.0.0"}}},
		"secretBinding": []any{map[string]any{"serviceOrgid": org, "serviceUrl": "web", "serviceArch": "amd64",
			"serviceVersionRange": "[1.0.0,INFINITY)", "enableNodeLevelSecrets": a.nodeLevel, "secrets": bound}}})
	if err != nil {
		panic(err)
	}
	def, err := binding.DecodeServiceDefinition(strings.NewReader(string(svc)))
	if err != nil {
		panic(err) // made above
	}
	target, err := binding.DecodeDeploymentPolicy(strings.NewReader(string(policy)))
	if err != nil {
		panic(err)
	}
	catalog, err := binding.NewCatalog(def)
	if err != nil {
		panic(err)
	}
	return agbot.Deployment{Target: target, Resolver: catalog}, true
}

// startAgbot starts agbot k over the world's state, identity records,
// keys and CA: at the start, and after a crash. With several agbots it
// opens a new handle on the shared state, as a process restarting opens
// a new connection.
func (w *World) startAgbot(k int) error {
	sa := w.agbots[k]
	var st state.Backend = w.state
	sa.state, sa.conn = w.state, nil
	switch {
	case w.cfg.OpenState != nil:
		conn, err := w.cfg.OpenState(context.Background())
		if err != nil {
			return err
		}
		sa.conn = conn
	case w.shared != nil:
		sa.conn = w.shared.Open()
	}
	if sa.conn != nil {
		sa.state = &faultyState{Backend: sa.conn, outage: w.outage}
		st = sa.state
		if m, ok := sa.conn.(state.Membership); ok {
			st = memberState{faultyState: sa.state, m: m}
		}
	}
	log, logs := logtest.NewLogger()
	w.agbotLogs = append(w.agbotLogs, logs)
	a, err := agbot.New(agbot.Options{
		Delivery: delivery.Options{Store: w.store.Store, State: st, Keys: w.keys, Interval: interval, Grace: grace,
			ReplyTimeout: 2 * time.Second, InitialDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second,
			OnCancel: w.onCancel, Member: sa.host},
		Identities: w.certs,
		CA:         w.ca,
		Attest:     func(context.Context, identity.AttestationRequest) (time.Time, error) { return time.Now(), nil },
		Authenticate: func(context.Context, secretsapi.Credentials) (secretsapi.Caller, error) {
			return secretsapi.Caller{}, errors.New("no")
		},
		Deploy: func(_ context.Context, n relay.Node) (agbot.Deployment, bool) {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.deployment(n)
		},
		Logger: log,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	sa.agbot, sa.cancel, sa.done = a, cancel, done
	w.net.set(sa.host, a.Handler())
	return nil
}

// stopAgbot stops agbot k. With several agbots its handle on the shared
// state closes first, so that it stops as a process that dies does:
// without leaving, its membership running out by itself.
func (w *World) stopAgbot(k int) {
	sa := w.agbots[k]
	w.net.set(sa.host, nil)
	if sa.conn != nil {
		_ = sa.conn.Close()
	}
	sa.state.freeze(false)
	sa.cancel()
	if err := <-sa.done; err != nil {
		w.violate("agbot %s: Run returned %v", sa.host, err)
	}
}

// crashAgbot stops agbot k (its relay and memory go with it) and starts
// another on the same state.
func (w *World) crashAgbot(k int) error {
	w.stopAgbot(k)
	return w.startAgbot(k)
}

// freezeAgbot pauses agbot k or lets it go on: it answers no request and
// its calls of the state wait, its heartbeats too, so that a freeze
// longer than the membership period ends its lease while it is frozen.
func (w *World) freezeAgbot(k int, frozen bool) {
	w.net.freeze(w.agbots[k].host, frozen)
	w.agbots[k].state.freeze(frozen)
}

// onCancel checks the invariant that no agreement is cancelled without
// every candidate of one of its bindings, the one the cancellation names
// among them, unreadable at once, and alone, for the grace period: a
// node-level secret deleted while its organisation-level fallback is
// readable switches the content and cancels nothing.
func (w *World) onCancel(_ context.Context, id string, c state.Cancellation) {
	w.mu.Lock()
	w.cancels[id] = c
	w.stats.Cancellations++
	ok := false
	now := time.Now()
	for _, a := range w.agents {
		if agbot.AgreementID(relay.Node{Org: org, Node: a.name}) != id {
			continue
		}
		for _, sl := range a.slots {
			named := slices.ContainsFunc(sl.cands, func(i int) bool { return w.secrets[i].name == c.StoreName })
			if named && w.allGoneFor(sl.cands, now, grace) {
				ok = true
			}
		}
	}
	w.mu.Unlock()
	if !ok {
		w.violate("agreement %s cancelled (%s, %v) without %q and the other candidates of its binding unreadable for the grace period %v", id, c.Reason, c.Kind, c.StoreName, grace)
	}
}

// addAgent adds a node and starts its agent. Its service binds two or
// three organisation-level secrets, drawn from the first three (bound by
// many nodes) half the time; with enableNodeLevelSecrets (half the
// nodes) each binding has a node-level candidate, written now or not.
func (w *World) addAgent(ctx context.Context) error {
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	if err != nil {
		return err
	}
	root, err := w.root()
	if err != nil {
		return err
	}
	w.mu.Lock()
	a := &simAgent{name: "node-" + strconv.Itoa(len(w.agents)), keys: keys, root: root}
	if w.cfg.OneBinding {
		a.slots = []*slot{{file: "key0", cands: []int{w.rng.IntN(len(w.secrets))}, floor: map[int]int{}}}
		w.stats.Bindings++
		w.agents = append(w.agents, a)
		w.stats.Agreements++
		w.mu.Unlock()
		return w.startAgent(ctx, a)
	}
	a.nodeLevel = w.rng.IntN(2) == 0
	var write []int
	var chosen []int
	for k := range 2 + w.rng.IntN(2) {
		i := -1
		for i < 0 || slices.Contains(chosen, i) {
			i = w.rng.IntN(w.cfg.Names)
			if w.rng.IntN(2) == 0 {
				i = w.rng.IntN(min(3, w.cfg.Names))
			}
		}
		chosen = append(chosen, i)
		sl := &slot{file: "key" + strconv.Itoa(k), cands: []int{i}, floor: map[int]int{}}
		if a.nodeLevel {
			n := len(w.secrets)
			w.secrets = append(w.secrets, &secret{name: nodeName(a.name, i), node: a.name, base: i, goneSince: time.Now()})
			sl.cands = []int{n, i}
			w.stats.NodeBindings++
			if w.rng.IntN(2) == 0 {
				write = append(write, n)
			}
		}
		a.slots = append(a.slots, sl)
		w.stats.Bindings++
	}
	w.agents = append(w.agents, a)
	w.stats.Agreements++
	w.mu.Unlock()
	for _, n := range write {
		if err := w.put(ctx, n); err != nil {
			return err
		}
	}
	return w.startAgent(ctx, a)
}

// agbotURLs are the agbots an agent polls: every one, and with several
// the replaying relay.
func (w *World) agbotURLs() []string {
	urls := make([]string, len(w.agbots))
	for k, sa := range w.agbots {
		urls[k] = "http://" + sa.host
	}
	if w.net.replay != nil {
		urls = append(urls, "http://"+replayHost)
	}
	return urls
}

func (w *World) startAgent(ctx context.Context, a *simAgent) error {
	log, logs := logtest.NewLogger()
	a.logs = logs
	ag, err := agent.New(ctx, agent.Options{
		Instance: identity.Identity{Provider: "sim", Org: org, Node: a.name, InstanceID: a.name},
		Keys:     a.keys, Agbot: w.keys.Public(), Agbots: w.agbotURLs(),
		Attest:       func(context.Context) (identity.Attestation, error) { return "attested", nil },
		Files:        agentapi.Options{Root: a.root},
		PollInterval: 500 * time.Millisecond, RegisterBackoff: 500 * time.Millisecond, MaxRegisterBackoff: 5 * time.Second,
		HTTPClient: &http.Client{Transport: w.net, Timeout: 5 * time.Second},
		Logger:     log,
	})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	a.agent, a.cancel, a.done, a.started = ag, cancel, make(chan struct{}), true
	go func() {
		defer close(a.done)
		if err := ag.Run(runCtx); err != nil {
			w.violate("agent %s: Run: %v", a.name, err)
		}
	}()
	return nil
}

// stopAgent stops an agent's Run and closes its store.
func (w *World) stopAgent(a *simAgent) {
	if !a.started {
		return
	}
	a.cancel()
	<-a.done
	if err := a.agent.Close(); err != nil {
		w.violate("agent %s: Close: %v", a.name, err)
	}
	a.started = false
}

// restartAgent restarts an agent: over its files (with its replay state),
// over new files (without), or over its files with new keys.
func (w *World) restartAgent(ctx context.Context, a *simAgent, how string) error {
	w.stopAgent(a)
	switch how {
	case "wiped":
		root, err := w.root()
		if err != nil {
			return err
		}
		a.root, a.wiped = root, true
		if !w.cfg.WipeKeepsKeys {
			keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
			if err != nil {
				return err
			}
			a.keys = keys
		}
	case "rekeyed":
		keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
		if err != nil {
			return err
		}
		a.keys = keys
	}
	return w.startAgent(ctx, a)
}

// root returns a new directory for an agent's files, private as
// agentapi.Open requires.
func (w *World) root() (string, error) {
	dir := filepath.Join(w.cfg.TempDir(), "secrets")
	return dir, os.Mkdir(dir, 0o700)
}

// file returns the content of an agent's file of service secret name, if
// it has one.
func (a *simAgent) file(name string) (string, bool) {
	info, ok := a.agent.Files().Instance("web")
	if !ok {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(info.MountSource, name))
	if err != nil {
		return "", false
	}
	var content struct{ Value string }
	if json.Unmarshal(b, &content) != nil {
		return "", false
	}
	return content.Value, true
}

// Check checks the invariants that hold at every moment.
func (w *World) Check(ctx context.Context) {
	for _, a := range w.agents {
		if !a.started {
			continue
		}
		if a.wiped {
			for _, sl := range a.slots {
				sl.floor, sl.had = map[int]int{}, false
			}
			a.wiped = false
		}
		id := agbot.AgreementID(relay.Node{Org: org, Node: a.name})
		ended := a.endedAt
		for _, sl := range a.slots {
			w.checkSlot(a, sl, id, ended)
		}
		if strings.Contains(a.logs.String(), Canary) {
			w.violate("agent %s logged a secret value", a.name)
		}
	}
	for i, logs := range w.agbotLogs {
		if strings.Contains(logs.String(), Canary) {
			w.violate("agbot incarnation %d logged a secret value", i)
		}
	}
	records := func(ctx context.Context, fn func(state.Record) bool) error { return w.state.Backend.Records(ctx, fn) }
	if w.checks != nil {
		records = w.checks.Records
	}
	if w.shared != nil {
		records = w.shared.Records
		for _, p := range w.shared.ClaimViolations() {
			w.violate("%s", p)
		}
	}
	err := records(ctx, func(r state.Record) bool {
		if b, err := json.Marshal(r); err == nil && strings.Contains(string(b), Canary) {
			w.violate("state record %s holds a secret value", r.ID)
		}
		return true
	})
	if err != nil {
		w.violate("reading the state: %v", err)
	}
}

// checkSlot checks an agent's file of one service secret: content of one
// of the binding's candidates, never older than what the file held of the
// same secret; gone only with a cancellation of the agreement id; back
// after a cancellation at ended (non-zero) only once one candidate was
// readable again.
func (w *World) checkSlot(a *simAgent, sl *slot, id string, ended time.Time) {
	content, ok := a.file(sl.file)
	if ok {
		i, v, parsed := parse(content)
		switch {
		case !parsed:
			w.violate("agent %s holds content in %s the store never had", a.name, sl.file)
		case !slices.Contains(sl.cands, i):
			w.violate("agent %s holds secret s%d in %s, bound to %s", a.name, i, sl.file, w.candNames(sl))
		case v < sl.floor[i]:
			w.violate("agent %s went back from version %d to %d of s%d in %s", a.name, sl.floor[i], v, i, sl.file)
		default:
			sl.floor[i] = v
		}
	}
	if sl.had && !ok {
		w.mu.Lock()
		_, cancelled := w.cancels[id]
		w.mu.Unlock()
		if !cancelled && !a.ended.Load() {
			w.violate("agent %s lost its file %s without a cancellation", a.name, sl.file)
		} else {
			// When the check last saw the file, not now: a proposal made
			// after the file went, and before a candidate became
			// unreadable at this step, is no violation (seed 6972).
			a.endedAt = sl.seen
		}
	}
	if ok && !ended.IsZero() {
		// Content after a cancellation comes only with a new proposal,
		// which waits for a candidate of every binding to be readable.
		w.mu.Lock()
		stayedGone := w.stayedGone(sl.cands, ended)
		w.mu.Unlock()
		if stayedGone {
			w.violate("agent %s applied content in %s after its agreement was cancelled, %s unreadable all along", a.name, sl.file, w.candNames(sl))
		}
		a.endedAt = time.Time{}
	}
	sl.had = ok
	if ok {
		sl.seen = time.Now()
	}
}

// candNames names the candidates of a slot, for a violation.
func (w *World) candNames(sl *slot) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, len(sl.cands))
	for k, c := range sl.cands {
		names[k] = fmt.Sprintf("s%d (%s)", c, w.secrets[c].name)
	}
	return strings.Join(names, " then ")
}

// count counts one injected fault or workload event, and prints it with
// the time when the environment variable SIM_TRACE is set.
func (w *World) count(kind string) {
	w.trace("%s", kind)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Faults[kind]++
}

// trace prints a step when the environment variable SIM_TRACE is set.
func (w *World) trace(format string, args ...any) {
	if os.Getenv("SIM_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "sim: t=%s %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

// changeSecret rotates secret i (creating it when missing) or deletes it.
func (w *World) changeSecret(ctx context.Context, i int, deletion bool) error {
	node := w.secrets[i].node != ""
	if deletion {
		w.trace("deletion of s%d (%s)", i, w.secrets[i].name)
		w.stats.Deletions++
		if node {
			w.stats.NodeDeletions++
		}
		return w.del(ctx, i)
	}
	if node && slices.Contains(w.cfg.Without, "node.createOverMissing") && !w.secrets[i].exists && !w.secrets[w.secrets[i].base].exists {
		w.count("heal")
		w.heal()
		return nil
	}
	w.trace("rotation of s%d (%s)", i, w.secrets[i].name)
	w.stats.Rotations++
	if node {
		w.stats.NodeRotations++
	}
	return w.put(ctx, i)
}

// Step draws and applies one workload event or fault, then lets time pass.
func (w *World) Step(ctx context.Context) error {
	w.stats.Steps++
	i := w.draw()
	switch k := w.rng.IntN(20); k {
	case 0, 1, 2, 3, 4, 5:
		if err := w.changeSecret(ctx, i, k == 5); err != nil {
			return err
		}
	case 6:
		w.count("secret.denied")
		w.trace("s%d denied: %v", i, !w.secrets[i].denied)
		w.deny(i, !w.secrets[i].denied)
	case 7:
		w.count("store.outage")
		w.setStoreFault(mock.Faults{Fail: edgesecrets.ErrUnavailable})
	case 8:
		w.count("store.readDenied")
		w.mu.Lock()
		w.denyAll = true
		w.mu.Unlock()
	case 9:
		w.count("store.credentials")
		w.setStoreFault(mock.Faults{Op: "check-credentials", Fail: edgesecrets.ErrPermission})
	case 10:
		// Not store latency: the engine's batch reads a secret once under
		// a sync.Once, and a goroutine waiting on it is not durably
		// blocked, so a slow store call would stop the bubble's clock.
		w.count("store.outage.once")
		w.setStoreFault(mock.Faults{Fail: edgesecrets.ErrUnavailable, Times: 1 + w.rng.IntN(5)})
	case 11:
		if slices.Contains(w.cfg.Without, "state.down") {
			w.count("heal")
			w.heal()
			break
		}
		w.count("state.down")
		w.outage.set(true)
	case 12:
		if w.net.replay != nil && w.rng.IntN(2) == 0 {
			w.count("net.replay")
			w.net.replay.set(true)
			break
		}
		w.count("net.faulty")
		w.net.setFaults(w.rng.Float64()*0.5, w.rng.Float64()*0.3, time.Duration(w.rng.IntN(2000))*time.Millisecond)
	case 13:
		if len(w.agbots) == 1 {
			w.count("agbot.frozen")
			w.net.freeze(host(0), true)
			break
		}
		k := w.rng.IntN(len(w.agbots))
		if w.rng.IntN(2) == 0 {
			w.count("agbot.frozenPastLease")
			w.freezeAgbot(k, true)
			break
		}
		// Paused in the middle of a batch, holding claims: its relay
		// answers nothing from now on, its state calls wait from its
		// next claim on.
		w.count("agbot.frozenMidBatch")
		w.net.freeze(w.agbots[k].host, true)
		w.agbots[k].state.freezeAfterClaim()
	case 14:
		w.count("agbot.crash")
		k := 0
		if len(w.agbots) > 1 {
			k = w.rng.IntN(len(w.agbots))
		}
		if err := w.crashAgbot(k); err != nil {
			return err
		}
	case 15:
		how := []string{"kept", "wiped", "rekeyed"}[w.rng.IntN(3)]
		if how == "wiped" && w.cfg.WipeKeepsKeys {
			w.count("agent.restart.wipedKeepingKeys")
		} else {
			w.count("agent.restart." + how)
		}
		if err := w.restartAgent(ctx, w.agents[w.rng.IntN(len(w.agents))], how); err != nil {
			return err
		}
	case 16:
		if slices.Contains(w.cfg.Without, "identity.lost") {
			w.count("heal")
			w.heal()
			break
		}
		w.count("identity.lost")
		w.certs.lose(w.agents[w.rng.IntN(len(w.agents))].name)
	case 17:
		w.count("node.new")
		if err := w.addAgent(ctx); err != nil {
			return err
		}
	default:
		if w.cfg.EndAgreements && w.ends.IntN(3) == 0 && w.endAgreement() {
			break
		}
		w.count("heal")
		w.heal()
	}
	w.endAgreements(ctx)
	time.Sleep(time.Duration(100+w.rng.IntN(3000)) * time.Millisecond)
	return nil
}

// endAgreement has the embedder end the agreement of a node drawn among
// those not ended (two at least stay): from now on the agbots' Deploy
// hook declines the node, and endAgreements ends its agreement. It
// reports whether it ended one.
func (w *World) endAgreement() bool {
	var live []*simAgent
	for _, a := range w.agents {
		if a.started && !a.ended.Load() {
			live = append(live, a)
		}
	}
	if len(live) <= 2 {
		return false
	}
	a := live[w.ends.IntN(len(live))]
	w.count("agreement.ended")
	w.trace("%s's agreement ended", a.name)
	a.ended.Store(true)
	return true
}

// endAgreements calls Engine.End, as the embedder would until it is
// done, for every ended node's agreement, on the first agbot not frozen
// that answers within a second (one whose state is down does not).
// An agreement already cancelling is left as it is, and a missing one
// (never deployed, or gone) is no error: a deploy under way when the node
// was ended may still register it, and the next call ends that one.
func (w *World) endAgreements(ctx context.Context) {
	for _, a := range w.agents {
		if !a.ended.Load() {
			continue
		}
		id := agbot.AgreementID(relay.Node{Org: org, Node: a.name})
		for _, ab := range w.agbots {
			if ab.agbot == nil || ab.state.frozen() {
				continue
			}
			callCtx, cancel := context.WithTimeout(ctx, time.Second)
			err := ab.agbot.Engine().End(callCtx, id)
			cancel()
			if err == nil || errors.Is(err, state.ErrNotFound) {
				break
			}
		}
	}
}

// draw draws the secret a step changes: half the time a candidate of a
// node's binding (a node-level secret as often as the organisation-level
// one it shadows), else any; with OneBinding, any.
func (w *World) draw() int {
	if w.cfg.OneBinding || w.rng.IntN(2) == 0 {
		return w.rng.IntN(len(w.secrets))
	}
	a := w.agents[w.rng.IntN(len(w.agents))]
	sl := a.slots[w.rng.IntN(len(a.slots))]
	return sl.cands[w.rng.IntN(len(sl.cands))]
}

// heal stops every fault but the per-secret denials.
func (w *World) heal() {
	w.mu.Lock()
	w.denyAll = false
	w.mu.Unlock()
	w.setStoreFault(mock.Faults{})
	w.outage.set(false)
	w.net.setFaults(0, 0, 0)
	if w.net.replay != nil {
		w.net.replay.set(false)
	}
	for k := range w.agbots {
		w.freezeAgbot(k, false)
	}
}

// Quiesce stops every fault, lets the agents converge, and checks each
// holds its secret's current content (or nothing, when the secret is
// gone) within Bound.
func (w *World) Quiesce(ctx context.Context) time.Duration {
	w.heal()
	for i := range w.secrets {
		w.deny(i, false)
	}
	start := time.Now()
	for {
		w.releaseHeld(ctx)
		w.endAgreements(ctx)
		pending := w.unconverged()
		w.Check(ctx)
		if len(pending) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > Bound {
			w.violate("%d s after the faults stopped, agents not current: %s", int(Bound.Seconds()), strings.Join(pending, "; "))
			return time.Since(start)
		}
		time.Sleep(interval)
	}
}

// releaseHeld releases, as an operator would once the faults stopped, the
// cancellations the budget held (more agreements bound to one deleted
// secret than a cycle may cancel): they were decided on confirmed
// absences, and the agents converge once they are made.
func (w *World) releaseHeld(ctx context.Context) {
	for _, ab := range w.agbots {
		if ab.agbot == nil {
			continue
		}
		if n, err := ab.agbot.Engine().ReleaseHeld(ctx); err == nil {
			if n > 0 {
				w.count("operator.releaseHeld")
			}
			return
		}
	}
}

// unconverged names the agents whose files are not what their bindings
// resolve to in the store now: each file the current content of the
// binding's first candidate that exists, or no file at all when a binding
// has none left.
func (w *World) unconverged() []string {
	var out []string
	for _, a := range w.agents {
		if a.ended.Load() {
			for _, sl := range a.slots {
				if _, ok := a.file(sl.file); ok {
					out = append(out, fmt.Sprintf("%s holds %s though its agreement was ended (%s)", a.name, sl.file, w.status(a)))
				}
			}
			continue
		}
		w.mu.Lock()
		want := make([]string, len(a.slots))
		lost := -1
		for k, sl := range a.slots {
			c := w.current(sl.cands)
			if c < 0 {
				lost = k
				continue
			}
			want[k] = value(c, w.secrets[c].version)
		}
		w.mu.Unlock()
		for k, sl := range a.slots {
			got, ok := a.file(sl.file)
			_, v, _ := parse(got)
			if !ok {
				v = 0
			}
			switch {
			case lost >= 0 && ok:
				out = append(out, fmt.Sprintf("%s holds %s though nothing its %s is bound to exists (%s)", a.name, sl.file, a.slots[lost].file, w.status(a)))
			case lost < 0 && !ok:
				out = append(out, fmt.Sprintf("%s holds nothing in %s (%s)", a.name, sl.file, w.status(a)))
			case lost < 0 && got != want[k]:
				gi, _, _ := parse(got)
				wi, wv, _ := parse(want[k])
				out = append(out, fmt.Sprintf("%s holds s%d version %d in %s, the store s%d version %d (%s)", a.name, gi, v, sl.file, wi, wv, w.candNames(sl)))
			}
		}
	}
	return out
}

// status describes the agbot's agreement with a's node, for a violation.
func (w *World) status(a *simAgent) string {
	id := agbot.AgreementID(relay.Node{Org: org, Node: a.name})
	if path := os.Getenv("SIM_DUMP"); path != "" {
		var b strings.Builder
		for i, l := range w.agbotLogs {
			for _, line := range strings.Split(l.String(), "\n") {
				if strings.Contains(line, id) || strings.Contains(line, a.name) {
					fmt.Fprintf(&b, "agbot%d %s\n", i, line)
				}
			}
		}
		b.WriteString(a.logs.String())
		_ = os.WriteFile(path+"."+a.name, []byte(b.String()), 0o600)
	}
	st, err := w.agbots[0].agbot.Engine().Status(context.Background(), id)
	if err != nil {
		w.mu.Lock()
		c, cancelled := w.cancels[id]
		w.mu.Unlock()
		return fmt.Sprintf("agbot: %v; cancelled %v (%s)", err, cancelled, c.Reason)
	}
	return fmt.Sprintf("agbot: phase %v, in sync %v, waiting %q, last error %q, rejection %q", st.Phase, st.InSync, st.Waiting, st.LastError, st.Rejection)
}

// Close stops the agents and the agbot, and returns the run's
// statistics and violations.
func (w *World) Close() (Stats, []string) {
	for _, a := range w.agents {
		w.stopAgent(a)
	}
	for k := range w.agbots {
		w.stopAgbot(k)
	}
	if w.checks != nil {
		_ = w.checks.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.net.mu.Lock()
	for k, v := range w.net.count {
		w.stats.Faults[k] += v
	}
	w.net.mu.Unlock()
	w.stats.Violations = len(w.problems)
	return w.stats, slices.Clone(w.problems)
}
