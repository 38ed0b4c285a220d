//go:build unix

package agentapi_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// An instance directory replaced by a symlink to a directory outside the
// root (issue 18: the API served files from there) is never followed: not
// to serve, not to write an update, not to wipe.
func TestSymlinkedInstanceDirectoryIsRefused(t *testing.T) {
	ctx := context.Background()
	f := newAPIFixture(t, agentapi.HandlerOptions{})
	outside := t.TempDir()
	for _, name := range []string{"password", "cert"} {
		require.NoError(t, os.WriteFile(filepath.Join(outside, name), []byte("OUTSIDE-"+name), 0o600))
	}
	mount := instanceInfo(t, f.store, "a").MountSource
	require.NoError(t, os.RemoveAll(mount))
	require.NoError(t, os.Symlink(outside, mount))

	r := f.do(t, "GET", "/secrets/password", "a", "token-a", nil)
	assert.Equal(t, http.StatusInternalServerError, r.status)
	assert.NotContains(t, string(r.body), details("OUTSIDE-password"))
	_, err := f.store.ReadSecret(ctx, "a", "password")
	assert.ErrorContains(t, err, "symlink")

	_, err = f.store.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"cert": rawSecret([]byte("NEW-cert"))}}))
	require.Error(t, err)
	assert.ErrorContains(t, err, "symlink")

	require.NoError(t, f.store.Remove(ctx, "a"))
	for _, name := range []string{"password", "cert"} {
		assert.Equal(t, "OUTSIDE-"+name, string(mustRead(t, filepath.Join(outside, name))), "nothing outside the root was written or wiped")
	}
	fi, err := os.Lstat(mount)
	if err == nil {
		assert.NotZero(t, fi.Mode()&os.ModeSymlink, "only the link itself may be left")
	}
	// The other instance is served as before.
	assert.Equal(t, http.StatusOK, f.do(t, "GET", "/secrets/token", "b", "token-b", nil).status)
}

// A symlink in place of one of the root's own directories (instances,
// status, meta, tmp) or of an instance's metadata file makes Open refuse the
// root, even when the link stays inside it.
func TestSymlinkedRootComponentsAreRefused(t *testing.T) {
	for _, component := range []string{"instances", "status", "meta", "tmp", "meta/a"} {
		t.Run(component, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "secrets")
			s, err := agentapi.Open(context.Background(), agentapi.Options{Root: root, StatusFiles: true})
			require.NoError(t, err)
			applyTwoServices(t, s)
			require.NoError(t, s.Close())

			path := filepath.Join(root, component)
			moved := filepath.Join(root, "moved")
			require.NoError(t, os.Rename(path, moved))
			require.NoError(t, os.Symlink("moved", path))

			_, err = agentapi.Open(context.Background(), agentapi.Options{Root: root, StatusFiles: true})
			require.Error(t, err)
			assert.ErrorContains(t, err, "symlink")
		})
	}
}
