package pgstate_test

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// relay is a TCP relay on loopback in front of a server. Cut ends every
// connection through it at once, as the server's death would, while new
// connections pass as before: seen from the client, a server that was
// killed and came back within the same instant.
type relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newRelay relays to target (host:port) until t ends.
func newRelay(t *testing.T, target string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Go(r.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		r.Cut(nil)
		r.wg.Wait()
	})
	return r
}

// url returns dbURL with its address replaced by the relay's.
func (r *relay) url(t *testing.T, dbURL string) string {
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Host = r.ln.Addr().String()
	return u.String()
}

func (r *relay) accept() {
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", r.target, 10*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		r.track(client, server)
		r.wg.Go(func() { r.pipe(client, server) })
		r.wg.Go(func() { r.pipe(server, client) })
	}
}

// track registers a relayed pair for Cut.
func (r *relay) track(conns ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range conns {
		r.conns[c] = struct{}{}
	}
}

// pipe copies from src to dst; when either ends, both do.
func (r *relay) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = src.Close()
	_ = dst.Close()
}

// Cut closes every connection relayed so far, both ends, and returns once
// the clients' side of each has received the close, as the clients of a
// server that died between two calls have: a call sent before the close
// arrives races with the death, and its outcome is unknown to any client.
// (The close reaches the client's socket asynchronously, later on a loaded
// machine.)
func (r *relay) Cut(t *testing.T) {
	r.mu.Lock()
	for c := range r.conns {
		_ = c.Close()
		delete(r.conns, c)
	}
	r.mu.Unlock()
	if t == nil {
		return
	}
	_, port, err := net.SplitHostPort(r.ln.Addr().String())
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	// In /proc/net/tcp a client's socket names the relay's port as its
	// remote address, in hex; 01 is ESTABLISHED, and a socket that received
	// the close is in CLOSE_WAIT or gone.
	remote := fmt.Sprintf(":%04X ", p)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		table, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Skipf("no /proc/net/tcp to see the close arrive: %v", err)
		}
		open := 0
		for _, line := range strings.Split(string(table), "\n") {
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasSuffix(f[2]+" ", remote) && f[3] == "01" {
				open++
			}
		}
		if open == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d client sockets still see the relay's connection open after 10 s", open)
	}
}

// TestRestartBetweenCalls: a server restart between two calls, with no
// call in between to notice it, leaves the pool full of dead connections;
// the next calls get fresh ones, the first call included, however quickly
// the server came back.
func TestRestartBetweenCalls(t *testing.T) {
	for _, c := range []struct {
		name string
		down func(*pgtest.Server) error
	}{
		{"stopped", (*pgtest.Server).Stop},
		{"killed", (*pgtest.Server).Kill},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, m, rec := outageSetup(t, pgstate.Options{LeasePeriod: time.Minute})
			calls := everyCall(m, rec, "org/db")
			require.NoError(t, c.down(srv))
			require.NoError(t, srv.Start(t.Context()))
			assertAllWork(t, calls)
		})
	}
	// Every connection of the pool ends between two calls and the server
	// takes new ones at once: a restart quicker than any timing the State
	// could assume. Three times over, so that the fresh connections of
	// one round are the dead ones of the next.
	for _, c := range []struct {
		name string
		// end ends the pool's connections; the server takes new ones
		// at once.
		end func(t *testing.T, admin *pgxpool.Pool, r *relay)
	}{
		// As a crash: the connections close without a word.
		{"killed, back at once", func(t *testing.T, _ *pgxpool.Pool, r *relay) { r.Cut(t) }},
		// As an administrator's shutdown: each session is told it ends
		// (FATAL 57P01), then closed; the server stays up.
		{"sessions ended", func(t *testing.T, admin *pgxpool.Pool, _ *relay) {
			var ended int
			require.NoError(t, admin.QueryRow(t.Context(), `
WITH others AS MATERIALIZED (
	SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
)
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM others`).Scan(&ended))
			require.Positive(t, ended, "the pool's sessions ended")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := pgtest.Shared(t)
			db := srv.CreateDatabase(t)
			admin := db.Pool(t)
			r := newRelay(t, srv.Addr)
			m, rec := fillPool(t, r.url(t, db.URL), pgstate.Options{LeasePeriod: time.Minute})
			calls := everyCall(m, rec, "org/db")
			for range 3 {
				c.end(t, admin, r)
				assertAllWork(t, calls)
			}
		})
	}
}
