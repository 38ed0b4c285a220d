package boltstate

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// check verifies the whole file: bbolt's page structure, every stored
// value decodes, and the indexes hold exactly the entries the records
// call for. Tests run it after crashes.
func (s *State) check(ctx context.Context) error {
	return s.view(ctx, func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		nodes, dues, names := 0, 0, 0
		err := tx.Bucket(bucketRecords).ForEach(func(k, _ []byte) error {
			id := string(k)
			r, _, err := getRecord(tx, id)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			if r.Node != "" {
				nodes++
				if !indexed(tx.Bucket(bucketByNode), r.Node, k) {
					errs = append(errs, fmt.Errorf("agreement %q is not in the node index", id))
				}
			}
			if !r.NextAttempt.IsZero() {
				dues++
				if !hasKey(tx.Bucket(bucketDue), dueKey(r.NextAttempt, id)) {
					errs = append(errs, fmt.Errorf("agreement %q is not in the due index", id))
				}
			}
			for _, n := range state.StoreNames(r.Services) {
				names++
				if !indexed(tx.Bucket(bucketByName), n, k) {
					errs = append(errs, fmt.Errorf("agreement %q is not in the index of %q", id, n))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, c := range []struct {
			what  string
			b     *bolt.Bucket
			want  int
			depth int
		}{{"node index", tx.Bucket(bucketByNode), nodes, 2}, {"name index", tx.Bucket(bucketByName), names, 2}, {"due index", tx.Bucket(bucketDue), dues, 1}} {
			if got := countEntries(c.b, c.depth); got != c.want {
				errs = append(errs, fmt.Errorf("the %s has %d entries, the records call for %d", c.what, got, c.want))
			}
		}
		_ = tx.Bucket(bucketObservations).ForEach(func(k, v []byte) error {
			if _, err := decodeObservation(string(k), v); err != nil {
				errs = append(errs, fmt.Errorf("observation %q: %w", k, err))
			}
			return nil
		})
		_ = tx.Bucket(bucketWaits).ForEach(func(k, v []byte) error {
			if _, err := decodeWait(string(k), v); err != nil {
				errs = append(errs, fmt.Errorf("wait %q: %w", k, err))
			}
			return nil
		})
		_ = tx.Bucket(bucketIdentities).ForEach(func(k, v []byte) error {
			if _, err := decodeIdentity(v); err != nil {
				errs = append(errs, fmt.Errorf("identity %x: %w", k, err))
			}
			return nil
		})
		return errors.Join(errs...)
	})
}

func indexed(idx *bolt.Bucket, key string, id []byte) bool {
	b := idx.Bucket([]byte(key))
	return b != nil && hasKey(b, id)
}

func hasKey(b *bolt.Bucket, k []byte) bool {
	got, _ := b.Cursor().Seek(k)
	return got != nil && string(got) == string(k)
}

// countEntries counts the keys of b (depth 1) or of its sub-buckets
// (depth 2).
func countEntries(b *bolt.Bucket, depth int) int {
	n := 0
	_ = b.ForEach(func(k, v []byte) error {
		if depth == 1 {
			n++
			return nil
		}
		if sub := b.Bucket(k); sub != nil {
			n += countEntries(sub, 1)
		}
		return nil
	})
	return n
}
