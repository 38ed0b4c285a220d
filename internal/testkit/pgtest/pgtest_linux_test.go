package pgtest_test

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

func TestServerRunsAsTheCurrentUserOrNotRoot(t *testing.T) {
	srv := pgtest.Shared(t)
	fi, err := os.Stat(srv.DataDir)
	require.NoError(t, err)
	owner := fi.Sys().(*syscall.Stat_t).Uid
	if os.Geteuid() == 0 {
		assert.NotZero(t, owner, "under root, the server runs as another user, which owns its data")
	} else {
		assert.Equal(t, uint32(os.Geteuid()), owner)
	}
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "PostgreSQL wants its data directory private")
}

// The server's CPU time counts the work of its backends, also of one whose
// connection closed before the second reading.
func TestCPUTimeCountsEndedBackends(t *testing.T) {
	db := pgtest.NewDatabase(t)
	srv := db.Server()
	before, err := srv.CPUTime()
	require.NoError(t, err)
	conn, err := pgx.Connect(t.Context(), db.URL)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "SELECT count(*) FROM generate_series(1, 5000000)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	time.Sleep(200 * time.Millisecond) // the backend exits and is reaped
	after, err := srv.CPUTime()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after-before, 100*time.Millisecond, "five million rows counted")
}
