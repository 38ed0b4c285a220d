package pgstate

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Names implements state.Backend: the store names bound by any record
// whose owner, among the live members, is member (rendezvous hashing: see
// the package documentation). The member must have joined through this
// State and be live; otherwise the error matches state.ErrLeaseLost.
//
// Each call reads the names' generation (bumped by every change to the
// bindings) and the live members; the names themselves are read again
// only when either changed since the member's last call.
func (s *State) Names(ctx context.Context, member string) ([]string, error) {
	o := op{what: "listing the names to poll", member: member, rerun: true}
	inc, err := s.joined(o)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	last, had := s.names[member]
	s.mu.Unlock()
	generation, members := int64(-1), []string{}
	if had {
		generation, members = last.generation, last.members
	}
	var (
		cur           namesRead
		changed, live bool
	)
	err = s.call(ctx, o, func(ctx context.Context) error {
		err := s.pool.QueryRow(ctx, s.q.names, member, generation, members, int64(inc)).Scan(&cur.generation, &cur.members, &changed, &cur.names, &live)
		if err == nil && !live {
			return &leaseLostError{op: o.what, member: member}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !changed {
		cur = last
	} else {
		s.namesReads.Add(1)
		s.mu.Lock()
		s.names[member] = cur
		s.mu.Unlock()
	}
	return slices.Clone(cur.names), nil
}

// namesRead is what a member's last Names call read: the names'
// generation, the live members and the names it polls.
type namesRead struct {
	generation int64
	members    []string
	names      []string
}

// Observations implements state.Backend. The observations it read are
// kept with the observations' generation they were read at (bumped by
// every statement that changes them, and read in the same snapshot): a
// later call reads the generation and, while it is unchanged, only the
// names it has not read yet. An idle interval's review reads a counter,
// not a row per name.
func (s *State) Observations(ctx context.Context, names []string) (map[string]state.Observation, error) {
	if names == nil {
		return s.allObservations(ctx)
	}
	if len(names) == 0 {
		return map[string]state.Observation{}, ctx.Err()
	}
	generation, known, lacking := s.observed.lookup(names)
	var (
		read = map[string]state.Observation{}
		cur  int64
	)
	err := s.call(ctx, op{what: "reading observations", rerun: true}, func(ctx context.Context) error {
		clear(read)
		rows, err := s.pool.Query(ctx, s.q.observations, names, generation, lacking)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				name, tag        *string
				state            *int16
				since, checkedAt *time.Time
			)
			if err := rows.Scan(&cur, &name, &state, &tag, &since, &checkedAt); err != nil {
				return err
			}
			if name == nil { // the generation alone: nothing to read
				continue
			}
			o, err := observationOf(*name, *state, *tag, since, checkedAt)
			if err != nil {
				return err
			}
			read[o.Name] = o
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	// The caller gets the map lookup made, or the one read into: copying
	// them into another doubled what an idle interval's review allocates
	// for its observations.
	if cur != generation || known == nil {
		s.observed.keep(cur, names, read) // the generation changed: every name was read
		return read, nil
	}
	s.observed.keep(cur, lacking, read)
	maps.Copy(known, read)
	return known, nil
}

// allObservations is Observations(nil): every stored observation, read
// past the cache.
func (s *State) allObservations(ctx context.Context) (map[string]state.Observation, error) {
	out := map[string]state.Observation{}
	err := s.call(ctx, op{what: "reading observations", rerun: true}, func(ctx context.Context) error {
		clear(out)
		rows, err := s.pool.Query(ctx, s.q.allObservations)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				name, tag        string
				state            int16
				since, checkedAt *time.Time
			)
			if err := rows.Scan(&name, &state, &tag, &since, &checkedAt); err != nil {
				return err
			}
			o, err := observationOf(name, state, tag, since, checkedAt)
			if err != nil {
				return err
			}
			out[o.Name] = o
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// observationOf is the observation of a stored row.
func observationOf(name string, observed int16, tag string, since, checkedAt *time.Time) (state.Observation, error) {
	o := state.Observation{Name: name, State: state.ObservedState(observed), Since: fromDB(since), CheckedAt: fromDB(checkedAt)}
	var err error
	if o.Tag, err = secretstore.ParseContentTag(tag); err != nil {
		return o, corrupt(name, "observation", err)
	}
	return o, nil
}

// maxCachedObservations bounds an observationsCache: past it, the cache
// starts again.
const maxCachedObservations = 100_000

// observationsCache keeps the observations Observations read at one
// generation of them: a name read and not stored is kept as the zero
// Observation (no Name).
type observationsCache struct {
	mu         sync.Mutex
	generation int64 // -1 while empty
	m          map[string]state.Observation
	reads      atomic.Int64 // names read from the table (the tests count them)
	off        bool         // every call reads every name (the benchmarks' baseline)
}

// lookup returns the cache's generation, the stored observations of names
// it holds, and the names it lacks.
func (c *observationsCache) lookup(names []string) (generation int64, known map[string]state.Observation, lacking []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.off {
		return -1, nil, names
	}
	known = make(map[string]state.Observation, len(names))
	for _, n := range names {
		switch o, ok := c.m[n]; {
		case !ok:
			lacking = append(lacking, n)
		case o.Name != "":
			known[n] = o
		}
	}
	if lacking == nil {
		lacking = []string{} // an empty array, not NULL
	}
	return c.generation, known, lacking
}

// keep records what a read at generation found of names: read holds
// those stored. A read at an older generation than the cache's is not
// kept; one at a newer generation starts the cache again.
func (c *observationsCache) keep(generation int64, names []string, read map[string]state.Observation) {
	c.reads.Add(int64(len(names)))
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.off:
		return
	case c.m != nil && generation < c.generation:
		return
	case c.m == nil || generation > c.generation || len(c.m)+len(names) > maxCachedObservations:
		c.m, c.generation = make(map[string]state.Observation, len(names)), generation
	}
	for _, n := range names {
		c.m[n] = read[n]
	}
}

// PutObservations implements state.Backend, fenced: member stores the
// observations of the names it polls (Names) and of names no record binds
// (those deployments wait for). The others are not stored, and the error,
// a *state.ConflictError matching state.ErrConflict, lists them:
// a member that lost a name to another cannot overwrite what the new
// owner observes. The member must have joined through this State and be
// live; otherwise nothing is stored and the error matches
// state.ErrLeaseLost.
func (s *State) PutObservations(ctx context.Context, member string, obs ...state.Observation) error {
	o := op{what: "storing observations", member: member, rerun: true}
	if len(obs) == 0 {
		return ctx.Err()
	}
	inc, err := s.joined(o)
	if err != nil {
		return err
	}
	// The last observation of a name given twice is the one stored.
	last := map[string]state.Observation{}
	for _, o := range obs {
		c := &checker{what: "observation"}
		c.check("name", o.Name)
		c.check("content tag", o.Tag.Encode())
		if c.err != nil {
			return c.err
		}
		last[o.Name] = o
	}
	names := slices.Sorted(maps.Keys(last))
	var (
		states           = make([]int16, len(names))
		tags             = make([]string, len(names))
		since, checkedAt = make([]*time.Time, len(names)), make([]*time.Time, len(names))
	)
	for i, n := range names {
		o := last[n]
		states[i], tags[i], since[i], checkedAt[i] = int16(o.State), o.Tag.Encode(), micro(o.Since), micro(o.CheckedAt)
	}
	stored, err := s.fencedStrings(ctx, o, inc, s.q.putObservations, names, states, tags, since, checkedAt, member)
	if err != nil {
		return err
	}
	if refused := missing(names, stored); len(refused) > 0 {
		return &state.ConflictError{IDs: refused}
	}
	return nil
}

// PutWait implements state.Backend.
func (s *State) PutWait(ctx context.Context, w state.Wait) error {
	c := &checker{what: "wait"}
	c.check("id", w.ID)
	for _, n := range w.StoreNames {
		c.check("store name", n)
	}
	if c.err != nil {
		return c.err
	}
	return s.call(ctx, op{what: "storing wait " + quote(w.ID), rerun: true}, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.putWait, w.ID, nonNil(w.StoreNames), micro(w.CreatedAt))
		return err
	})
}

// Waits implements state.Backend.
func (s *State) Waits(ctx context.Context) ([]state.Wait, error) {
	var out []state.Wait
	err := s.call(ctx, op{what: "listing waits", rerun: true}, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.q.waits)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var w state.Wait
			var created *time.Time
			if err := rows.Scan(&w.ID, &w.StoreNames, &created); err != nil {
				return err
			}
			w.CreatedAt = fromDB(created)
			out = append(out, w)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteWait implements state.Backend.
func (s *State) DeleteWait(ctx context.Context, id string) error {
	return s.call(ctx, op{what: "deleting wait " + quote(id), rerun: true}, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.deleteWait, id)
		return err
	})
}

// NewEpoch implements state.Backend with a PostgreSQL sequence: above
// every number it gave before, to any member, across restarts (a crash
// may skip numbers, never repeat one).
func (s *State) NewEpoch(ctx context.Context) (uint64, error) {
	var epoch int64
	err := s.call(ctx, op{what: "taking an epoch", rerun: true}, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.q.newEpoch).Scan(&epoch)
	})
	return uint64(epoch), err
}
