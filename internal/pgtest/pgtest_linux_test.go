package pgtest_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/pgtest"
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
