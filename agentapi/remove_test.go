package agentapi_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
)

// repeatReader yields the same byte forever.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

func TestRemoveOverwritesBeforeUnlink(t *testing.T) {
	ctx := context.Background()
	const wipeByte = 0xA5
	s, root := openStoreRoot(t, agentapi.Options{StatusFiles: true, Rand: repeatReader(wipeByte)})
	applyTwoServices(t, s)
	mountA := instanceInfo(t, s, "a").MountSource
	statusA := instanceInfo(t, s, "a").StatusDir
	fileB := mountFile(t, s, "b", "token")
	contentB := mustRead(t, fileB)
	infoB, err := os.Stat(fileB)
	require.NoError(t, err)

	// Hold each file open: after the unlink the descriptor still reaches
	// the inode, so it shows what was written there before.
	type held struct {
		f    *os.File
		size int
	}
	var files []held
	for _, name := range []string{"password", "cert"} {
		f, err := os.Open(filepath.Join(mountA, name))
		require.NoError(t, err)
		defer f.Close()
		b, err := io.ReadAll(f)
		require.NoError(t, err)
		require.NotEmpty(t, b)
		files = append(files, held{f, len(b)})
	}

	require.NoError(t, s.Remove(ctx, "a"))

	for _, h := range files {
		fi, err := h.f.Stat()
		require.NoError(t, err)
		// Unlinked: the overwrite can only have happened through the
		// path, that is, before the unlink.
		_, _, nlink := statIDs(t, fi)
		assert.Zero(t, nlink, "the file is still linked")
		got := make([]byte, h.size+1)
		n, err := h.f.ReadAt(got, 0)
		require.ErrorIs(t, err, io.EOF)
		assert.Equal(t, h.size, n, "the file kept its length")
		assert.Equal(t, bytes.Repeat([]byte{wipeByte}, h.size), got[:n], "the bytes were overwritten before the unlink")
	}
	assert.NoDirExists(t, mountA)
	assert.NoDirExists(t, statusA)
	assert.NoFileExists(t, filepath.Join(root, "meta", "a"))
	_, ok := s.Instance("a")
	assert.False(t, ok)
	_, known := s.Instance("a")
	assert.False(t, known)

	// The other instance is untouched.
	assert.Equal(t, contentB, mustRead(t, fileB))
	after, err := os.Stat(fileB)
	require.NoError(t, err)
	assert.Equal(t, infoB.ModTime(), after.ModTime())
	assert.Equal(t, []string{"b"}, s.InstanceIDs())

	// Removing again is not an error.
	require.NoError(t, s.Remove(ctx, "a"))
}

func TestRemoveDoesNotFollowSymlinks(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, agentapi.Options{Rand: repeatReader(0)})
	applyTwoServices(t, s)
	fileB := mountFile(t, s, "b", "token")
	contentB := mustRead(t, fileB)
	// Someone planted a link to b's secret in a's directory.
	require.NoError(t, os.Symlink(fileB, mountFile(t, s, "a", "link")))

	require.NoError(t, s.Remove(ctx, "a"))
	assert.Equal(t, contentB, mustRead(t, fileB), "removing a wiped b's file through a symlink")
}

func TestRemoveAgreement(t *testing.T) {
	ctx := context.Background()
	s, root := openStoreRoot(t, agentapi.Options{})
	applyTwoServices(t, s)
	ids, err := s.RemoveAgreement(ctx, "ag-1")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids)
	assert.Empty(t, s.InstanceIDs())
	assert.Equal(t, []string{".", "agreements.json", "instances", "meta", "status", "tmp"}, tree(t, root))
}
