package agentapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzCheckSecretName checks that every accepted name is one path element
// that stays in the directory it is joined to, and every rejected one says
// why.
func FuzzCheckSecretName(f *testing.F) {
	for _, seed := range []string{"password", "../x", "a/b", ".", "..", "", "a\x00b", `a\b`, "...", ".hidden", "ünï", "a\xff"} {
		f.Add(seed)
	}
	dir := f.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(f, err)
	defer root.Close()

	f.Fuzz(func(t *testing.T, name string) {
		err := checkSecretName(name)
		if err != nil {
			assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), "secret name ")
			return
		}
		assert.Equal(t, dir, filepath.Dir(filepath.Join(dir, name)), "%q leaves the directory", name)
		assert.Equal(t, name, filepath.Base(filepath.Join(dir, name)), "%q is not one element", name)
		// The file system agrees: the name creates one entry right in the directory.
		fh, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		require.NoError(t, err, "%q", name)
		fh.Close()
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		assert.Equal(t, name, entries[0].Name())
		require.NoError(t, root.Remove(name))
	})
}
