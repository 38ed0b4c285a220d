package agentapi_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// After a rotation, a descriptor still held on the replaced file (a
// container that kept it open) reads random bytes, not the old value: the
// replaced content is overwritten before its inode is freed, as on removal
// (issue 18). A reader that opened it just before the rename still gets it
// whole for a short grace; Close cuts the grace short.
func TestRotationOverwritesReplacedContent(t *testing.T) {
	ctx := context.Background()
	const wipeByte = 0x5A
	root := filepath.Join(t.TempDir(), "secrets")
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root, Rand: repeatReader(wipeByte)})
	require.NoError(t, err)
	applyTwoServices(t, s)
	file := mountFile(t, s, "a", "cert")
	old := mustRead(t, file)
	held, err := os.Open(file)
	require.NoError(t, err)
	defer held.Close()

	_, err = s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"cert": rawSecret([]byte("-----BEGIN CERT A2-----"))}}))
	require.NoError(t, err)
	assert.Equal(t, "-----BEGIN CERT A2-----", string(mustRead(t, file)), "the path names the new file")
	got, err := io.ReadAll(io.NewSectionReader(held, 0, 1<<20))
	require.NoError(t, err)
	assert.Equal(t, old, got, "within the grace the old content is whole")

	require.NoError(t, s.Close())
	got, err = io.ReadAll(io.NewSectionReader(held, 0, 1<<20))
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte{wipeByte}, len(old)), got, "the replaced content is overwritten")
	assert.Equal(t, []string{"."}, tree(t, filepath.Join(root, "tmp")), "nothing left in tmp/")
}

// Without Close, the grace ends by itself.
func TestRotationWipesAfterGrace(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, agentapi.Options{Rand: repeatReader(0)})
	applyTwoServices(t, s)
	held, err := os.Open(mountFile(t, s, "b", "token"))
	require.NoError(t, err)
	defer held.Close()
	_, err = s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refB,
		Secrets: map[string]agreement.SecretDetails{"token": rawSecret([]byte("token-of-B-2"))}}))
	require.NoError(t, err)
	assert.Eventually(t, func() bool {
		got, err := io.ReadAll(io.NewSectionReader(held, 0, 1<<20))
		return err == nil && bytes.Equal(got, make([]byte, len("token-of-B")))
	}, 20*time.Second, 50*time.Millisecond)
}

// Under a fake clock the wipe timer fires exactly at its deadline; the
// replaced content must be due then, not re-armed for "now" forever (which
// hung every synctest bubble holding a Store).
func TestRotationWipeTimerFiresOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := openStore(t, agentapi.Options{Rand: repeatReader(0)})
		applyTwoServices(t, s)
		held, err := os.Open(mountFile(t, s, "b", "token"))
		require.NoError(t, err)
		defer held.Close()
		_, err = s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refB,
			Secrets: map[string]agreement.SecretDetails{"token": rawSecret([]byte("token-of-B-2"))}}))
		require.NoError(t, err)
		time.Sleep(3 * time.Second) // past the grace; a spinning timer never lets the bubble's clock get here
		synctest.Wait()
		got, err := io.ReadAll(io.NewSectionReader(held, 0, 1<<20))
		require.NoError(t, err)
		assert.Equal(t, make([]byte, len("token-of-B")), got, "the replaced content is overwritten once its grace has passed")
	})
}

// A crash between linking the old file and the rename leaves a second link
// to the live file in tmp/: Open removes the link without overwriting the
// live content.
func TestOpenKeepsLiveContentLinkedFromTmp(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "secrets")
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root})
	require.NoError(t, err)
	applyTwoServices(t, s)
	file := mountFile(t, s, "b", "token")
	require.NoError(t, s.Close())
	require.NoError(t, os.Link(file, filepath.Join(root, "tmp", "interrupted")))

	s, err = agentapi.Open(ctx, agentapi.Options{Root: root})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "token-of-B", string(mustRead(t, file)))
	assert.NoFileExists(t, filepath.Join(root, "tmp", "interrupted"))
}

// Removing an instance withdraws its token from the store's token table.
func TestRemoveRevokesTokens(t *testing.T) {
	ctx := context.Background()
	tokens := &agentapi.TokenTable{}
	s := openStore(t, agentapi.Options{Tokens: tokens})
	applyTwoServices(t, s)
	require.NoError(t, tokens.Set("a", "token-a"))
	require.NoError(t, tokens.Set("b", "token-b"))
	require.NoError(t, tokens.Set("other", "token-other"))

	require.NoError(t, s.Remove(ctx, "a"))
	assert.Equal(t, []string{"b", "other"}, tokens.IDs())
	_, err := s.RemoveAgreement(ctx, "ag-1")
	require.NoError(t, err)
	assert.Equal(t, []string{"other"}, tokens.IDs(), "instances of other agreements keep theirs")
}
