package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
)

// Bounds of the attack: counts and time, loopback only.
const (
	idleConns     = 2000 // connections that send nothing, or one request and then idle
	keptAlive     = 200  // of which made one request first
	slowBodies    = 50   // requests whose body trickles in
	attackTimeout = 60 * time.Second
)

// 2,000 idle connections and slow request bodies against the agent's
// /secrets server: legitimate requests still answer, and an update the
// agbot sends meanwhile is applied and persisted (issue 18: ~20,000 idle
// connections exhausted the agent's descriptors, GET /secrets timed out,
// the agent could not save its replay state and a rotation was lost).
func TestAgentUnderConnectionFlood(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), attackTimeout)
	defer cancel()
	f := newFixture(t)
	apiURL, shutdown, err := serveAPI(config{listen: "127.0.0.1:0"}, f.agent.Handler(), false, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { shutdown() })
	addr := strings.TrimPrefix(apiURL, "http://")

	r, ok := f.deliver(ctx, f.proposal("agreement-1", "VALUE-1"))
	require.True(t, ok)
	require.True(t, r.Accepted, r.Reason)
	env, err := demo.ReadEnv(filepath.Join(f.envDir, "web.json"))
	require.NoError(t, err)

	// The attack.
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range idleConns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err, "connection %d", i)
		conns = append(conns, c)
		if i < keptAlive {
			fmt.Fprintf(c, "GET /secrets HTTP/1.1\r\nHost: agent\r\n\r\n")
		}
	}
	var trickle sync.WaitGroup
	stop := make(chan struct{})
	for range slowBodies {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /secrets/api_key?received=true HTTP/1.1\r\nHost: agent\r\nContent-Length: 4096\r\n\r\n")
		trickle.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
				}
			}
		})
	}
	t.Cleanup(func() { close(stop); trickle.Wait() })

	// Legitimate requests answer, each within seconds.
	client := &http.Client{Timeout: 10 * time.Second}
	get := func() (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/secrets/api_key", nil)
		if err != nil {
			return 0, err
		}
		req.SetBasicAuth(env.Instance, env.Token)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	for i := range 5 {
		start := time.Now()
		status, err := get()
		require.NoError(t, err, "legitimate request %d", i)
		assert.Equal(t, http.StatusOK, status)
		t.Logf("legitimate request %d answered in %v", i, time.Since(start).Round(time.Millisecond))
	}

	// An update sent during the attack: the agent polls the relay, applies
	// it, persists it and replies.
	reply, ok := f.deliver(ctx, f.secretsUpdate("agreement-1", "VALUE-2"))
	require.True(t, ok, "the update was answered during the attack")
	assert.True(t, reply.Accepted, reply.Reason)
	content, err := f.file()
	require.NoError(t, err)
	assert.Equal(t, "VALUE-2", content, "the update is on disk")
	state, err := os.ReadFile(filepath.Join(f.root, "agreements.json"))
	require.NoError(t, err)
	assert.Contains(t, string(state), fmt.Sprintf(`"agreement-1":{"sequence":%d`, f.seq), "the replay state is saved")
	status, err := get()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)

	// The server held no more connections than its bound: the rest of the
	// idle ones were closed to make room.
	deadline := time.Now().Add(2 * time.Second)
	closed := 0
	for _, c := range conns[:idleConns] {
		c.SetReadDeadline(deadline)
		br := bufio.NewReader(c)
		for {
			if _, err := br.ReadByte(); err != nil {
				if err == io.EOF {
					closed++
				}
				break
			}
		}
	}
	assert.GreaterOrEqual(t, closed, idleConns-demo.DefaultLimits().MaxConns, "idle connections closed by the server")
}
