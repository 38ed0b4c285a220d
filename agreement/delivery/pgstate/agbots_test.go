package pgstate_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
)

// These are the pieces of the tests that run real delivery engines on one
// PostgreSQL: each agbot is an engine with a pgstate State of its own, reading
// the store over the wire (the Secrets Manager endpoint of
// internal/testkit/awsmock, which every agbot process reaches and which counts
// every request by secret) and sending to real agents (agentapi.Receiver over
// an agentapi.Store each) over HTTP. An agbot runs in the test process, or in a
// child process of the test binary that the test kills with SIGKILL.

// agbotConfig is everything an agbot needs; a child gets it as JSON in
// envAgbotChild.
type agbotConfig struct {
	Member       string
	PostgresURL  string
	StoreURL     string
	FleetURL     string
	KeysFile     string
	Interval     time.Duration
	ReplyTimeout time.Duration
	LeasePeriod  time.Duration
	Timeout      time.Duration
}

// agbotAccessKey is the agbots' access key to the store, apart from the
// test's own.
const agbotAccessKey = "AKIDAGBOT"

// envAgbotChild makes the test binary an agbot (see TestMain).
const envAgbotChild = "PGSTATE_TEST_AGBOT"

// runningAgbot is an agbot running in this process.
type runningAgbot struct {
	engine  *delivery.Engine
	state   state.Backend
	cancels atomic.Int64 // OnCancel calls
	stop    func()
}

// startAgbot starts an agbot: its engine (which keeps its membership of
// the shared state), until ctx ends (then it leaves).
func startAgbot(ctx context.Context, cfg agbotConfig, log *slog.Logger) (*runningAgbot, error) {
	store, err := awssm.New(ctx, awssm.Options{AWSConfig: &aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(agbotAccessKey, "agbot-secret", ""),
		BaseEndpoint: aws.String(cfg.StoreURL),
	}})
	if err != nil {
		return nil, err
	}
	st, _, err := pgstate.Open(ctx, pgstate.Options{URL: cfg.PostgresURL, LeasePeriod: cfg.LeasePeriod, Timeout: cfg.Timeout, Logger: log})
	if err != nil {
		return nil, err
	}
	keys, err := agreement.ReadPrivateKeysFile(cfg.KeysFile)
	if err != nil {
		return nil, err
	}
	fleet := &fleetClient{base: cfg.FleetURL, member: cfg.Member, keys: map[string]*agreement.PublicKeys{}}
	a := &runningAgbot{state: st}
	a.engine, err = delivery.New(delivery.Options{
		Store: store, State: st, Keys: keys, Agents: fleet, Transport: fleet,
		OnCancel:     func(context.Context, string, state.Cancellation) { a.cancels.Add(1) },
		Interval:     cfg.Interval,
		Grace:        time.Hour,
		ReplyTimeout: cfg.ReplyTimeout,
		InitialDelay: 100 * time.Millisecond,
		MaxDelay:     2 * time.Second,
		Senders:      32,
		Member:       cfg.Member,
		Logger:       log,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.engine.Run(ctx) })
	a.stop = func() {
		cancel()
		wg.Wait()
		_ = st.Close()
		_ = store.Close()
	}
	return a, nil
}

// runAgbotChild is the child process: an agbot until it is killed (or
// for ten minutes at most, should the test binary die first).
func runAgbotChild(cfgJSON string) {
	var cfg agbotConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "agbot child:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	a, err := startAgbot(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agbot child:", err)
		os.Exit(2)
	}
	fmt.Println("agbot running")
	<-ctx.Done()
	a.stop()
}

// startChildAgbot starts an agbot in a child process; the returned kill
// sends it SIGKILL and waits for it.
func startChildAgbot(t *testing.T, cfg agbotConfig) (kill func()) {
	t.Helper()
	cfgJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envAgbotChild+"="+string(cfgJSON))
	logFile, err := os.Create(filepath.Join(t.TempDir(), cfg.Member+".log"))
	require.NoError(t, err)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = logFile.Close()
		})
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("log of the child agbot %s (last 8 KiB):\n%s", cfg.Member, tail(b, 8<<10))
			}
		}
	})
	line := make([]byte, len("agbot running\n"))
	if _, err := io.ReadFull(stdout, line); err != nil {
		kill()
		b, _ := os.ReadFile(logFile.Name())
		t.Fatalf("the child agbot did not start: %v\n%s", err, tail(b, 4<<10))
	}
	return kill
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// fleetClient is an agbot's delivery.Agents and delivery.Transport: the
// agents' keys and mailboxes over HTTP. It names its agbot in a header,
// so the fleet can count who sent what.
type fleetClient struct {
	base, member string
	mu           sync.Mutex
	keys         map[string]*agreement.PublicKeys
}

func (f *fleetClient) Keys(ctx context.Context, node string) (*agreement.PublicKeys, error) {
	f.mu.Lock()
	k, ok := f.keys[node]
	f.mu.Unlock()
	if ok {
		return k, nil
	}
	body, status, err := f.do(ctx, http.MethodGet, "/agents/"+node+"/keys", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("fleet: keys of %s: status %d", node, status)
	}
	k = new(agreement.PublicKeys)
	if err := k.UnmarshalText(body); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.keys[node] = k
	f.mu.Unlock()
	return k, nil
}

func (f *fleetClient) Send(ctx context.Context, m delivery.Message) ([]byte, error) {
	body, status, err := f.do(ctx, http.MethodPost, "/agents/"+m.Node+"/messages", m.Envelope)
	switch {
	case err != nil:
		return nil, err
	case status == http.StatusOK:
		return body, nil
	case status == http.StatusConflict:
		return nil, nil // dropped by the agent: no reply comes
	}
	return nil, fmt.Errorf("fleet: send to %s: status %d", m.Node, status)
}

func (f *fleetClient) do(ctx context.Context, method, path string, body []byte) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, f.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("X-Agbot", f.member)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return b, res.StatusCode, err
}

// fleet is the agents of the test's nodes, served over HTTP.
type fleet struct {
	t      *testing.T
	agbot  *agreement.PublicKeys
	agents map[string]*fleetAgent
	srv    *httptest.Server

	// lanes, when not nil, throttles deliveries: a message waits for a
	// lane and holds it for delay (a slow network).
	lanes chan struct{}
	delay time.Duration

	mu    sync.Mutex
	since time.Time            // received counts from here
	sent  map[string]int       // messages received per sending agbot
	log   []received           // every message applied, in order
	wrote map[slotKey][]string // file contents written per slot, in order
}

type slotKey struct{ instance, name string }

type received struct {
	node, agbot string
	header      agreement.Header
	kind        string
	changes     map[string][]string
	at          time.Time
}

type fleetAgent struct {
	keys  *agreement.PrivateKeys
	store *agentapi.Store
	recv  *agentapi.Receiver
}

// newFleet starts nodes agents that pin the agbot's keys.
func newFleet(t *testing.T, agbot *agreement.PublicKeys, nodes int) *fleet {
	f := &fleet{t: t, agbot: agbot, agents: map[string]*fleetAgent{}, sent: map[string]int{}, wrote: map[slotKey][]string{}}
	for i := range nodes {
		node := fmt.Sprintf("node-%03d", i)
		keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
		require.NoError(t, err)
		store, err := agentapi.Open(t.Context(), agentapi.Options{Root: filepath.Join(t.TempDir(), node)})
		require.NoError(t, err)
		t.Cleanup(func() { _ = store.Close() })
		recv, err := agentapi.NewReceiver(store, agentapi.ReceiverOptions{Keys: keys, Agbot: agbot, Assign: assignInstances})
		require.NoError(t, err)
		f.agents[node] = &fleetAgent{keys: keys, store: store, recv: recv}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /agents/{node}/keys", f.serveKeys)
	mux.HandleFunc("POST /agents/{node}/messages", f.serveMessage)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// assignInstances gives each service of a proposal the instance
// "<agreement>-<index>".
func assignInstances(_ context.Context, p agreement.Proposal) (agentapi.Instances, error) {
	out := agentapi.Instances{}
	for i, ss := range p.Services {
		out[ss.Service] = agentapi.Instance{ID: fmt.Sprintf("%s-%d", p.AgreementID, i)}
	}
	return out, nil
}

func (f *fleet) serveKeys(w http.ResponseWriter, r *http.Request) {
	a, ok := f.agents[r.PathValue("node")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	text, err := a.keys.Public().MarshalText()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(text)
}

func (f *fleet) serveMessage(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	a, ok := f.agents[node]
	if !ok {
		http.NotFound(w, r)
		return
	}
	envelope, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f.mu.Lock()
	lanes, delay := f.lanes, f.delay
	f.mu.Unlock()
	if lanes != nil {
		select {
		case lanes <- struct{}{}:
		case <-r.Context().Done():
			return // the sender is gone: the message never arrives
		}
		time.Sleep(delay)
		<-lanes
		if r.Context().Err() != nil {
			return
		}
	}
	got, err := a.recv.Receive(r.Context(), envelope)
	if err != nil {
		w.WriteHeader(http.StatusConflict) // replayed or not authentic: no reply
		return
	}
	f.record(node, r.Header.Get("X-Agbot"), a, got)
	_, _ = w.Write(got.Reply)
}

// record notes a message an agent applied and what it wrote.
func (f *fleet) record(node, agbot string, a *fleetAgent, got agentapi.Received) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent[agbot]++
	f.log = append(f.log, received{node: node, agbot: agbot, header: got.Header, kind: got.Kind, changes: got.Changes, at: time.Now()})
	for instance, names := range got.Changes {
		for _, n := range names {
			b, err := a.store.ReadSecret(context.Background(), instance, n)
			if err != nil {
				f.t.Errorf("reading %s/%s back: %v", instance, n, err)
				continue
			}
			k := slotKey{instance, n}
			f.wrote[k] = append(f.wrote[k], string(b))
		}
	}
}

// throttle makes deliveries slow (lanes at once, delay each), or fast
// again with lanes 0.
func (f *fleet) throttle(lanes int, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lanes, f.delay = nil, 0
	if lanes > 0 {
		f.lanes, f.delay = make(chan struct{}, lanes), delay
	}
}

// reset forgets the messages received so far.
func (f *fleet) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.since, f.sent, f.log, f.wrote = time.Now(), map[string]int{}, nil, map[slotKey][]string{}
}

// sentBy returns how many messages the agents applied from agbot since
// the last reset.
func (f *fleet) sentBy(agbot string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[agbot]
}

// written returns a copy of the contents written per slot since the last
// reset, and the messages applied.
func (f *fleet) written() (map[slotKey][]string, []received) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[slotKey][]string, len(f.wrote))
	for k, v := range f.wrote {
		out[k] = append([]string(nil), v...)
	}
	return out, append([]received(nil), f.log...)
}

// countingStore is the store every agbot reads: the wire-level Secrets
// Manager endpoint, with every request of the agbots (their access key,
// not the test's) that names a secret counted by operation and name.
type countingStore struct {
	mock *smmock.Server
	srv  *httptest.Server

	mu    sync.Mutex
	reads []storeRead
}

// storeRead is one request of an agbot: its operation, the secret it
// names (DescribeSecret, GetSecretValue) or the secrets its answer lists
// (ListSecrets), and whether it was a credential check (a ListSecrets of
// at most one entry, see awssm's CheckCredentials).
type storeRead struct {
	op      string
	names   []string
	at      time.Time
	isCheck bool
}

func newCountingStore(t *testing.T) *countingStore {
	c := &countingStore{mock: smmock.New(smmock.Options{})}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager.")
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !strings.Contains(r.Header.Get("Authorization"), "Credential="+agbotAccessKey+"/") {
			c.mock.ServeHTTP(w, r)
			return
		}
		var req struct {
			SecretId     string
			SecretIdList []string
			MaxResults   int
		}
		_ = json.Unmarshal(body, &req)
		read := storeRead{op: op, at: time.Now(), isCheck: op == "ListSecrets" && req.MaxResults == 1}
		if req.SecretId != "" {
			read.names = []string{req.SecretId}
		}
		read.names = append(read.names, req.SecretIdList...)
		if op == "ListSecrets" {
			rec := httptest.NewRecorder()
			c.mock.ServeHTTP(rec, r)
			var listed struct{ SecretList []struct{ Name string } }
			_ = json.Unmarshal(rec.Body.Bytes(), &listed)
			for _, e := range listed.SecretList {
				read.names = append(read.names, e.Name)
			}
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		} else {
			c.mock.ServeHTTP(w, r)
		}
		c.mu.Lock()
		c.reads = append(c.reads, read)
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// client returns a store client of the endpoint, for the test's writes.
func (c *countingStore) client(t *testing.T) *secretstore.Store {
	s, err := awssm.New(t.Context(), awssm.Options{AWSConfig: &aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", ""),
		BaseEndpoint: aws.String(c.srv.URL),
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// polls returns the watchers' polls between from and to: how many
// requests they made (ListSecrets pages, and DescribeSecret requests
// that were not part of a value read), and, per secret, how many of them
// answered about it. A value read (Get, when a message is sealed) is a
// DescribeSecret and a GetSecretValue of the name, and a batch read a
// BatchGetSecretValue and a DescribeSecret of each name (see
// secretstore/awssm), so those DescribeSecret requests are not polls; credential checks are
// not polls either.
func (c *countingStore) polls(from, to time.Time) (requests int, per map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	per = map[string]int{}
	for _, r := range c.reads {
		if r.at.Before(from) || !r.at.Before(to) || r.isCheck {
			continue
		}
		switch r.op {
		case "ListSecrets", "DescribeSecret":
			requests++
			for _, n := range r.names {
				per[n]++
			}
		case "GetSecretValue", "BatchGetSecretValue":
			// Each value read comes with a DescribeSecret of its name.
			for _, n := range r.names {
				requests--
				per[n]--
			}
		}
	}
	return requests, per
}

// requests returns the agbots' requests of op between from and to, per
// secret named.
func (c *countingStore) requests(op string, from, to time.Time) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, r := range c.reads {
		if r.op == op && !r.at.Before(from) && r.at.Before(to) {
			for _, n := range r.names {
				out[n]++
			}
		}
	}
	return out
}

// testAgreements returns n agreements over the nodes, each binding two of
// the names (as two service secrets of one service).
func testAgreements(n, nodes int, names []string) []delivery.Agreement {
	out := make([]delivery.Agreement, n)
	for i := range n {
		out[i] = delivery.Agreement{
			ID:   fmt.Sprintf("agr-%04d", i),
			Node: fmt.Sprintf("node-%03d", i%nodes),
			Services: []binding.ServiceBinding{{
				Service: agreement.ServiceRef{Org: "org", URL: "svc", Version: "1.0.0"},
				Secrets: map[string]binding.BoundSecret{
					"db":  {StoreNames: []string{names[i%len(names)]}, Format: agreement.FormatJSON},
					"api": {StoreNames: []string{names[(i*7+3)%len(names)]}, Format: agreement.FormatJSON},
				},
			}},
		}
	}
	return out
}

// world is what the agbot tests share: the store with its secrets at
// generation 1 (each value holds the canary), the agbots' keys in a file,
// and the agents.
type world struct {
	store    *countingStore
	writer   *secretstore.Store
	canary   string
	names    []string
	keysFile string
	fleet    *fleet
}

func newWorld(t *testing.T, secrets, nodes int) *world {
	w := &world{store: newCountingStore(t), canary: "canary-" + rand.Text(), keysFile: filepath.Join(t.TempDir(), "agbot.keys")}
	w.writer = w.store.client(t)
	for i := range secrets {
		w.names = append(w.names, fmt.Sprintf("org/secret-%02d", i))
		putSecret(t, w.writer, w.names[i], w.canary, 1)
	}
	keys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	require.NoError(t, err)
	require.NoError(t, keys.WriteFile(w.keysFile))
	w.fleet = newFleet(t, keys.Public(), nodes)
	return w
}

// config is an agbot of the world on the database at url: a 1 s polling
// interval, a 5 s lease period, a 10 s reply timeout (agents under the
// race detector on a loaded machine are slow: a shorter one has the
// engines resend much of their work), and timeout for each call to the
// database.
func (w *world) config(member, url string, timeout time.Duration) agbotConfig {
	return agbotConfig{
		Member: member, PostgresURL: url, StoreURL: w.store.srv.URL, FleetURL: w.fleet.srv.URL, KeysFile: w.keysFile,
		Interval: time.Second, ReplyTimeout: 10 * time.Second, LeasePeriod: 5 * time.Second, Timeout: timeout,
	}
}

// putSecret writes name with a value that holds the canary and the
// generation, so an agent's file shows which content it holds.
func putSecret(t *testing.T, store *secretstore.Store, name, canary string, generation int) {
	t.Helper()
	_, err := store.Put(t.Context(), &secretstore.Secret{Name: name, Data: edgesecrets.Data{
		"password": fmt.Appendf(nil, "%s-%s-gen%d", canary, strings.ReplaceAll(name, "/", "_"), generation),
	}}, secretstore.PutOptions{})
	require.NoError(t, err)
}

// generationOf returns the generation a file written by an agent holds.
func generationOf(content string) int {
	i := strings.LastIndex(content, "-gen")
	if i < 0 {
		return -1
	}
	var g int
	if _, err := fmt.Sscanf(content[i+len("-gen"):], "%d", &g); err != nil {
		return -1
	}
	return g
}

// converged reports whether every record is in sync with nothing in
// flight, reading the state as an observer.
func converged(ctx context.Context, st state.Backend) (bool, error) {
	ok := true
	err := st.Records(ctx, func(r state.Record) bool {
		if r.Phase != state.PhaseActive || !r.Proposed || r.InFlight != nil {
			ok = false
			return false
		}
		for _, s := range r.Slots {
			if s.Desired.IsZero() || s.Desired != s.Acked {
				ok = false
				return false
			}
		}
		return true
	})
	return ok, err
}

// waitConverged waits until every record is in sync and every slot in
// want holds the generation given there (the agents hold the newest
// content: a record is also in sync before its agbot saw a rotation).
func waitConverged(t *testing.T, observer state.Backend, fl *fleet, want map[slotKey]int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	for time.Since(start) < within {
		ok, err := converged(t.Context(), observer)
		last = err
		if ok && fl.holds(want) {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the agreements did not converge within %s (last error: %v)", within, last)
	return 0
}

// holds reports whether the last content written to each slot in want,
// since the last reset, is of the generation given there.
func (f *fleet) holds(want map[slotKey]int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, gen := range want {
		w := f.wrote[k]
		if len(w) == 0 || generationOf(w[len(w)-1]) != gen {
			return false
		}
	}
	return true
}
