//go:build unix

package agentapi

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Both ways of resolving a path below a tree — openat2 and the per-element
// walk kernels without it get — refuse a symlink in any element and any
// path that is not clean, and find everything else.
func TestTreeNeverFollowsSymlinks(t *testing.T) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "per-element walk"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			outside := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600))
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "b", "file"), []byte("inside"), 0o600))
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "a", "out")))           // a directory link leaving the tree
			require.NoError(t, os.Symlink(filepath.Join("a", "b"), filepath.Join(dir, "in"))) // one staying inside
			require.NoError(t, os.Symlink("file", filepath.Join(dir, "a", "b", "link")))      // a file link

			tr, err := openTree(dir)
			require.NoError(t, err)
			defer tr.Close()
			tr.noOpenat2.Store(walk)

			b, err := tr.readRegular("a/b/file")
			require.NoError(t, err)
			assert.Equal(t, "inside", string(b))
			for _, rel := range []string{"a/out/secret", "in/file", "a/b/link", "in"} {
				_, err := tr.readRegular(rel)
				assert.ErrorIs(t, err, errSymlink, rel)
				_, err = tr.open(rel, os.O_RDONLY, 0)
				assert.ErrorIs(t, err, errSymlink, rel)
			}
			for _, rel := range []string{"../x", "a/../a/b/file", "/etc/passwd", "a//b", ""} {
				_, err := tr.open(rel, os.O_RDONLY, 0)
				assert.ErrorIs(t, err, unix.EINVAL, "%q", rel)
			}
			// Operations on a path through a symlink fail; on the link
			// itself they act on the link, never on its target.
			assert.ErrorIs(t, tr.mkdir("a/out/new", 0o700), errSymlink)
			assert.NoDirExists(t, filepath.Join(outside, "new"))
			assert.ErrorIs(t, tr.link("a/out/secret", "a/b/stolen"), errSymlink)
			assert.ErrorIs(t, tr.chmod("a/b/link", 0o644), errSymlink)
			mode, err := tr.lstat("a/b/link")
			require.NoError(t, err)
			assert.NotZero(t, mode&fs.ModeSymlink)
			_, err = tr.lstat("a/out/secret")
			assert.ErrorIs(t, err, errSymlink)
			require.NoError(t, tr.remove("a/out", false), "the link itself can go")
			assert.FileExists(t, filepath.Join(outside, "secret"))
		})
	}
}

// The kernel here has openat2: the tests above ran both ways.
func TestTreeUsesOpenat2(t *testing.T) {
	tr, err := openTree(t.TempDir())
	require.NoError(t, err)
	defer tr.Close()
	_, err = tr.readDir(".")
	require.NoError(t, err)
	assert.False(t, tr.noOpenat2.Load(), "openat2 is missing on this kernel; only the per-element walk was tested")
}
