package agbot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/testkit/forgetful"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

const (
	org        = "myorg"
	adminToken = "admin-token"
	userToken  = "user-token"
	interval   = time.Second
)

// hub is an Agbot served on a loopback server, over a store whose faults
// a test sets, and a memory state.
type hub struct {
	t      *testing.T
	store  *mock.Store
	state  state.Backend
	certs  identity.CertStore
	keys   *agreement.PrivateKeys
	agbot  *agbot.Agbot
	srv    *httptest.Server
	logs   *logtest.Buffer
	policy *policy
}

// policy is what the hub deploys: the service's secret "api_key" bound
// to a store name the test may change.
type policy struct {
	mu   sync.Mutex
	name string // the vault secret name bound, under the org
}

func (p *policy) set(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name = name
}

func (p *policy) deployment(t *testing.T) agbot.Deployment {
	p.mu.Lock()
	name := p.name
	p.mu.Unlock()
	svc, err := binding.DecodeServiceDefinition(strings.NewReader(`{"org": "myorg", "url": "web", "version": "1.0.0", "arch": "amd64",
		"deployment": {"services": {"web": {"image": "example/web:1", "secrets": {"api_key": {}}}}}}`))
	require.NoError(t, err)
	target, err := binding.DecodeDeploymentPolicy(strings.NewReader(`{
		"service": {"name": "web", "org": "myorg", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
		"secretBinding": [{"serviceOrgid": "myorg", "serviceUrl": "web", "serviceArch": "amd64",
			"serviceVersionRange": "[1.0.0,INFINITY)", "secrets": [{"api_key": "` + name + `"}]}]}`))
	require.NoError(t, err)
	catalog, err := binding.NewCatalog(svc)
	require.NoError(t, err)
	return agbot.Deployment{Target: target, Resolver: catalog}
}

// authenticate is the hub's stand-in for the exchange: the admin token
// makes an administrator of org, the user token a user.
func authenticate(_ context.Context, c secretsapi.Credentials) (secretsapi.Caller, error) {
	switch c.Secret {
	case adminToken:
		return secretsapi.Caller{Org: org, ID: "admin", Role: secretsapi.RoleAdmin}, nil
	case userToken:
		return secretsapi.Caller{Org: org, ID: "user", Role: secretsapi.RoleUser}, nil
	}
	return secretsapi.Caller{}, errors.New("unknown token")
}

// options are the hub's options but the store and state.
func (h *hub) options() agbot.Options {
	log, logs := logtest.NewLogger()
	h.logs = logs
	ca, err := identity.NewCA(identity.CAOptions{})
	require.NoError(h.t, err)
	return agbot.Options{
		Delivery: delivery.Options{Store: h.store.Store, State: h.state, Keys: h.keys,
			Interval: interval, ReplyTimeout: time.Second, InitialDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
		Identities:   h.certs,
		CA:           ca,
		Attest:       func(context.Context, identity.AttestationRequest) (time.Time, error) { return time.Now(), nil },
		Authenticate: authenticate,
		Deploy: func(_ context.Context, n relay.Node) (agbot.Deployment, bool) {
			return h.policy.deployment(h.t), n.Org == org
		},
		Logger: log,
	}
}

// newHub starts a hub; edit changes its options first.
func newHub(t *testing.T, edit func(*agbot.Options)) *hub {
	t.Helper()
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	h := &hub{t: t, store: mock.NewStore(memory.New()), state: state.NewMemory(), certs: identity.NewMemoryCertStore(),
		keys: keys, policy: &policy{name: "web/api-key"}}
	opts := h.options()
	if edit != nil {
		edit(&opts)
	}
	h.agbot, err = agbot.New(opts)
	require.NoError(t, err)
	h.srv = httptest.NewServer(h.agbot.Handler())
	t.Cleanup(h.srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.agbot.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "Run returns nil once its context ends")
	})
	return h
}

func (h *hub) put(name, value string) {
	h.t.Helper()
	_, err := h.store.Inner.Put(context.Background(), &secretstore.Secret{Name: name, Data: edgesecrets.Data{"value": []byte(value)}}, secretstore.PutOptions{})
	require.NoError(h.t, err)
}

// node is an agent, wired by hand from the library's parts: its identity
// registered through the hub's identity API, its certificate published
// and its messages taken from the hub's relay.
type node struct {
	t      *testing.T
	n      relay.Node
	id     *identity.Agent
	relay  *relay.Client
	keys   *agreement.PrivateKeys
	after  uint64
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	files *agentapi.Store
	recv  *agentapi.Receiver
	types []agreement.MessageType // of the messages applied
}

func (h *hub) node(name string) *node {
	t := h.t
	t.Helper()
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	n := relay.Node{Org: org, Node: name}
	client, err := identity.NewClient(identity.ClientOptions{BaseURL: h.srv.URL + "/identity"})
	require.NoError(t, err)
	id, err := identity.NewAgent(identity.AgentOptions{Instance: identity.Identity{Provider: "test", Org: org, Node: name, InstanceID: name},
		SigningKey: keys.Signer(), EncryptionKey: keys.Public().EncryptionKey(), Hub: client})
	require.NoError(t, err)
	_, err = id.Register(t.Context(), "attested")
	require.NoError(t, err)
	rc, err := relay.NewClient(h.srv.URL, nil)
	require.NoError(t, err)
	nd := &node{t: t, n: n, id: id, relay: rc, keys: keys, done: make(chan struct{})}
	nd.openFiles(h)
	ctx, cancel := context.WithCancel(context.Background())
	nd.cancel = cancel
	nd.publish(true) // new, it holds nothing
	go nd.poll(ctx)
	t.Cleanup(nd.stop)
	return nd
}

// openFiles gives the node new, empty files (and so no replay state).
func (nd *node) openFiles(h *hub) {
	t := nd.t
	files, err := agentapi.Open(t.Context(), agentapi.Options{Root: filepath.Join(t.TempDir(), "secrets")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = files.Close() })
	recv, err := agentapi.NewReceiver(files, agentapi.ReceiverOptions{Keys: nd.keys, Agbot: h.keys.Public(),
		Assign: func(_ context.Context, p agreement.Proposal) (agentapi.Instances, error) {
			return agentapi.Instances{p.Services[0].Service: {ID: nd.n.Node + "-web"}}, nil
		}})
	require.NoError(t, err)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	nd.files, nd.recv = files, recv
}

// publish publishes the node's certificate, saying whether it holds
// nothing.
func (nd *node) publish(holdsNothing bool) {
	nd.t.Helper()
	require.NoError(nd.t, nd.relay.PublishCertificate(nd.t.Context(), relay.Publication{Node: nd.n, ChainPEM: nd.id.CertificateChain(), HoldsNothing: holdsNothing}))
}

// applied returns the types of the messages the node applied.
func (nd *node) applied() []agreement.MessageType {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return slices.Clone(nd.types)
}

// poll takes the node's messages from the relay until ctx ends.
func (nd *node) poll(ctx context.Context) {
	defer close(nd.done)
	for ctx.Err() == nil {
		m, ok, _, err := nd.relay.Poll(ctx, nd.n, nd.after)
		if err != nil || !ok {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		nd.after = m.ID
		nd.mu.Lock()
		got, err := nd.recv.Receive(ctx, m.Envelope)
		if err == nil && got.Err == nil {
			nd.types = append(nd.types, got.Header.Type)
		}
		nd.mu.Unlock()
		if err == nil {
			_ = nd.relay.Reply(ctx, m.ID, got.Reply)
		}
	}
}

func (nd *node) stop() {
	nd.cancel()
	<-nd.done
}

// file returns the value in the node's secret file (the JSON format's
// {"value": ...}), or "" while there is none.
func (nd *node) file() string {
	nd.mu.Lock()
	files := nd.files
	nd.mu.Unlock()
	info, ok := files.Instance(nd.n.Node + "-web")
	if !ok {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(info.MountSource, "api_key"))
	if err != nil {
		return ""
	}
	var content struct{ Value string }
	require.NoError(nd.t, json.Unmarshal(b, &content))
	return content.Value
}

// eventually waits, boundedly, for the node's file to hold want.
func (nd *node) eventually(want string, within time.Duration) {
	nd.t.Helper()
	require.Eventually(nd.t, func() bool { return nd.file() == want }, within, 10*time.Millisecond,
		"the node's file holds %q (it holds %q)", want, nd.file())
}

func TestNewNamesEveryProblem(t *testing.T) {
	_, err := agbot.New(agbot.Options{Delivery: delivery.Options{Agents: nil, Transport: struct{ delivery.Transport }{}}})
	require.Error(t, err)
	for _, field := range []string{"Delivery.Store", "Delivery.State", "Delivery.Keys", "Identities", "CA", "Attest", "Authenticate", "Deploy",
		"Delivery.Agents and Delivery.Transport must be nil"} {
		assert.Contains(t, err.Error(), field)
	}
}

// The whole path: an agent that registers and publishes its certificate
// is deployed, in sync, and gets the rotation.
func TestAnAgentThatPublishesItsCertificateIsDeployedAndKeptCurrent(t *testing.T) {
	h := newHub(t, nil)
	h.put("myorg/web/api-key", "v1")
	nd := h.node("node-1")
	nd.eventually("v1", 10*time.Second)
	st, err := h.agbot.Engine().Wait(t.Context(), agbot.AgreementID(nd.n))
	require.NoError(t, err)
	assert.True(t, st.InSync)
	assert.Equal(t, "myorg/node-1", st.Node)

	h.put("myorg/web/api-key", "v2")
	nd.eventually("v2", 10*time.Second)
	assert.Contains(t, h.logs.String(), "node deployed")
}

// A first deploy is never refused for the agbot's own trouble: with the
// store down, or refusing the agbot every call, while the agent first
// publishes its certificate, the node is deployed within two intervals
// of the store's return (issue 28, item 3).
func TestAFirstDeployThroughTheAgbotsOwnTroubleIsDeployedWhenItEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind error
	}{
		{"store unavailable", edgesecrets.ErrUnavailable},
		{"agbot refused every call", edgesecrets.ErrPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t, nil)
			h.put("myorg/web/api-key", "v1")
			h.store.SetFaults(mock.Faults{Fail: tc.kind})
			nd := h.node("node-1")
			require.Eventually(t, func() bool { return strings.Contains(h.logs.String(), "deployment retried by the engine") }, 10*time.Second, 10*time.Millisecond)
			time.Sleep(2 * interval)
			assert.Empty(t, nd.file(), "nothing is delivered while the store cannot say")
			assert.NotContains(t, h.logs.String(), "deployment refused")

			back := time.Now()
			h.store.SetFaults(mock.Faults{})
			nd.eventually("v1", 10*time.Second)
			t.Logf("deployed %v after the store came back (interval %v)", time.Since(back), interval)
		})
	}
}

// A deployment waiting for a secret that does not exist is deployed once
// it does; a definite validation error is refused with its report.
func TestAWaitingDeploymentIsDeployedWhenItsSecretExists(t *testing.T) {
	h := newHub(t, nil)
	nd := h.node("node-1")
	require.Eventually(t, func() bool { return strings.Contains(h.logs.String(), "deployment waits for secrets") }, 10*time.Second, 10*time.Millisecond)
	h.put("myorg/web/api-key", "v1")
	nd.eventually("v1", 10*time.Second)
}

// Redeploy applies a changed binding to nodes that have an agreement: the
// service's file takes the newly bound secret's content in place.
func TestRedeployRebindsInPlace(t *testing.T) {
	h := newHub(t, nil)
	h.put("myorg/web/api-key", "old")
	h.put("myorg/web/api-key-2", "new")
	nd := h.node("node-1")
	nd.eventually("old", 10*time.Second)

	h.policy.set("web/api-key-2")
	n, err := h.agbot.Redeploy(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	nd.eventually("new", 10*time.Second)
	_, err = h.agbot.Engine().Status(t.Context(), agbot.AgreementID(nd.n))
	require.NoError(t, err, "the same agreement")
}

// An agent that says it holds nothing when it publishes its certificate
// is proposed its agreement again if, and only if, the agbot had one for
// it: a new agent saying so gets one proposal, then updates (a stale
// "holds nothing" once re-proposed it on the next deploy, and its service
// never heard of the rebound secret: the examples' SIGHUP test); an agent
// that lost its files but kept its keys gets its secrets again with no
// rotation (the fault simulation's seed 7).
func TestAnAgentHoldingNothingIsProposedItsAgreementAgain(t *testing.T) {
	h := newHub(t, nil)
	h.put("myorg/web/api-key", "old")
	h.put("myorg/web/api-key-2", "new")
	nd := h.node("node-1") // new: it says it holds nothing
	nd.eventually("old", 10*time.Second)
	_, err := h.agbot.Engine().Wait(t.Context(), agbot.AgreementID(nd.n)) // the acceptance heard
	require.NoError(t, err)
	proposal := []agreement.MessageType{agreement.TypeProposal}

	h.policy.set("web/api-key-2")
	_, err = h.agbot.Redeploy(t.Context())
	require.NoError(t, err)
	nd.eventually("new", 10*time.Second)
	assert.Equal(t, append(proposal, agreement.TypeUpdate), nd.applied(), "a new agent: one proposal, then an update")

	nd.openFiles(h) // wiped, its keys kept
	require.Empty(t, nd.file())
	nd.publish(true)
	nd.eventually("new", 10*time.Second)
	assert.Equal(t, append(proposal, agreement.TypeUpdate, agreement.TypeProposal), nd.applied(), "proposed again")
}

// A node the embedder does not deploy to gets nothing.
func TestANodeDeploySaysNoToGetsNothing(t *testing.T) {
	h := newHub(t, func(o *agbot.Options) {
		o.Deploy = func(context.Context, relay.Node) (agbot.Deployment, bool) { return agbot.Deployment{}, false }
	})
	h.put("myorg/web/api-key", "v1")
	nd := h.node("node-1")
	require.Eventually(t, func() bool { return strings.Contains(h.logs.String(), "nothing to deploy") }, 10*time.Second, 10*time.Millisecond)
	_, err := h.agbot.Engine().Status(t.Context(), agbot.AgreementID(nd.n))
	assert.ErrorIs(t, err, state.ErrNotFound)
}

// The status routes are for administrators: no credentials 401, a user
// 403, an administrator the engine's health with its conditions, an
// agreement's status, the listing by condition and reason (bad queries
// 400, naming what is wrong) and the release of held cancellations.
func TestStatusRoutesAreForAdministrators(t *testing.T) {
	h := newHub(t, nil)
	h.put("myorg/web/api-key", "v1")
	nd := h.node("node-1")
	nd.eventually("v1", 10*time.Second)
	_, err := h.agbot.Engine().Wait(t.Context(), agbot.AgreementID(nd.n))
	require.NoError(t, err)
	get := func(path, token string) (int, string) {
		method := http.MethodGet
		if path == secretsapi.ReleasePath {
			method = http.MethodPost
		}
		req, err := http.NewRequest(method, h.srv.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	id := agbot.AgreementID(nd.n)
	for _, tc := range []struct {
		path, token string
		status      int
		body        string
	}{
		{secretsapi.AdminHealthPath, "", http.StatusUnauthorized, "credentials"},
		{secretsapi.AdminHealthPath, "wrong", http.StatusUnauthorized, "credentials"},
		{secretsapi.AdminHealthPath, userToken, http.StatusForbidden, "administrator"},
		{secretsapi.AgreementsPath + "/" + id, userToken, http.StatusForbidden, "administrator"},
		{secretsapi.AdminHealthPath, adminToken, http.StatusOK, `"StoreProblem":""`},
		{secretsapi.AgreementsPath + "/" + id, adminToken, http.StatusOK, `"InSync":true`},
		{secretsapi.AgreementsPath + "/" + "nope", adminToken, http.StatusNotFound, "no agreement nope"},
		{secretsapi.AdminHealthPath, adminToken, http.StatusOK, `"Conditions":[{"Condition":"in_sync","Reason":"","Agreements":1}]`},
		{secretsapi.AgreementsPath, userToken, http.StatusForbidden, "administrator"},
		{secretsapi.AgreementsPath, adminToken, http.StatusOK, `{"Agreements":[],"Next":""}`},
		{secretsapi.AgreementsPath + "?condition=in_sync", adminToken, http.StatusOK, `"ID":"` + id + `","Node":"myorg/node-1","Condition":"in_sync"`},
		{secretsapi.AgreementsPath + "?reason=FormatUnrenderable&limit=5", adminToken, http.StatusOK, `{"Agreements":[],"Next":""}`},
		{secretsapi.AgreementsPath + "?reason=Nope", adminToken, http.StatusBadRequest, `unknown reason \"Nope\"`},
		{secretsapi.AgreementsPath + "?limit=0", adminToken, http.StatusBadRequest, "limit"},
		{secretsapi.AgreementsPath + "?sort=id", adminToken, http.StatusBadRequest, `unknown query parameter \"sort\"`},
		{secretsapi.ReleasePath, userToken, http.StatusForbidden, "administrator"},
		{secretsapi.ReleasePath, adminToken, http.StatusOK, `{"released":0}`},
	} {
		status, body := get(tc.path, tc.token)
		assert.Equal(t, tc.status, status, "%s with %q: %s", tc.path, tc.token, body)
		assert.Contains(t, body, tc.body, tc.path)
	}
	// anax's open /health: the engine's last state and store successes.
	status, body := get("/health", "")
	require.Equal(t, http.StatusOK, status)
	var health struct {
		Live struct{ LastDBHeartbeat, LastVaultInteraction int64 } `json:"liveHealth"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &health), body)
	assert.InDelta(t, time.Now().Unix(), health.Live.LastDBHeartbeat, 60, body)
	assert.InDelta(t, time.Now().Unix(), health.Live.LastVaultInteraction, 60, body)
}

// downState is a state.Backend whose Get fails, as an unreachable state does,
// while it is down.
type downState struct {
	state.Backend
	down atomic.Bool
}

func (s *downState) Get(ctx context.Context, id string) (state.Record, error) {
	if s.down.Load() {
		return state.Record{}, fmt.Errorf("get %s: %w", id, state.ErrStateUnavailable)
	}
	return s.Backend.Get(ctx, id)
}

// A certificate published while the state does not answer is deployed
// once it does: the agbot's own trouble never drops a deploy (found by
// the fault simulation, seeds 4 and 23 of internal/testkit/sim).
func TestADeployThroughAStateOutageIsDeployedWhenItEnds(t *testing.T) {
	var st *downState
	h := newHub(t, func(o *agbot.Options) {
		st = &downState{Backend: o.Delivery.State}
		o.Delivery.State = st
	})
	h.put("myorg/web/api-key", "v1")
	st.down.Store(true)
	nd := h.node("node-1")
	require.Eventually(t, func() bool {
		return strings.Contains(h.logs.String(), "the state did not answer; deploying once it does")
	}, 10*time.Second, 10*time.Millisecond)
	st.down.Store(false)
	nd.eventually("v1", 15*time.Second)
}

// A deploy whose agent's identity the records lost drops its certificate
// from the relay, as Keys does, so that the agent learns it and registers
// again (found by the fault simulation, seed 16 of internal/testkit/sim).
func TestADeployOfALostIdentityDropsItsCertificate(t *testing.T) {
	records := forgetful.New()
	h := newHub(t, func(o *agbot.Options) { o.Identities = records })
	h.put("myorg/web/api-key", "v1")
	nd := h.node("node-1")
	nd.eventually("v1", 10*time.Second)

	_, err := h.agbot.Engine().Wait(t.Context(), agbot.AgreementID(nd.n))
	require.NoError(t, err, "in sync: nothing is sent that would verify the agent meanwhile")
	records.Forget()
	n, err := h.agbot.Redeploy(t.Context()) // as the secret coming back does
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool {
		_, _, certified, err := nd.relay.Poll(t.Context(), nd.n, 1<<62)
		return err == nil && !certified
	}, 10*time.Second, 10*time.Millisecond, "the relay drops the certificate")
	assert.Contains(t, h.logs.String(), "the agent's identity is lost; its certificate is dropped from the relay")
}
