package demo

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveEcho serves a handler that reads the whole body and answers its
// length, with limits, and returns the server and its limiter.
func serveEcho(t *testing.T, lim Limits) (*Server, *connLimiter) {
	t.Helper()
	s, err := Serve(ServeOptions{Addr: "127.0.0.1:0", Limits: lim, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		fmt.Fprintf(w, "%d", len(b))
	})})
	require.NoError(t, err)
	t.Cleanup(func() { s.Shutdown() })
	return s, s.conns
}

// dial opens a raw TCP connection to the server.
func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.URL, "http://"), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil // EOF: closed by the server; a timeout is an error
}

func TestServerLimits(t *testing.T) {
	s, _ := serveEcho(t, Limits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 500 * time.Millisecond,
		IdleTimeout: 300 * time.Millisecond, MaxHeaderBytes: 1 << 10, MaxBodyBytes: 64})
	client := &http.Client{Timeout: 5 * time.Second}

	resp, err := client.Post(s.URL, "text/plain", strings.NewReader("hello"))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "5", string(b))

	resp, err = client.Post(s.URL, "text/plain", strings.NewReader(strings.Repeat("x", 65)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "body over MaxBodyBytes")

	req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
	req.Header.Set("X-Big", strings.Repeat("y", 8<<10))
	resp, err = client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)

	// A client that sends nothing, one that sends headers slowly, one
	// that sends its body slowly, and an idle keep-alive connection: each
	// is closed by the server within its timeout.
	silent := dial(t, s)
	slowHeaders := dial(t, s)
	fmt.Fprint(slowHeaders, "GET / HTTP/1.1\r\nHost: x\r\n")
	slowBody := dial(t, s)
	fmt.Fprint(slowBody, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\nab")
	idle := dial(t, s)
	fmt.Fprint(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	r, err := http.ReadResponse(bufio.NewReader(idle), nil)
	require.NoError(t, err)
	r.Body.Close()
	for name, c := range map[string]net.Conn{"silent": silent, "slow headers": slowHeaders, "slow body": slowBody, "idle": idle} {
		assert.True(t, closedWithin(c, 5*time.Second), "%s connection still open", name)
	}
}

// Clients holding connections open cannot lock others out: past MaxConns
// the connection silent or idle the longest is closed, and the count never
// exceeds the limit.
func TestServerConnectionBound(t *testing.T) {
	const max = 8
	s, lim := serveEcho(t, Limits{MaxConns: max})
	var held []net.Conn
	for range 5 * max {
		held = append(held, dial(t, s))
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for range 3 {
		resp, err := client.Get(s.URL)
		require.NoError(t, err, "a legitimate request answers while %d connections are held", len(held))
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
	lim.mu.Lock()
	open := len(lim.conns)
	lim.mu.Unlock()
	assert.LessOrEqual(t, open, max)
	closed := 0
	for _, c := range held {
		if closedWithin(c, 50*time.Millisecond) {
			closed++
		}
	}
	assert.GreaterOrEqual(t, closed, len(held)-max, "the oldest silent connections were closed")
}

func TestMaxConnsForDescriptors(t *testing.T) {
	n := maxConnsForDescriptors()
	assert.GreaterOrEqual(t, n, 16)
}
