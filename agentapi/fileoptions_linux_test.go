package agentapi_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// In the memory-backed mode the files restored after a reboot get their
// declared mode and owner.
func TestFileOptionsOfRestoredFiles(t *testing.T) {
	mem := mountTmpfs(t)
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	opts := agentapi.Options{Root: filepath.Join(t.TempDir(), "persistent"), MemoryDir: mem.dir, SealKeys: keys}
	s, err := agentapi.Open(context.Background(), opts)
	require.NoError(t, err)
	uid := otherID(os.Getuid())
	p, inst := proposalWith(jsonSecret("v", "one"), agentapi.FileOptions{Template: `v={{ .v }}`, Mode: 0o440, UID: intPtr(uid)})
	_, err = s.ApplyProposal(context.Background(), p, inst)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	mem.reboot()
	s, err = agentapi.Open(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	assertFile(t, mountFile(t, s, "a", "app"), "v=one", 0o440, uid)
}
