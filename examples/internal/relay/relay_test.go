package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/examples/internal/relay"
)

var node = relay.Node{Org: "myorg", Node: "node-1"}

func newRelay(t *testing.T, opts relay.ServerOptions) (*relay.Server, *relay.Client, string) {
	t.Helper()
	s := relay.NewServer(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := relay.NewClient(srv.URL, srv.Client())
	require.NoError(t, err)
	return s, c, srv.URL
}

func TestCertificatePublished(t *testing.T) {
	published := make(chan relay.Node, 1)
	s, c, _ := newRelay(t, relay.ServerOptions{OnCertificate: func(n relay.Node) { published <- n }})
	_, ok := s.Certificate(node)
	assert.False(t, ok)

	require.NoError(t, c.PublishCertificate(t.Context(), node, []byte("chain-1")))
	select {
	case n := <-published:
		assert.Equal(t, node, n)
	case <-time.After(10 * time.Second):
		t.Fatal("OnCertificate was not called")
	}
	got, ok := s.Certificate(node)
	require.True(t, ok)
	assert.Equal(t, "chain-1", string(got))

	require.NoError(t, c.PublishCertificate(t.Context(), node, []byte("chain-2")))
	got, _ = s.Certificate(node)
	assert.Equal(t, "chain-2", string(got), "a renewal replaces the chain")
}

// The agent fetches messages oldest first, each once with its cursor, and
// its reply reaches the agbot waiting for that message only.
func TestMessagesAndReplies(t *testing.T) {
	s, c, _ := newRelay(t, relay.ServerOptions{})
	ctx := t.Context()
	id1, replies1, err := s.Post(node, []byte("envelope-1"))
	require.NoError(t, err)
	id2, replies2, err := s.Post(node, []byte("envelope-2"))
	require.NoError(t, err)
	assert.Greater(t, id2, id1)

	m, ok, err := c.Next(ctx, node, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, relay.Message{ID: id1, Envelope: []byte("envelope-1")}, m)
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

	require.NoError(t, c.Reply(ctx, id2, []byte("reply-2")))
	assert.Equal(t, "reply-2", string(<-replies2))
	assert.Empty(t, replies1)

	s.Done(id1)
	m, ok, err = c.Next(ctx, node, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, id2, m.ID, "a message is gone once the agbot is done with it")
	require.NoError(t, c.Reply(ctx, id1, []byte("late")), "a reply nobody waits for is dropped quietly")
}

func TestLimits(t *testing.T) {
	s, c, _ := newRelay(t, relay.ServerOptions{MaxNodes: 2, MaxMessages: 2})
	for range 2 {
		_, _, err := s.Post(node, []byte("e"))
		require.NoError(t, err)
	}
	_, _, err := s.Post(node, []byte("e"))
	assert.ErrorIs(t, err, relay.ErrMailboxFull)

	require.NoError(t, c.PublishCertificate(t.Context(), relay.Node{Org: "myorg", Node: "node-2"}, []byte("c")))
	err = c.PublishCertificate(t.Context(), relay.Node{Org: "myorg", Node: "node-3"}, []byte("c"))
	assert.ErrorContains(t, err, "status 503")
	_, _, err = s.Post(relay.Node{Org: "myorg", Node: "node-3"}, []byte("e"))
	assert.ErrorContains(t, err, "too many nodes")
}

func TestBadRequests(t *testing.T) {
	_, _, url := newRelay(t, relay.ServerOptions{})
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
	_, err = relay.DecodeMessage([]byte(`{"id":3,"envelope":"` + strings.Repeat("A", relay.MaxMessageBodySize) + `"}`))
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
