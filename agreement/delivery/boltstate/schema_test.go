package boltstate

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func schemaVersion(t *testing.T, db *bolt.DB) uint64 {
	t.Helper()
	var v uint64
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		v = beUint64(tx.Bucket(bucketMeta).Get(keySchema))
		return nil
	}))
	return v
}

func rawDB(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestPrepareMigratesInOrder(t *testing.T) {
	db := rawDB(t)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return prepare(tx, nil) }))
	assert.Equal(t, uint64(1), schemaVersion(t, db), "a new file gets version 1")

	var ran []string
	steps := []migration{
		func(tx *bolt.Tx) error {
			ran = append(ran, "1→2")
			_, err := tx.CreateBucket([]byte("v2"))
			return err
		},
		func(tx *bolt.Tx) error {
			ran = append(ran, "2→3")
			return tx.Bucket([]byte("v2")).Put([]byte("k"), []byte("v"))
		},
	}
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return prepare(tx, steps) }))
	assert.Equal(t, []string{"1→2", "2→3"}, ran, "each step from the file's version runs once, in order")
	assert.Equal(t, uint64(3), schemaVersion(t, db))

	ran = nil
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return prepare(tx, steps) }))
	assert.Empty(t, ran, "a current file runs no step")
}

func TestPrepareFailedMigrationChangesNothing(t *testing.T) {
	db := rawDB(t)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return prepare(tx, nil) }))
	steps := []migration{
		func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("half")); return err },
		func(*bolt.Tx) error { return errors.New("disk full") },
	}
	err := db.Update(func(tx *bolt.Tx) error { return prepare(tx, steps) })
	require.ErrorContains(t, err, "migrating the file from schema version 2 to 3: disk full")
	assert.Equal(t, uint64(1), schemaVersion(t, db), "a failed migration leaves the version")
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		assert.Nil(t, tx.Bucket([]byte("half")), "and nothing a step did")
		return nil
	}))
}

func TestOpenRefusesANewerFile(t *testing.T) {
	path := alteredFile(t, func(tx *bolt.Tx) error { return putUint64(tx.Bucket(bucketMeta), keySchema, 7) })
	_, _, err := Open(path, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "schema version 7, written by a newer edgesecrets")
	assert.Contains(t, err.Error(), path)

	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	assert.Equal(t, uint64(7), schemaVersion(t, db), "the newer file is left as it was")
}

func TestOpenRefusesAFileMissingABucket(t *testing.T) {
	path := alteredFile(t, func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketDue) })
	_, _, err := Open(path, Options{})
	require.ErrorIs(t, err, errCorrupt)
	assert.Contains(t, err.Error(), `bucket "due" is missing`)
}

// alteredFile makes a state file and changes it with fn, as a newer
// version or damage would.
func alteredFile(t *testing.T, fn func(tx *bolt.Tx) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, _, err := Open(path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(fn))
	require.NoError(t, db.Close())
	return path
}
