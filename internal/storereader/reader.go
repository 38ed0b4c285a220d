// Package storereader reads a secretstore.Store for read-heavy callers
// such as the agbot's delivery engine: concurrent reads of one name share
// one backend call, and a successful Get is served again from memory for
// a TTL, so N agreements over M distinct secrets cost O(M) backend reads.
package storereader

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Reader reads a secretstore.Store for read-heavy callers such as an agbot making many
// agreements over few secrets. Concurrent Gets of one name share one
// backend call, and a successful Get is served again from memory for TTL, so
// N agreements over M distinct secrets cost O(M) backend reads.
//
// Errors are never cached. Invalidate drops the cached copy and keeps a
// read that was in flight at the time from being cached: call it after
// writing the secret, or when a Watcher reports it changed. Concurrent
// Stats of one name share one call but are not cached, so change
// detection always sees the backend.
//
// Every caller gets its own deep copy of the secret.
type Reader struct {
	store *secretstore.Store
	ttl   time.Duration

	mu     sync.Mutex
	epoch  uint64 // bumped by every invalidation; a GetBatch from an older epoch is not cached
	cache  map[string]cached
	gets   map[string]*flight[*secretstore.Secret]
	stats  map[string]*flight[secretstore.Metadata]
	sweepN int
}

type cached struct {
	secret  *secretstore.Secret
	expires time.Time
}

type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
	// refs counts the callers sharing the flight that have not taken
	// their copy of val yet (Get's flights); the last wipes val. r.mu.
	refs int
}

// Options configure a Reader.
type Options struct {
	// TTL is how long a successful Get is served from memory. Zero disables
	// caching; concurrent reads are still coalesced.
	TTL time.Duration
}

// New returns a Reader of store.
func New(store *secretstore.Store, opts Options) *Reader {
	return &Reader{
		store: store,
		ttl:   max(opts.TTL, 0),
		cache: map[string]cached{},
		gets:  map[string]*flight[*secretstore.Secret]{},
		stats: map[string]*flight[secretstore.Metadata]{},
	}
}

// Get returns the named secret from the cache, from a read already in
// flight, or from the backend.
func (r *Reader) Get(ctx context.Context, name string) (*secretstore.Secret, error) {
	for {
		r.mu.Lock()
		if c, ok := r.cache[name]; ok {
			if time.Now().Before(c.expires) {
				s := c.secret.Clone() // under the lock: an eviction wipes the cached copy
				r.mu.Unlock()
				return s, nil
			}
			r.evict(name)
		}
		f, leader := join(r.gets, name)
		r.mu.Unlock()
		if leader {
			s, err := lead(r, r.gets, "get", name, f,
				func() (*secretstore.Secret, error) { return r.store.Get(ctx, name) },
				func(s *secretstore.Secret) {
					if r.ttl > 0 {
						r.put(name, s.Clone())
					}
				})
			out := s.Clone()
			r.release(f)
			return out, err
		}
		s, err, retry := wait(ctx, "get", name, f)
		out := s.Clone()
		r.release(f)
		if !retry {
			return out, err
		}
	}
}

// Stat coalesces concurrent calls for one name; results are not cached.
func (r *Reader) Stat(ctx context.Context, name string) (secretstore.Metadata, error) {
	for {
		r.mu.Lock()
		f, leader := join(r.stats, name)
		r.mu.Unlock()
		var md secretstore.Metadata
		var err error
		retry := false
		if leader {
			md, err = lead(r, r.stats, "stat", name, f,
				func() (secretstore.Metadata, error) { return r.store.Stat(ctx, name) }, nil)
		} else {
			md, err, retry = wait(ctx, "stat", name, f)
		}
		if !retry {
			// Each caller gets labels of its own.
			md.Labels = maps.Clone(md.Labels)
			return md, err
		}
	}
}

// GetBatch serves cached names from memory and reads the rest with one
// secretstore.Store.GetBatch, caching what it returns.
func (r *Reader) GetBatch(ctx context.Context, names []string) (map[string]*secretstore.Secret, error) {
	out := make(map[string]*secretstore.Secret, len(names))
	var missing []string
	seen := make(map[string]bool, len(names))
	r.mu.Lock()
	epoch := r.epoch
	now := time.Now()
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if c, ok := r.cache[n]; ok && now.Before(c.expires) {
			out[n] = c.secret.Clone()
		} else {
			missing = append(missing, n)
		}
	}
	r.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	got, err := r.store.GetBatch(ctx, missing)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for n, s := range got {
		if r.ttl > 0 && epoch == r.epoch {
			r.put(n, s.Clone())
		}
		out[n] = s
	}
	return out, nil
}

// Invalidate drops any cached copy of name, and makes reads already in
// flight not cache their result. The next Get reads the backend. Call it
// when a watcher reports the secret changed.
func (r *Reader) Invalidate(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	r.evict(name)
	// Later readers start a fresh read instead of joining one that may
	// return the old value, and the old read, no longer current, is not cached.
	delete(r.gets, name)
	delete(r.stats, name)
}

// put caches s; r.mu must be held. Expired entries are swept now and then so
// the cache does not grow with names no longer read.
func (r *Reader) put(name string, s *secretstore.Secret) {
	now := time.Now()
	r.evict(name)
	r.cache[name] = cached{secret: s, expires: now.Add(r.ttl)}
	if r.sweepN++; r.sweepN >= 1024 {
		r.sweepN = 0
		for k, c := range r.cache {
			if !now.Before(c.expires) {
				r.evict(k)
			}
		}
	}
}

// evict drops the cached copy of name, wiped; r.mu must be held. Every
// caller got a copy of its own, so nothing else holds these bytes.
func (r *Reader) evict(name string) {
	if c, ok := r.cache[name]; ok {
		c.secret.Data.Wipe()
		delete(r.cache, name)
	}
}

// release says that a caller sharing Get's flight f took its copy; the
// last one wipes the value read, which only the flight holds.
func (r *Reader) release(f *flight[*secretstore.Secret]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f.refs--; f.refs == 0 && f.val != nil {
		f.val.Data.Wipe()
	}
}

// join returns the in-flight call for name, or registers a new one and
// reports that the caller leads it. r.mu must be held.
func join[T any](m map[string]*flight[T], name string) (*flight[T], bool) {
	if f, ok := m[name]; ok {
		f.refs++
		return f, false
	}
	f := &flight[T]{done: make(chan struct{}), refs: 1}
	m[name] = f
	return f, true
}

// lead performs read for flight f, which the caller leads, and hands the
// result to its waiters. If the read succeeded and f is still the current
// flight for name (no Invalidate in between), keep is called with r.mu held.
// f is finished even if read panics, so waiters never hang.
func lead[T any](r *Reader, flights map[string]*flight[T], op, name string, f *flight[T], read func() (T, error), keep func(T)) (T, error) {
	finished := false
	defer func() {
		if finished {
			return
		}
		// read panicked: fail the waiters and let the panic go on.
		f.err = &secretstore.Error{Op: op, Name: name, Kind: edgesecrets.ErrUnavailable, Err: errors.New("the backend panicked")}
		r.mu.Lock()
		if flights[name] == f {
			delete(flights, name)
		}
		r.mu.Unlock()
		close(f.done)
	}()
	f.val, f.err = read()
	finished = true
	r.mu.Lock()
	current := flights[name] == f
	if current {
		delete(flights, name)
	}
	if current && f.err == nil && keep != nil {
		keep(f.val)
	}
	r.mu.Unlock()
	close(f.done)
	return f.val, f.err
}

// wait blocks until f finishes or ctx ends. retry is true when the leader's
// own context ended but ours has not: the caller should read again rather
// than inherit someone else's cancellation.
func wait[T any](ctx context.Context, op, name string, f *flight[T]) (val T, err error, retry bool) {
	var zero T
	select {
	case <-f.done:
	case <-ctx.Done():
		return zero, &secretstore.Error{Op: op, Name: name, Err: ctx.Err()}, false
	}
	if f.err != nil && ctx.Err() == nil &&
		(errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
		return zero, nil, true
	}
	return f.val, f.err, false
}
