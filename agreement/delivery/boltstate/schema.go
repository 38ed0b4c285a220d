package boltstate

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The file's buckets. Keys are raw bytes: ids, nodes and store names are
// stored exactly, whatever they contain.
var (
	// bucketMeta holds keySchema and keyEpoch.
	bucketMeta = []byte("meta")
	// bucketRecords: agreement id → record (assemble).
	bucketRecords = []byte("records")
	// bucketByName: store name → a bucket of the ids of the records that
	// bind it (any candidate). Its keys are Names.
	bucketByName = []byte("by-name")
	// bucketByNode: node → a bucket of the ids of its records.
	bucketByNode = []byte("by-node")
	// bucketDue: dueKey(NextAttempt, id) → nothing, for every record with
	// a NextAttempt: Due reads it in order instead of scanning records.
	bucketDue = []byte("due")
	// bucketObservations: store name → observation.
	bucketObservations = []byte("observations")
	// bucketWaits: deployment id → wait.
	bucketWaits = []byte("waits")
	// bucketIdentities: identityKey(provider, instance id) → identity
	// record (the CertStore).
	bucketIdentities = []byte("identities")
	// bucketNonces: nonceKey(provider, instance id, nonce) → expiry (Unix
	// nanoseconds): the request proofs the Issuer accepted
	// (certStore.UseNonce).
	bucketNonces = []byte("nonces")
	// bucketNonceExpiry: expiry (8 bytes) + nonceKey → nothing, so expired
	// nonces are found in order and dropped.
	bucketNonceExpiry = []byte("nonce-expiry")

	allBuckets = [][]byte{bucketMeta, bucketRecords, bucketByName, bucketByNode, bucketDue, bucketObservations, bucketWaits, bucketIdentities, bucketNonces, bucketNonceExpiry}

	keySchema = []byte("schema")
	keyEpoch  = []byte("epoch")
)

// layoutVersion is the version of the file layout this package writes.
const layoutVersion = 1

// migration moves a file from one schema version to the next, inside the
// transaction that opens it.
type migration func(tx *bolt.Tx) error

// migrations returns the steps from each older version: element i moves a
// file from version i+1 to i+2. Version 1 is the first: there are none.
func migrations() []migration { return nil }

// prepare makes tx's file current: a new file gets every bucket and the
// current version; an older one runs the steps from its version on, in
// the same transaction, so a crash leaves it as it was; a newer one is
// refused.
func prepare(tx *bolt.Tx, steps []migration) error {
	current := uint64(len(steps) + 1)
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if tx.Bucket(bucketRecords) != nil {
			return fmt.Errorf("%w: the file has records but no schema version", errCorrupt)
		}
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return putUint64(tx.Bucket(bucketMeta), keySchema, current)
	}
	raw := meta.Get(keySchema)
	if len(raw) != 8 {
		return fmt.Errorf("%w: the file's schema version is unreadable", errCorrupt)
	}
	version := beUint64(raw)
	switch {
	case version == 0:
		return fmt.Errorf("%w: schema version 0", errCorrupt)
	case version > current:
		return fmt.Errorf("the file has schema version %d, written by a newer edgesecrets; this one knows versions up to %d", version, current)
	}
	for v := version; v < current; v++ {
		if err := steps[v-1](tx); err != nil {
			return fmt.Errorf("migrating the file from schema version %d to %d: %w", v, v+1, err)
		}
	}
	for _, b := range allBuckets {
		if tx.Bucket(b) == nil {
			return fmt.Errorf("%w: bucket %q is missing", errCorrupt, b)
		}
	}
	if version != current {
		return putUint64(meta, keySchema, current)
	}
	return nil
}

func putUint64(b *bolt.Bucket, key []byte, v uint64) error {
	return b.Put(key, binary.BigEndian.AppendUint64(nil, v))
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
