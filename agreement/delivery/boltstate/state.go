package boltstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/internal/recordcodec"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// defaultLockTimeout is how long Open waits for another process to let go
// of the file when Options.LockTimeout is zero.
const defaultLockTimeout = time.Second

// maxBatch bounds the writes one transaction commits.
const maxBatch = 4096

// recordsPage is how many records Records reads per read transaction; it
// calls fn between transactions, so fn may use the State.
const recordsPage = 256

// Options configure Open.
type Options struct {
	// LockTimeout is how long Open waits while another process holds the
	// file; zero means 1 second.
	LockTimeout time.Duration
	// Logger receives what Open does to the file (creating it, migrating
	// it, tightening its mode). Nil discards.
	Logger *slog.Logger
}

// State is the embedded state.Backend: one bbolt file. Safe for
// concurrent use by one engine; the file's lock keeps other processes out.
type State struct {
	path string
	db   *bolt.DB
	log  *slog.Logger

	// mu guards closed; readers and writers hold it shared so Close waits
	// for them.
	mu     sync.RWMutex
	closed bool

	ops        chan *op
	writerDone chan struct{}
	commits    atomic.Int64 // transactions committed by the writer, for tests
	// observed is how many observations the last read of all of them
	// found: the size its next read's map starts with.
	observed atomic.Int64
}

var _ state.Backend = (*State)(nil)

// Open opens the state file at path, creating it (mode 0600, and its
// directory, mode 0700) when it does not exist, and brings an older file
// to the current schema. A file that another process holds is an error
// after Options.LockTimeout.
//
// It returns the file's State, a state.Backend for
// delivery.Options.State, and the hub's identity records kept in the same
// file (an identity.CertStore), so an agbot's identity records survive
// restarts with its agreements. Closing the State closes the file: later
// calls of either fail (the CertStore's with edgesecrets.ErrUnavailable).
func Open(path string, opts Options) (*State, identity.CertStore, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = defaultLockTimeout
	}
	if path == "" {
		return nil, nil, errors.New("boltstate: no file name given")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("boltstate: creating the directory of %s: %w", path, err)
	}
	fi, statErr := os.Stat(path)
	switch {
	case statErr == nil && !fi.Mode().IsRegular():
		return nil, nil, fmt.Errorf("boltstate: %s is not a regular file", path)
	case statErr == nil && fi.Mode().Perm()&0o077 != 0:
		// The file holds no secret values, but who holds which agreement
		// and identity is the hub's business alone.
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, nil, fmt.Errorf("boltstate: %s is readable by others (mode %v) and cannot be made 0600: %w", path, fi.Mode().Perm(), err)
		}
		log.Warn("boltstate: state file was readable by others; made it 0600", "path", path, "mode", fi.Mode().Perm().String())
	case statErr != nil && !errors.Is(statErr, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("boltstate: %w", statErr)
	}

	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, FreelistType: bolt.FreelistMapType})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, nil, fmt.Errorf("boltstate: %s is in use by another process (it holds the file's lock; waited %v): stop that agbot or give this one another file", path, timeout)
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch), errors.Is(err, bolterrors.ErrChecksum):
		return nil, nil, fmt.Errorf("boltstate: %s is not a state file, or is damaged: %w", path, err)
	case err != nil:
		return nil, nil, fmt.Errorf("boltstate: opening %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return prepare(tx, migrations()) }); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("boltstate: %s: %w", path, err)
	}
	if statErr != nil {
		log.Info("boltstate: created state file", "path", path, "schema", layoutVersion)
	}
	s := &State{path: path, db: db, log: log, ops: make(chan *op, maxBatch), writerDone: make(chan struct{})}
	go s.writer()
	return s, &certStore{s: s}, nil
}

// Close waits for the calls under way, then closes the file. Later calls
// fail with state.ErrStateUnavailable.
func (s *State) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.ops)
	<-s.writerDone
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("boltstate: closing %s: %w", s.path, err)
	}
	return nil
}

// errUnavailable wraps a failure of the file (or its absence) so it
// matches state.ErrStateUnavailable.
func (s *State) errUnavailable(err error) error {
	if err == nil {
		return fmt.Errorf("boltstate %s: %w (closed)", s.path, state.ErrStateUnavailable)
	}
	return fmt.Errorf("boltstate %s: %w: %w", s.path, state.ErrStateUnavailable, err)
}

// txError classifies an error out of a transaction: a corrupt value is
// said as such; any other failure of the file makes the state unavailable.
func (s *State) txError(err error) error {
	if err == nil || errors.Is(err, errCorrupt) {
		return err
	}
	return s.errUnavailable(err)
}

// view runs fn in a read transaction.
func (s *State) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	return s.txError(s.db.View(fn))
}

// enter checks ctx and that s is open, and keeps it open until the caller
// calls s.mu.RUnlock.
func (s *State) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return s.errUnavailable(nil)
	}
	return nil
}

// op is one write. Its fn may run twice (alone, after a batch it was in
// failed), so it keeps its results in variables it resets, and changes
// nothing outside the transaction.
type op struct {
	fn   func(tx *bolt.Tx) error
	done chan error
}

// update runs fn in a write transaction, group-committed with the writes
// of other goroutines queued meanwhile: one fsync for all of them.
func (s *State) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	o := &op{fn: fn, done: make(chan error, 1)}
	s.ops <- o
	return s.txError(<-o.done)
}

// writer commits queued writes: it takes every write waiting when it
// starts a transaction, so a burst of single writes costs one commit
// while a lone write waits for no one.
func (s *State) writer() {
	defer close(s.writerDone)
	batch := make([]*op, 0, maxBatch)
	for o := range s.ops {
		batch = append(batch[:0], o)
	drain:
		for len(batch) < maxBatch {
			select {
			case o, ok := <-s.ops:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		s.commit(batch)
	}
}

// commit runs a batch in one transaction. When one write fails, the
// transaction is rolled back and each write runs alone, so one bad write
// fails only its caller.
func (s *State) commit(batch []*op) {
	s.commits.Add(1)
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, o := range batch {
			if err := o.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(batch) == 1 {
		for _, o := range batch {
			o.done <- err
		}
		return
	}
	for _, o := range batch {
		o.done <- s.db.Update(o.fn)
	}
}

// Create implements state.Backend.
func (s *State) Create(ctx context.Context, rec *state.Record) error {
	if err := checkKey("agreement id", rec.ID); err != nil {
		return err
	}
	value := encodeRecord(rec, 1)
	var exists bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		exists, err = createTx(tx, rec, value)
		return err
	})
	if err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("boltstate: agreement %s: %w", rec.ID, state.ErrExists)
	}
	rec.Revision = 1
	return nil
}

// createTx stores a new record and its index entries, unless its id is
// taken.
func createTx(tx *bolt.Tx, rec *state.Record, value []byte) (exists bool, err error) {
	records := tx.Bucket(bucketRecords)
	id := []byte(rec.ID)
	if records.Get(id) != nil {
		return true, nil
	}
	if err := records.Put(id, value); err != nil {
		return false, err
	}
	for _, n := range state.StoreNames(rec.Services) {
		if err := addIndex(tx.Bucket(bucketByName), n, id); err != nil {
			return false, err
		}
	}
	if err := addIndex(tx.Bucket(bucketByNode), rec.Node, id); err != nil {
		return false, err
	}
	return false, putDue(tx, rec.NextAttempt, rec.ID)
}

// Get implements state.Backend.
func (s *State) Get(ctx context.Context, id string) (state.Record, error) {
	var r state.Record
	var found bool
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		r, found, err = getRecord(tx, id)
		return err
	})
	if err != nil {
		return state.Record{}, err
	}
	if !found {
		return state.Record{}, fmt.Errorf("boltstate: agreement %s: %w", id, state.ErrNotFound)
	}
	return r, nil
}

// getRecord reads a whole record.
func getRecord(tx *bolt.Tx, id string) (state.Record, bool, error) {
	v := tx.Bucket(bucketRecords).Get([]byte(id))
	if v == nil {
		return state.Record{}, false, nil
	}
	r, _, err := decodeRecord(id, v)
	if err != nil {
		return state.Record{}, false, fmt.Errorf("agreement %q: %w", id, err)
	}
	return r, true, nil
}

// Update implements state.Backend: one transaction for all of recs.
// Services are kept as stored (Rebind changes them).
func (s *State) Update(ctx context.Context, _ string, recs ...*state.Record) error {
	tails := make([][]byte, len(recs))
	for i, r := range recs {
		tails[i] = encodeTail(r)
	}
	var conflicts []string
	err := s.update(ctx, func(tx *bolt.Tx) error {
		conflicts = conflicts[:0]
		records := tx.Bucket(bucketRecords)
		for i, r := range recs {
			id := []byte(r.ID)
			old := records.Get(id)
			if old == nil {
				conflicts = append(conflicts, r.ID)
				continue
			}
			h, err := readHead(old)
			if err != nil {
				return fmt.Errorf("agreement %q: %w", r.ID, err)
			}
			if h.revision != r.Revision {
				conflicts = append(conflicts, r.ID)
				continue
			}
			if err := records.Put(id, assemble(r.Revision+1, h.services, tails[i])); err != nil {
				return err
			}
			if err := reindex(tx, r.ID, h, r.Node, r.NextAttempt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(conflicts) == 0 {
		for _, r := range recs {
			r.Revision++
		}
		return nil
	}
	lost := make(map[string]bool, len(conflicts))
	for _, id := range conflicts {
		lost[id] = true
	}
	for _, r := range recs {
		if !lost[r.ID] {
			r.Revision++
		}
	}
	return &state.ConflictError{IDs: slices.Clone(conflicts)}
}

// Rebind implements state.Backend: the record with its new services,
// and the name index moved from the old services' names to the new ones',
// in one transaction.
func (s *State) Rebind(ctx context.Context, _ string, rec *state.Record) error {
	services, tail := recordcodec.EncodeServices(rec.Services), encodeTail(rec)
	var conflict bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		conflict = false
		records := tx.Bucket(bucketRecords)
		id := []byte(rec.ID)
		old := records.Get(id)
		if old == nil {
			conflict = true
			return nil
		}
		h, err := readHead(old)
		if err != nil {
			return fmt.Errorf("agreement %q: %w", rec.ID, err)
		}
		if h.revision != rec.Revision {
			conflict = true
			return nil
		}
		was, err := recordcodec.DecodeServices(h.services)
		if err != nil {
			return fmt.Errorf("agreement %q: %w", rec.ID, err)
		}
		before, after := state.StoreNames(was), state.StoreNames(rec.Services)
		byName := tx.Bucket(bucketByName)
		for _, n := range before {
			if _, found := slices.BinarySearch(after, n); !found {
				if err := dropIndex(byName, n, id); err != nil {
					return err
				}
			}
		}
		for _, n := range after {
			if _, found := slices.BinarySearch(before, n); !found {
				if err := addIndex(byName, n, id); err != nil {
					return err
				}
			}
		}
		if err := records.Put(id, assemble(rec.Revision+1, services, tail)); err != nil {
			return err
		}
		return reindex(tx, rec.ID, h, rec.Node, rec.NextAttempt)
	})
	switch {
	case err != nil:
		return err
	case conflict:
		return &state.ConflictError{IDs: []string{rec.ID}}
	}
	rec.Revision++
	return nil
}

// reindex moves a record's node and due index entries from what h says
// to node and next.
func reindex(tx *bolt.Tx, id string, h head, node string, next time.Time) error {
	if h.node != node {
		if err := dropIndex(tx.Bucket(bucketByNode), h.node, []byte(id)); err != nil {
			return err
		}
		if err := addIndex(tx.Bucket(bucketByNode), node, []byte(id)); err != nil {
			return err
		}
	}
	if !h.next.Equal(next) {
		if err := dropDue(tx, h.next, id); err != nil {
			return err
		}
		return putDue(tx, next, id)
	}
	return nil
}

// Delete implements state.Backend.
func (s *State) Delete(ctx context.Context, ids ...string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		for _, id := range ids {
			if err := deleteRecord(tx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func deleteRecord(tx *bolt.Tx, id string) error {
	key := []byte(id)
	records := tx.Bucket(bucketRecords)
	v := records.Get(key)
	if v == nil {
		return nil
	}
	r, h, err := decodeRecord(id, v)
	if err != nil {
		return fmt.Errorf("agreement %q: %w", id, err)
	}
	for _, n := range state.StoreNames(r.Services) {
		if err := dropIndex(tx.Bucket(bucketByName), n, key); err != nil {
			return err
		}
	}
	if err := dropIndex(tx.Bucket(bucketByNode), h.node, key); err != nil {
		return err
	}
	if err := dropDue(tx, h.next, id); err != nil {
		return err
	}
	return records.Delete(key)
}

// Records implements state.Backend. It reads a page of records per
// transaction and calls fn outside it, so fn may call the State.
func (s *State) Records(ctx context.Context, fn func(state.Record) bool) error {
	return s.records(ctx, nil, -1, fn)
}

// RecordsAfter implements state.Backend, as Records does from after.
func (s *State) RecordsAfter(ctx context.Context, after string, limit int, fn func(state.Record) bool) error {
	if limit <= 0 {
		return fmt.Errorf("boltstate: RecordsAfter limit %d is not positive", limit)
	}
	return s.records(ctx, []byte(after), limit, fn)
}

// records calls fn with up to limit records (every one with a negative
// limit) whose id sorts after after, a page per read transaction.
func (s *State) records(ctx context.Context, after []byte, limit int, fn func(state.Record) bool) error {
	for limit != 0 {
		size := recordsPage
		if limit > 0 {
			size = min(size, limit)
		}
		var page []state.Record
		err := s.view(ctx, func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketRecords).Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(page) < size; k, v = c.Next() {
				r, _, err := decodeRecord(string(k), v)
				if err != nil {
					return fmt.Errorf("agreement %q: %w", k, err)
				}
				page = append(page, r)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range page {
			if !fn(r) {
				return nil
			}
		}
		if len(page) < size {
			return nil
		}
		if limit > 0 {
			limit -= len(page)
		}
		after = []byte(page[len(page)-1].ID)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// RecordsBound implements state.Backend through the name index: one
// read transaction for the ids and the records, fn called outside it.
func (s *State) RecordsBound(ctx context.Context, names []string, fn func(state.Record) bool) error {
	var recs []state.Record
	err := s.view(ctx, func(tx *bolt.Tx) error {
		recs = recs[:0]
		ids := map[string]struct{}{}
		for _, n := range names {
			if err := eachIndexed(tx.Bucket(bucketByName), n, func(id []byte) { ids[string(id)] = struct{}{} }); err != nil {
				return err
			}
		}
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			r, ok, err := getRecord(tx, id)
			if err != nil {
				return err
			}
			if ok {
				recs = append(recs, r)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range recs {
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// Names implements state.Backend: the keys of the name index.
func (s *State) Names(ctx context.Context, _ string) ([]string, error) {
	names := []string{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketByName).ForEach(func(k, _ []byte) error {
			names = append(names, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// MarkDue implements state.Backend.
func (s *State) MarkDue(ctx context.Context, sel state.Selector, at time.Time, resetAttempts bool) (int, error) {
	var changed int
	err := s.update(ctx, func(tx *bolt.Tx) error {
		changed = 0
		ids := map[string]struct{}{}
		for _, id := range sel.IDs {
			ids[id] = struct{}{}
		}
		for _, idx := range []struct {
			bucket []byte
			keys   []string
		}{{bucketByNode, sel.Nodes}, {bucketByName, sel.StoreNames}} {
			for _, key := range idx.keys {
				if err := eachIndexed(tx.Bucket(idx.bucket), key, func(id []byte) { ids[string(id)] = struct{}{} }); err != nil {
					return err
				}
			}
		}
		records := tx.Bucket(bucketRecords)
		for id := range ids {
			v := records.Get([]byte(id))
			if v == nil {
				continue
			}
			r, h, err := decodeRecord(id, v)
			if err != nil {
				return fmt.Errorf("agreement %q: %w", id, err)
			}
			moved := r.NextAttempt.IsZero() || r.NextAttempt.After(at)
			reset := resetAttempts && r.Attempts != 0
			if !moved && !reset {
				continue
			}
			if moved {
				r.NextAttempt = at
			}
			if reset {
				r.Attempts = 0
			}
			if err := records.Put([]byte(id), assemble(r.Revision+1, h.services, encodeTail(&r))); err != nil {
				return err
			}
			if err := reindex(tx, id, h, r.Node, r.NextAttempt); err != nil {
				return err
			}
			changed++
		}
		return nil
	})
	return changed, err
}

// Due implements state.Backend. It reads the due index from its start,
// so its cost grows with the records it returns, not with those stored.
func (s *State) Due(ctx context.Context, _ string, now time.Time, lease time.Duration, limit int) ([]state.Record, error) {
	var out []state.Record
	limitKey := dueKey(now, "")
	claim := now.Add(lease)
	// A read first: most calls find nothing due, and a write transaction
	// costs a commit to the disk even when it changes nothing.
	var any bool
	if err := s.view(ctx, func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketDue).Cursor().First()
		any = k != nil && (len(k) < 12 || bytes.Compare(k[:12], limitKey) <= 0)
		return nil
	}); err != nil || !any {
		return nil, err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		var ids []string
		c := tx.Bucket(bucketDue).Cursor()
		for k, _ := c.First(); k != nil && (limit <= 0 || len(ids) < limit); k, _ = c.Next() {
			if len(k) < 12 {
				return fmt.Errorf("%w: due index key", errCorrupt)
			}
			if bytes.Compare(k[:12], limitKey) > 0 {
				break
			}
			ids = append(ids, string(k[12:]))
		}
		records := tx.Bucket(bucketRecords)
		for _, id := range ids {
			v := records.Get([]byte(id))
			if v == nil {
				return fmt.Errorf("%w: the due index names agreement %q, which is not stored", errCorrupt, id)
			}
			r, h, err := decodeRecord(id, v)
			if err != nil {
				return fmt.Errorf("agreement %q: %w", id, err)
			}
			if r.NextAttempt.IsZero() || r.NextAttempt.After(now) {
				return fmt.Errorf("%w: the due index names agreement %q, due %v", errCorrupt, id, r.NextAttempt)
			}
			r.NextAttempt = claim
			r.Revision++
			if err := records.Put([]byte(id), assemble(r.Revision, h.services, encodeTail(&r))); err != nil {
				return err
			}
			if err := reindex(tx, id, h, r.Node, r.NextAttempt); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Observations implements state.Backend.
func (s *State) Observations(ctx context.Context, names []string) (map[string]state.Observation, error) {
	size := len(names)
	if names == nil {
		size = int(s.observed.Load())
	}
	out := make(map[string]state.Observation, size)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObservations)
		if names == nil {
			defer func() { s.observed.Store(int64(len(out))) }()
			return b.ForEach(func(k, v []byte) error {
				o, err := decodeObservation(string(k), v)
				if err != nil {
					return fmt.Errorf("observation of %q: %w", k, err)
				}
				out[o.Name] = o
				return nil
			})
		}
		for _, n := range names {
			v := b.Get([]byte(n))
			if v == nil {
				continue
			}
			o, err := decodeObservation(n, v)
			if err != nil {
				return fmt.Errorf("observation of %q: %w", n, err)
			}
			out[n] = o
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutObservations implements state.Backend.
func (s *State) PutObservations(ctx context.Context, _ string, obs ...state.Observation) error {
	values := make([][]byte, len(obs))
	for i, o := range obs {
		if err := checkKey("observed store name", o.Name); err != nil {
			return err
		}
		values[i] = encodeObservation(o)
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObservations)
		for i, o := range obs {
			if err := b.Put([]byte(o.Name), values[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutWait implements state.Backend.
func (s *State) PutWait(ctx context.Context, w state.Wait) error {
	if err := checkKey("wait id", w.ID); err != nil {
		return err
	}
	v := encodeWait(w)
	return s.update(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWaits).Put([]byte(w.ID), v)
	})
}

// Waits implements state.Backend.
func (s *State) Waits(ctx context.Context) ([]state.Wait, error) {
	out := []state.Wait{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWaits).ForEach(func(k, v []byte) error {
			w, err := decodeWait(string(k), v)
			if err != nil {
				return fmt.Errorf("wait %q: %w", k, err)
			}
			out = append(out, w)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteWait implements state.Backend.
func (s *State) DeleteWait(ctx context.Context, id string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWaits).Delete([]byte(id))
	})
}

// NewEpoch implements state.Backend: a counter in the file, committed
// before it is returned.
func (s *State) NewEpoch(ctx context.Context) (uint64, error) {
	var epoch uint64
	err := s.update(ctx, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		epoch = 1
		if v := meta.Get(keyEpoch); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("%w: epoch counter", errCorrupt)
			}
			epoch = beUint64(v) + 1
		}
		return putUint64(meta, keyEpoch, epoch)
	})
	return epoch, err
}

// checkKey says what is wrong with a key bbolt cannot store.
func checkKey(what, k string) error {
	switch {
	case k == "":
		return fmt.Errorf("boltstate: the %s is empty", what)
	case len(k) > bolt.MaxKeySize-12: // room for a due index key's time
		return fmt.Errorf("boltstate: the %s is %d bytes long; at most %d fit", what, len(k), bolt.MaxKeySize-12)
	}
	return nil
}

// addIndex adds id under key in an index bucket (a bucket per key). An
// empty key (a record without a node) is not indexed: nothing selects it.
func addIndex(idx *bolt.Bucket, key string, id []byte) error {
	if key == "" {
		return nil
	}
	b, err := idx.CreateBucketIfNotExists([]byte(key))
	if err != nil {
		return fmt.Errorf("index %q: %w", key, err)
	}
	return b.Put(id, nil)
}

// dropIndex removes id from key's bucket, and the bucket once empty.
func dropIndex(idx *bolt.Bucket, key string, id []byte) error {
	if key == "" {
		return nil
	}
	b := idx.Bucket([]byte(key))
	if b == nil {
		return nil
	}
	if err := b.Delete(id); err != nil {
		return err
	}
	if k, _ := b.Cursor().First(); k == nil {
		return idx.DeleteBucket([]byte(key))
	}
	return nil
}

// eachIndexed calls fn with every id under key.
func eachIndexed(idx *bolt.Bucket, key string, fn func(id []byte)) error {
	if key == "" {
		return nil
	}
	b := idx.Bucket([]byte(key))
	if b == nil {
		return nil
	}
	return b.ForEach(func(id, _ []byte) error { fn(id); return nil })
}

func putDue(tx *bolt.Tx, next time.Time, id string) error {
	if next.IsZero() {
		return nil
	}
	return tx.Bucket(bucketDue).Put(dueKey(next, id), nil)
}

func dropDue(tx *bolt.Tx, next time.Time, id string) error {
	if next.IsZero() {
		return nil
	}
	return tx.Bucket(bucketDue).Delete(dueKey(next, id))
}
