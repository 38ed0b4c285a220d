//go:build linux || darwin || freebsd || netbsd || openbsd

package pgstate

import (
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// TestQuiet: a live idle session is quiet; one the server ended is not,
// once the end reached the client; a connection that is not a socket is
// never taken for quiet.
func TestQuiet(t *testing.T) {
	db := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(t.Context(), db.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(t.Context()) })
	require.NoError(t, conn.Ping(t.Context()))
	assert.True(t, quiet(conn.PgConn().Conn()), "a live idle session")

	var ended bool
	require.NoError(t, db.Pool(t).QueryRow(t.Context(), "SELECT pg_terminate_backend($1, 10000)", conn.PgConn().PID()).Scan(&ended))
	require.True(t, ended)
	// The server's FATAL message and close reach the socket
	// asynchronously; once there, they stay.
	assert.Eventually(t, func() bool { return !quiet(conn.PgConn().Conn()) }, 10*time.Second, time.Millisecond,
		"a session the server ended")

	// A reader blocked on the connection (pgx's background reader may be
	// left so) holds the descriptor's read lock: quiet does not wait for it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	server, err := ln.Accept()
	require.NoError(t, err)
	defer server.Close()
	go func() { _, _ = client.Read(make([]byte, 1)) }()
	time.Sleep(50 * time.Millisecond) // for the reader to block: if it has not, the case is weaker, not wrong
	done := make(chan bool)
	go func() { done <- quiet(client) }()
	select {
	case q := <-done:
		assert.True(t, q, "a live socket with a reader waiting on it")
	case <-time.After(10 * time.Second):
		t.Fatal("quiet waited for the reader")
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.False(t, quiet(a), "not a socket: cannot tell")
}

// BenchmarkConnectionCheck: what checking a pooled connection costs, the
// socket check every call makes against the ping it replaces.
func BenchmarkConnectionCheck(b *testing.B) {
	db := pgtest.NewDatabase(b)
	conn, err := pgx.Connect(b.Context(), db.URL)
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close(b.Context()) })
	b.Run("socket", func(b *testing.B) {
		for b.Loop() {
			if !quiet(conn.PgConn().Conn()) {
				b.Fatal("not quiet")
			}
		}
	})
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := conn.Ping(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
