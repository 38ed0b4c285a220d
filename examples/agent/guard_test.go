package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
)

func TestFileGuardSurvivesRestart(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "replay.json")
	g, err := openFileGuard(path)
	require.NoError(t, err)
	require.NoError(t, g.Accept(ctx, "a-1", agreement.TypeProposal, 10))
	require.NoError(t, g.Accept(ctx, "a-1", agreement.TypeUpdate, 5))
	assert.ErrorIs(t, g.Accept(ctx, "a-1", agreement.TypeProposal, 10), agreement.ErrReplay)
	require.NoError(t, g.Accept(ctx, "a-2", agreement.TypeProposal, 1), "agreements have their own series")

	g, err = openFileGuard(path) // the agent restarted
	require.NoError(t, err)
	assert.ErrorIs(t, g.Accept(ctx, "a-1", agreement.TypeProposal, 9), agreement.ErrReplay)
	assert.ErrorIs(t, g.Accept(ctx, "a-1", agreement.TypeUpdate, 5), agreement.ErrReplay)
	require.NoError(t, g.Accept(ctx, "a-1", agreement.TypeUpdate, 6))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// A sequence that could not be saved is not accepted, and not recorded.
func TestFileGuardWriteFailure(t *testing.T) {
	dir := t.TempDir()
	g, err := openFileGuard(filepath.Join(dir, "missing-dir", "x", "replay.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "missing-dir"), nil, 0o600)) // a file where a directory should be
	err = g.Accept(t.Context(), "a-1", agreement.TypeProposal, 3)
	require.Error(t, err)
	assert.NotErrorIs(t, err, agreement.ErrReplay)
	assert.Empty(t, g.last["a-1"])
}

func TestFileGuardBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"a-1": {"proposal": "x"}}`), 0o600))
	_, err := openFileGuard(path)
	assert.ErrorContains(t, err, "replay state")
}
