package secretsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// slowBody is a request body of size bytes, a JSON {"key","value"} with a
// long value, handed out in chunks with a pause between them, as a client
// on a slow link sends a large file. It counts what was read from it.
type slowBody struct {
	rest  int
	pause time.Duration
	sent  *atomic.Int64
	begun bool
}

const slowChunk = 32 << 10

func (b *slowBody) Read(p []byte) (int, error) {
	if b.rest == 0 {
		return 0, io.EOF
	}
	if b.begun && b.pause > 0 {
		time.Sleep(b.pause)
	}
	n := min(len(p), b.rest, slowChunk)
	head := `{"key":"k","value":"`
	for i := range n {
		p[i] = 'x'
	}
	if !b.begun {
		n = max(n, len(head))
		copy(p, head)
		b.begun = true
	}
	b.rest -= n
	if b.rest == 0 {
		p[n-1] = '}'
		p[n-2] = '"'
	}
	b.sent.Add(int64(n))
	return n, nil
}

// sendFirstConn is a client's connection that reads the answer only once
// it has written want bytes or a write failed, as a client does that sends
// the whole request before it looks at the answer. So an answer the server
// sends before it read the body, then resets the connection under, is
// lost, as it is to hzn over a real network.
type sendFirstConn struct {
	net.Conn
	want    int64
	written atomic.Int64
	once    sync.Once
	sent    chan struct{}
}

func (c *sendFirstConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.written.Add(int64(n)) >= c.want || err != nil {
		c.once.Do(func() { close(c.sent) })
	}
	return n, err
}

func (c *sendFirstConn) Read(p []byte) (int, error) {
	select {
	case <-c.sent:
	case <-time.After(30 * time.Second):
	}
	return c.Conn.Read(p)
}

// sendFirstClient is Go's net/http client over sendFirstConns that read
// after body bytes are written.
func sendFirstClient(body int64) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &sendFirstConn{Conn: c, want: body, sent: make(chan struct{})}, nil
	}
	return &http.Client{Transport: &http.Transport{DialContext: dial}, Timeout: time.Minute}
}

// sendLarge PUTs a body of size bytes as admin through Go's net/http
// client over a sendFirstConn, with a Content-Length when known is set and chunked otherwise.
func sendLarge(t *testing.T, f *fixture, size int, known bool, pause time.Duration) (status int, msg string, closed bool, sent int64, err error) {
	t.Helper()
	var count atomic.Int64
	var body io.Reader = &slowBody{rest: size, pause: pause, sent: &count}
	if !known {
		body = io.MultiReader(body) // hides the length: chunked
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, f.server.URL+"/org/myorg/secrets/big", body)
	require.NoError(t, err)
	if known {
		req.ContentLength = int64(size)
	}
	req.SetBasicAuth("myorg/admin", accounts["myorg/admin"].password)
	client := sendFirstClient(int64(size))
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", true, count.Load(), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &msg), "%s", b)
	return resp.StatusCode, msg, resp.Close, count.Load(), nil
}

// A body over the limit sent in full by a real client, larger than the
// socket buffers, is answered 400 naming the limit: the client reads the
// answer rather than a connection reset (hzn printed "EOF ... HTTP
// status: ."), whether it sends a Content-Length or chunks.
func TestOversizedBodyThroughAClient(t *testing.T) {
	const limit = 64 << 10
	for _, tt := range []struct {
		name  string
		size  int
		known bool
		pause time.Duration
	}{
		{"4 MiB with a Content-Length", 4 << 20, true, 0},
		{"4 MiB chunked", 4 << 20, false, 0},
		// Slower than the server waits for a client to stop sending after
		// it half-closed (net/http's reset avoidance, 500 ms).
		{"4 MiB with a Content-Length, slowly", 4 << 20, true, 5 * time.Millisecond},
		{"4 MiB chunked, slowly", 4 << 20, false, 5 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, secretsapi.Options{MaxBodyBytes: limit})
			status, msg, closed, sent, err := sendLarge(t, f, tt.size, tt.known, tt.pause)
			require.NoError(t, err, "the client reads an answer, not a broken connection")
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Contains(t, msg, fmt.Sprintf("Request body is larger than %d bytes", limit))
			assert.False(t, closed, "the connection stays usable")
			assert.Equal(t, int64(tt.size), sent, "the client sent the whole body")
			assert.Empty(t, f.store.Calls("put", ""), "nothing written")
		})
	}
}

// Beyond the bound on what the handler discards, it stops reading: the
// rest of a huge body is never read, whatever the client then sees.
func TestOversizedBodyBeyondTheDiscardBound(t *testing.T) {
	const limit = 64 << 10
	const huge = 1 << 30
	for _, known := range []bool{true, false} {
		t.Run(fmt.Sprintf("Content-Length %v", known), func(t *testing.T) {
			f := newFixture(t, secretsapi.Options{MaxBodyBytes: limit})
			status, msg, closed, sent, err := sendLarge(t, f, huge, known, 0)
			if err == nil {
				assert.Equal(t, http.StatusBadRequest, status)
				assert.Contains(t, msg, "larger than")
			}
			assert.True(t, closed, "the connection is closed")
			assert.Less(t, sent, int64(huge/4), "the handler stopped reading")
			assert.Empty(t, f.store.Calls("put", ""), "nothing written")
		})
	}
}

// A deploycheck body over the limit gets the same treatment.
func TestOversizedDeployCheckBody(t *testing.T) {
	const limit = 64 << 10
	f := newFixture(t, secretsapi.Options{MaxBodyBytes: limit})
	var sent atomic.Int64
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.server.URL+secretsapi.DeployCheckPath,
		io.MultiReader(&slowBody{rest: 4 << 20, sent: &sent}))
	require.NoError(t, err)
	req.SetBasicAuth("myorg/alice", accounts["myorg/alice"].password)
	client := sendFirstClient(4 << 20)
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.True(t, strings.Contains(string(b), fmt.Sprintf("larger than %d bytes", limit)), "%s", b)
	assert.False(t, resp.Close, "the connection stays usable")
}

// A client that asks to continue (Expect: 100-continue, as curl does for a
// large body) gets the 400 without sending the body.
func TestOversizedBodyExpectingContinue(t *testing.T) {
	const limit, size = 64 << 10, 4 << 20
	f := newFixture(t, secretsapi.Options{MaxBodyBytes: limit})
	var sent atomic.Int64
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, f.server.URL+"/org/myorg/secrets/big", &slowBody{rest: size, sent: &sent})
	require.NoError(t, err)
	req.ContentLength = size
	req.Header.Set("Expect", "100-continue")
	req.SetBasicAuth("myorg/admin", accounts["myorg/admin"].password)
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(b), fmt.Sprintf("larger than %d bytes", limit))
	assert.Zero(t, sent.Load(), "the body was never sent")
}

// A write of a body of a size the handler takes, refused before the body
// is read (alice may not write the organisation's secrets), reaches a
// client still sending it too.
func TestRefusedWriteThroughAClient(t *testing.T) {
	const limit, size = 4 << 20, 2 << 20
	f := newFixture(t, secretsapi.Options{MaxBodyBytes: limit})
	var sent atomic.Int64
	for _, tt := range []struct {
		name, method, path string
		status             int
		want               string
	}{
		{"refused by the policy", http.MethodPut, "/org/myorg/secrets/db/password", http.StatusForbidden, `Permission denied, user "alice" cannot create secret "db/password"`},
		{"a bad name", http.MethodPut, "/org/myorg/secrets/openhorizon/x", http.StatusBadRequest, "Incorrect secret name provided"},
		{"a method the path does not take", http.MethodPut, "/org/myorg/secrets/user/alice", http.StatusMethodNotAllowed, "is not allowed here"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, f.server.URL+tt.path, &slowBody{rest: size, sent: &sent})
			require.NoError(t, err)
			req.ContentLength = size
			req.SetBasicAuth("myorg/alice", accounts["myorg/alice"].password)
			client := sendFirstClient(size)
			defer client.CloseIdleConnections()
			resp, err := client.Do(req)
			require.NoError(t, err, "the client reads an answer, not a broken connection")
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tt.status, resp.StatusCode)
			var msg string
			require.NoError(t, json.Unmarshal(b, &msg), "%s", b)
			assert.Contains(t, msg, tt.want)
			assert.False(t, resp.Close, "the connection stays usable")
		})
	}
	assert.Empty(t, f.store.Calls("put", ""), "nothing written")
}
