package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/relay"
)

var node = relay.Node{Org: "myorg", Node: "node-1"}

// hub is the agbot's side: an identity issuer, the agbot's keys and the
// relay, served over loopback.
type hub struct {
	t      *testing.T
	issuer *identity.Issuer
	keys   *agreement.PrivateKeys
	relay  *relay.Server
	url    string
	seq    uint64
}

func newHub(t *testing.T, opts relay.ServerOptions) (*hub, *relay.Client) {
	t.Helper()
	issuer, err := identity.NewIssuer(identity.IssuerOptions{Attest: func(context.Context, identity.AttestationRequest) (time.Time, error) {
		return time.Now(), nil
	}})
	require.NoError(t, err)
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	opts.Verifier, opts.Keys = issuer.Verifier(), keys
	s := relay.NewServer(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := relay.NewClient(srv.URL, srv.Client())
	require.NoError(t, err)
	return &hub{t: t, issuer: issuer, keys: keys, relay: s, url: srv.URL}, c
}

// agent is a registered agent of a node.
type agent struct {
	keys *agreement.PrivateKeys
	id   *identity.Agent
}

func (h *hub) agent(n relay.Node) *agent {
	h.t.Helper()
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(h.t, err)
	id, err := identity.NewAgent(identity.AgentOptions{
		Instance:   identity.Identity{Provider: "demo", Org: n.Org, Node: n.Node, InstanceID: n.Node},
		SigningKey: keys.Signer(), EncryptionKey: keys.Public().EncryptionKey(), Issuer: h.issuer})
	require.NoError(h.t, err)
	_, err = id.Register(h.t.Context(), "attested")
	require.NoError(h.t, err)
	return &agent{keys: keys, id: id}
}

func (a *agent) chain() []byte { return a.id.CertificateChain() }

// post seals a proposal of agreement ag to a and posts it to n's mailbox.
func (h *hub) post(n relay.Node, a *agent, ag string) (uint64, <-chan []byte, agreement.Header) {
	h.t.Helper()
	h.seq++
	p := agreement.Proposal{AgreementID: ag, Services: []agreement.ServiceSecrets{{
		Service: agreement.ServiceRef{Org: n.Org, URL: "com.example.web", Version: "1.0.0"},
		Secrets: map[string]agreement.SecretDetails{"api_key": {Data: edgesecrets.Data{"value": []byte("v")}}}}}}
	env, err := agreement.Seal(h.keys, a.keys.Public(), p, agreement.Header{Sequence: h.seq}, agreement.Options{})
	require.NoError(h.t, err)
	id, replies, err := h.relay.Post(n, env)
	require.NoError(h.t, err)
	hdr, err := agreement.PeekHeader(env, agreement.Options{})
	require.NoError(h.t, err)
	return id, replies, hdr
}

// replyTo seals a's reply to the message with header answered.
func (h *hub) replyTo(a *agent, answered agreement.Header) []byte {
	h.t.Helper()
	h.seq++
	env, err := agreement.Seal(a.keys, h.keys.Public(), agreement.NewReply(answered, true, ""), agreement.Header{Sequence: h.seq}, agreement.Options{})
	require.NoError(h.t, err)
	return env
}

// put publishes chain for n over HTTP and returns the status.
func (h *hub) put(n relay.Node, chain []byte) int {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPut, h.url+"/relay/nodes/"+n.Org+"/"+n.Node+"/certificate", bytes.NewReader(chain))
	require.NoError(h.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// postReply posts a reply to message id over HTTP and returns the status.
func (h *hub) postReply(id uint64, body []byte) int {
	h.t.Helper()
	resp, err := http.Post(fmt.Sprintf("%s/relay/messages/%d/reply", h.url, id), "application/octet-stream", bytes.NewReader(body))
	require.NoError(h.t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestCertificatePublished(t *testing.T) {
	published := make(chan relay.Publication, 4)
	h, c := newHub(t, relay.ServerOptions{OnCertificate: func(p relay.Publication) { published <- p }})
	_, ok := h.relay.Certificate(node)
	assert.False(t, ok)

	a := h.agent(node)
	first := a.chain()
	require.NoError(t, c.PublishCertificate(t.Context(), relay.Publication{Node: node, ChainPEM: first}))
	select {
	case p := <-published:
		assert.Equal(t, relay.Publication{Node: node, ChainPEM: first}, p)
	case <-time.After(10 * time.Second):
		t.Fatal("OnCertificate was not called")
	}
	got, ok := h.relay.Certificate(node)
	require.True(t, ok)
	assert.Equal(t, first, got)

	time.Sleep(1100 * time.Millisecond) // certificate times have a resolution of a second
	_, err := a.id.Renew(t.Context())
	require.NoError(t, err)
	renewed := a.chain()
	require.NoError(t, c.PublishCertificate(t.Context(), relay.Publication{Node: node, ChainPEM: renewed}))
	got, _ = h.relay.Certificate(node)
	assert.Equal(t, renewed, got, "a renewal replaces the chain")

	assert.Equal(t, http.StatusConflict, h.put(node, first), "the older certificate, replayed, does not replace the newer")
	got, _ = h.relay.Certificate(node)
	assert.Equal(t, renewed, got)
}

// An agent over empty files says so with its certificate, and the agbot
// hears it (seed 7 of the fault simulation: an agent wiped with its keys
// kept held nothing until a secret rotated); anything else in the query
// is refused, naming it, and changes nothing.
func TestCertificatePublishedByAnAgentHoldingNothing(t *testing.T) {
	published := make(chan relay.Publication, 4)
	h, c := newHub(t, relay.ServerOptions{OnCertificate: func(p relay.Publication) { published <- p }})
	chain := h.agent(node).chain()

	req, err := http.NewRequest(http.MethodPut, h.url+"/relay/nodes/"+node.Org+"/"+node.Node+"/certificate?holds=some", bytes.NewReader(chain))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), `holds: \"some\" is not \"nothing\"`)
	_, ok := h.relay.Certificate(node)
	assert.False(t, ok, "a refused publication stores nothing")

	for _, holdsNothing := range []bool{true, false} {
		require.NoError(t, c.PublishCertificate(t.Context(), relay.Publication{Node: node, ChainPEM: chain, HoldsNothing: holdsNothing}))
		select {
		case p := <-published:
			assert.Equal(t, relay.Publication{Node: node, ChainPEM: chain, HoldsNothing: holdsNothing}, p)
		case <-time.After(10 * time.Second):
			t.Fatal("OnCertificate was not called")
		}
	}
	assert.Empty(t, published, "the refused publication was not passed on")
}

// Anyone can reach the relay; only a node's certified agent can publish
// its certificate (issue 18: one 4-byte PUT stopped a node's rotations and
// revocation).
func TestCertificateRefusals(t *testing.T) {
	h, c := newHub(t, relay.ServerOptions{})
	a := h.agent(node)
	require.NoError(t, c.PublishCertificate(t.Context(), relay.Publication{Node: node, ChainPEM: a.chain()}))
	node2 := relay.Node{Org: "myorg", Node: "node-2"}
	other := h.agent(node2)
	foreignHub, _ := newHub(t, relay.ServerOptions{})
	foreign := foreignHub.agent(node)
	revoked := h.agent(relay.Node{Org: "myorg", Node: "node-3"})
	require.NoError(t, h.issuer.Revoke(t.Context(), identity.Identity{Provider: "demo", Org: "myorg", Node: "node-3", InstanceID: "node-3"}))

	for name, chain := range map[string][]byte{
		"junk":                         []byte("junk"),
		"another node's certificate":   other.chain(),
		"a certificate of another hub": foreign.chain(),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, http.StatusForbidden, h.put(node, chain))
			got, ok := h.relay.Certificate(node)
			require.True(t, ok)
			assert.Equal(t, a.chain(), got, "the node's certificate stays")
		})
	}
	assert.Equal(t, http.StatusForbidden, h.put(relay.Node{Org: "myorg", Node: "node-3"}, revoked.chain()), "a revoked agent's certificate")
	_, ok := h.relay.Certificate(relay.Node{Org: "myorg", Node: "node-3"})
	assert.False(t, ok)
	_, ok = h.relay.Certificate(node2)
	assert.False(t, ok, "a refused certificate takes no place in the node table")
}

// The agent fetches messages oldest first, each once with its cursor, and
// its reply reaches the agbot waiting for that message only.
func TestMessagesAndReplies(t *testing.T) {
	h, c := newHub(t, relay.ServerOptions{})
	ctx := t.Context()
	a := h.agent(node)
	require.NoError(t, c.PublishCertificate(ctx, relay.Publication{Node: node, ChainPEM: a.chain()}))
	id1, replies1, h1 := h.post(node, a, "ag-1")
	id2, replies2, h2 := h.post(node, a, "ag-1")
	assert.Greater(t, id2, id1)

	m, ok, err := c.Next(ctx, node, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, id1, m.ID)
	m, ok, err = c.Next(ctx, node, id1)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, id2, m.ID)
	_, ok, err = c.Next(ctx, node, id2)
	require.NoError(t, err)
	assert.False(t, ok, "nothing after the last message")
	_, ok, err = c.Next(ctx, relay.Node{Org: "myorg", Node: "node-2"}, 0)
	require.NoError(t, err)
	assert.False(t, ok, "another node's mailbox is empty")

	reply2 := h.replyTo(a, h2)
	require.NoError(t, c.Reply(ctx, id2, reply2))
	assert.Equal(t, reply2, <-replies2)
	assert.Empty(t, replies1)

	h.relay.Done(id1)
	m, ok, err = c.Next(ctx, node, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, id2, m.ID, "a message is gone once the agbot is done with it")
	require.NoError(t, c.Reply(ctx, id1, h.replyTo(a, h1)), "a reply nobody waits for is dropped quietly")
}

// Replies that do not come from the node's certified agent for that very
// message are refused, and nothing is passed on or deleted (issue 18: a
// junk reply per message id was taken as the answer and the message
// deleted before the agent fetched it).
func TestReplyRefusals(t *testing.T) {
	h, c := newHub(t, relay.ServerOptions{})
	ctx := t.Context()
	a := h.agent(node)
	require.NoError(t, c.PublishCertificate(ctx, relay.Publication{Node: node, ChainPEM: a.chain()}))
	impostor := h.agent(relay.Node{Org: "myorg", Node: "node-2"}) // certified, for another node
	id1, replies1, h1 := h.post(node, a, "ag-1")
	id2, replies2, h2 := h.post(node, a, "ag-1")
	tampered := h.replyTo(a, h1)
	tampered[len(tampered)/2] ^= 1

	for name, c := range map[string]struct {
		body   []byte
		status int
	}{
		"junk":                           {[]byte("junk"), http.StatusForbidden},
		"altered":                        {tampered, http.StatusForbidden},
		"sealed by another node's agent": {h.replyTo(impostor, h1), http.StatusForbidden},
		"the answer to another message":  {h.replyTo(a, h2), http.StatusConflict},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.status, h.postReply(id1, c.body))
		})
	}
	assert.Empty(t, replies1, "no refused reply reached the agbot")
	assert.Empty(t, replies2)
	m, ok, err := c.Next(ctx, node, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, id1, m.ID, "the message is still there for the agent")

	good := h.replyTo(a, h1)
	assert.Equal(t, http.StatusAccepted, h.postReply(id1, good))
	assert.Equal(t, good, <-replies1)
	_ = id2

	// A node without a published certificate gets no reply through.
	lone := relay.Node{Org: "myorg", Node: "node-9"}
	b := h.agent(lone)
	id9, _, h9 := h.post(lone, b, "ag-9")
	assert.Equal(t, http.StatusForbidden, h.postReply(id9, h.replyTo(b, h9)))
}

func TestLimits(t *testing.T) {
	h, c := newHub(t, relay.ServerOptions{MaxNodes: 2, MaxMessages: 2})
	a := h.agent(node)
	for range 2 {
		h.post(node, a, "ag-1")
	}
	_, _, err := h.relay.Post(node, mustSeal(t, h, a))
	assert.ErrorIs(t, err, relay.ErrMailboxFull)

	node2, node3 := relay.Node{Org: "myorg", Node: "node-2"}, relay.Node{Org: "myorg", Node: "node-3"}
	require.NoError(t, c.PublishCertificate(t.Context(), relay.Publication{Node: node2, ChainPEM: h.agent(node2).chain()}))
	err = c.PublishCertificate(t.Context(), relay.Publication{Node: node3, ChainPEM: h.agent(node3).chain()})
	assert.ErrorContains(t, err, "status 503")
	assert.Equal(t, http.StatusServiceUnavailable, h.put(node3, h.agent(node3).chain()))
	_, _, err = h.relay.Post(node3, mustSeal(t, h, a))
	assert.ErrorContains(t, err, "too many nodes")
	_, _, err = h.relay.Post(node2, []byte("not an envelope"))
	assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
}

func mustSeal(t *testing.T, h *hub, a *agent) []byte {
	t.Helper()
	h.seq++
	env, err := agreement.Seal(h.keys, a.keys.Public(), agreement.Update{AgreementID: "ag-1",
		Kind: agreement.UpdateKindCancel, Payload: json.RawMessage(`{}`)}, agreement.Header{Sequence: h.seq}, agreement.Options{})
	require.NoError(t, err)
	return env
}

func TestBadRequests(t *testing.T) {
	h, _ := newHub(t, relay.ServerOptions{})
	url := h.url
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		status             int
	}{
		{"empty certificate", http.MethodPut, "/relay/nodes/myorg/node-1/certificate", nil, http.StatusBadRequest},
		{"certificate too large", http.MethodPut, "/relay/nodes/myorg/node-1/certificate", bytes.Repeat([]byte("a"), relay.MaxCertificateSize+1), http.StatusRequestEntityTooLarge},
		{"dot-dot node", http.MethodGet, "/relay/nodes/myorg/%2E%2E/next", nil, http.StatusBadRequest},
		{"bad cursor", http.MethodGet, "/relay/nodes/myorg/node-1/next?after=-1", nil, http.StatusBadRequest},
		{"bad message id", http.MethodPost, "/relay/messages/x/reply", []byte("r"), http.StatusBadRequest},
		{"unknown message", http.MethodPost, "/relay/messages/99/reply", []byte("r"), http.StatusNotFound},
		{"reply too large", http.MethodPost, "/relay/messages/1/reply", bytes.Repeat([]byte("a"), relay.MaxEnvelopeSize+1), http.StatusRequestEntityTooLarge},
		{"wrong method", http.MethodDelete, "/relay/nodes/myorg/node-1/next", nil, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, url+tc.path, bytes.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode)
		})
	}
}

func TestNodeValidate(t *testing.T) {
	assert.NoError(t, node.Validate())
	for _, n := range []relay.Node{{}, {Org: "a/b", Node: "n"}, {Org: "o", Node: ".."}, {Org: "o", Node: "x\x00"}} {
		assert.Error(t, n.Validate(), "%q", n)
	}
	_, err := relay.NewClient("ftp://example.com", nil)
	assert.Error(t, err)
	_, err = relay.NewClient("http://user:pw@127.0.0.1", nil)
	assert.Error(t, err)
}

func TestDecodeMessage(t *testing.T) {
	m, err := relay.DecodeMessage([]byte(`{"id":3,"envelope":"ZW52"}`))
	require.NoError(t, err)
	assert.Equal(t, relay.Message{ID: 3, Envelope: []byte("env")}, m)
	for _, in := range []string{``, `{}`, `{"id":0,"envelope":"ZW52"}`, `{"id":3}`, `{"id":3,"envelope":"ZW52","x":1}`, `{"id":3,"envelope":"not base64!"}`, `[]`} {
		_, err := relay.DecodeMessage([]byte(in))
		assert.Error(t, err, "%s", in)
	}
	_, err = relay.DecodeMessage([]byte(`{"id":3,"envelope":"` + strings.Repeat("A", 2*relay.MaxEnvelopeSize) + `"}`))
	assert.ErrorContains(t, err, "too large")
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"id":3,"envelope":"ZW52"}`))
	f.Add([]byte(`{"id":18446744073709551615,"envelope":"AA=="}`))
	f.Add([]byte(`{"id":1,"envelope":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := relay.DecodeMessage(b)
		if err != nil {
			return
		}
		if m.ID == 0 || len(m.Envelope) == 0 || len(m.Envelope) > relay.MaxEnvelopeSize {
			t.Fatalf("decoded an invalid message: id %d, %d bytes", m.ID, len(m.Envelope))
		}
		again, err := json.Marshal(m)
		require.NoError(t, err)
		m2, err := relay.DecodeMessage(again)
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
}

// A stalled relay does not hold the agent past its context.
func TestClientHonoursContext(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	c, err := relay.NewClient(srv.URL, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, _, err = c.Next(ctx, node, 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// A relay started after another (the agbot restarted) hands out ids above
// FirstID, so an agent whose cursor is at the old relay's last id still
// fetches the new relay's messages.
func TestFirstID(t *testing.T) {
	const first = 1_000_000
	h, c := newHub(t, relay.ServerOptions{FirstID: first})
	a := h.agent(node)
	require.NoError(t, c.PublishCertificate(t.Context(), relay.Publication{Node: node, ChainPEM: a.chain()}))
	id, _, _ := h.post(node, a, "ag-1")
	assert.Equal(t, uint64(first+1), id)
	m, ok, err := c.Next(t.Context(), node, first-1)
	require.NoError(t, err)
	require.True(t, ok, "an agent whose cursor is below FirstID gets the message")
	assert.Equal(t, id, m.ID)
}

// Poll tells the agent whether the relay holds its node's certificate: a
// relay that restarted with its agbot holds none, and the agent publishes
// it again.
func TestPollReportsMissingCertificate(t *testing.T) {
	h, c := newHub(t, relay.ServerOptions{})
	ctx := t.Context()
	_, ok, certified, err := c.Poll(ctx, node, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.False(t, certified, "no certificate published yet")

	a := h.agent(node)
	require.NoError(t, c.PublishCertificate(ctx, relay.Publication{Node: node, ChainPEM: a.chain()}))
	_, ok, certified, err = c.Poll(ctx, node, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.True(t, certified, "the certificate is held")
}

// A certificate refused because the agent's identity is lost (the agbot
// has no record for the instance, or it is revoked) is answered with a
// reason the client turns into an error matching identity.ErrIdentityLost,
// which the agent's identity.Agent.Refused acts on; other refusals do not
// match it.
func TestCertificateRefusalSaysIdentityLost(t *testing.T) {
	ca, err := identity.NewCA(identity.CAOptions{})
	require.NoError(t, err)
	attest := func(context.Context, identity.AttestationRequest) (time.Time, error) { return time.Now(), nil }
	// Two issuers of one hub CA: the relay's agbot verifies with the
	// records of the second, which never saw the agent.
	first, err := identity.NewIssuer(identity.IssuerOptions{Attest: attest, Signer: ca})
	require.NoError(t, err)
	second, err := identity.NewIssuer(identity.IssuerOptions{Attest: attest, Signer: ca})
	require.NoError(t, err)
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	s := relay.NewServer(relay.ServerOptions{Verifier: second.Verifier(), Keys: keys})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := relay.NewClient(srv.URL, srv.Client())
	require.NoError(t, err)
	register := func(is *identity.Issuer, n relay.Node) *identity.Agent {
		k, err := agreement.GenerateKeys(agreement.SuiteX25519)
		require.NoError(t, err)
		a, err := identity.NewAgent(identity.AgentOptions{Instance: identity.Identity{Provider: "demo", Org: n.Org, Node: n.Node, InstanceID: n.Node},
			SigningKey: k.Signer(), EncryptionKey: k.Public().EncryptionKey(), Issuer: is})
		require.NoError(t, err)
		_, err = a.Register(t.Context(), "attested")
		require.NoError(t, err)
		return a
	}
	unknown := register(first, node)
	revokedNode := relay.Node{Org: "myorg", Node: "node-3"}
	revoked := register(second, revokedNode)
	require.NoError(t, second.Revoke(t.Context(), identity.Identity{Provider: "demo", Org: "myorg", Node: "node-3", InstanceID: "node-3"}))
	foreignHub, _ := newHub(t, relay.ServerOptions{})

	for _, tc := range []struct {
		name   string
		node   relay.Node
		chain  []byte
		reason error // nil: not lost
	}{
		{"no record for the instance", node, unknown.CertificateChain(), identity.ErrUnknownInstance},
		{"revoked", revokedNode, revoked.CertificateChain(), identity.ErrRevoked},
		{"a certificate of another hub", node, foreignHub.agent(node).chain(), nil},
		{"another node's certificate", relay.Node{Org: "myorg", Node: "node-4"}, register(second, relay.Node{Org: "myorg", Node: "node-5"}).CertificateChain(), nil},
		{"junk", node, []byte("junk"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.PublishCertificate(t.Context(), relay.Publication{Node: tc.node, ChainPEM: tc.chain})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "status 403")
			if tc.reason == nil {
				assert.NotErrorIs(t, err, identity.ErrIdentityLost)
				return
			}
			assert.ErrorIs(t, err, identity.ErrIdentityLost)
			assert.ErrorIs(t, err, tc.reason)
			assert.True(t, unknown.Refused(err), "the agent takes it")
		})
	}
}

// DropCertificate forgets a node's certificate only if it is still the
// one the agbot found lost; Poll then tells the agent to publish it again.
func TestDropCertificate(t *testing.T) {
	h, c := newHub(t, relay.ServerOptions{})
	ctx := t.Context()
	a := h.agent(node)
	require.NoError(t, c.PublishCertificate(ctx, relay.Publication{Node: node, ChainPEM: a.chain()}))
	assert.False(t, h.relay.DropCertificate(node, []byte("another chain")), "a newer chain stays")
	_, ok := h.relay.Certificate(node)
	require.True(t, ok)

	assert.True(t, h.relay.DropCertificate(node, a.chain()))
	_, ok = h.relay.Certificate(node)
	assert.False(t, ok)
	_, _, certified, err := c.Poll(ctx, node, 0)
	require.NoError(t, err)
	assert.False(t, certified, "the agent is told to publish again")
	assert.False(t, h.relay.DropCertificate(node, a.chain()), "nothing left to drop")
}
