package delivery

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/binding"
)

// MemoryState is a State kept in memory, for tests and for agbots that
// may lose their delivery state on restart. The zero value is not ready;
// use NewMemoryState. It ignores member ids: one engine uses it.
type MemoryState struct {
	mu      sync.Mutex
	records map[string]*Record
	byName  map[string]map[string]struct{} // store name → record ids
	byNode  map[string]map[string]struct{} // node → record ids
	obs     map[string]Observation
	waits   map[string]Wait
	epoch   uint64
	closed  bool
}

// NewMemoryState returns an empty MemoryState.
func NewMemoryState() *MemoryState {
	return &MemoryState{
		records: map[string]*Record{},
		byName:  map[string]map[string]struct{}{},
		byNode:  map[string]map[string]struct{}{},
		obs:     map[string]Observation{},
		waits:   map[string]Wait{},
	}
}

var _ State = (*MemoryState)(nil)

func (m *MemoryState) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.closed {
		return ErrStateUnavailable
	}
	return nil
}

// Create implements State.
func (m *MemoryState) Create(ctx context.Context, rec *Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	if _, ok := m.records[rec.ID]; ok {
		return ErrExists
	}
	rec.Revision = 1
	c := rec.Clone()
	m.records[rec.ID] = &c
	for _, n := range StoreNames(rec.Services) {
		addIndex(m.byName, n, rec.ID)
	}
	addIndex(m.byNode, rec.Node, rec.ID)
	return nil
}

// Get implements State.
func (m *MemoryState) Get(ctx context.Context, id string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return Record{}, err
	}
	r, ok := m.records[id]
	if !ok {
		return Record{}, ErrNotFound
	}
	return r.Clone(), nil
}

// Update implements State.
func (m *MemoryState) Update(ctx context.Context, _ string, recs ...*Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	var conflicts []string
	for _, rec := range recs {
		stored, ok := m.records[rec.ID]
		if !ok || stored.Revision != rec.Revision {
			conflicts = append(conflicts, rec.ID)
			continue
		}
		rec.Revision++
		c := rec.Clone()
		// Services never change after Create: the name index stays valid.
		c.Services = stored.Services
		if c.Node != stored.Node {
			dropIndex(m.byNode, stored.Node, rec.ID)
			addIndex(m.byNode, c.Node, rec.ID)
		}
		m.records[rec.ID] = &c
	}
	if len(conflicts) > 0 {
		return &ConflictError{IDs: conflicts}
	}
	return nil
}

// Delete implements State.
func (m *MemoryState) Delete(ctx context.Context, ids ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	for _, id := range ids {
		r, ok := m.records[id]
		if !ok {
			continue
		}
		for _, n := range StoreNames(r.Services) {
			dropIndex(m.byName, n, id)
		}
		dropIndex(m.byNode, r.Node, id)
		delete(m.records, id)
	}
	return nil
}

// Records implements State.
func (m *MemoryState) Records(ctx context.Context, fn func(Record) bool) error {
	m.mu.Lock()
	if err := m.check(ctx); err != nil {
		m.mu.Unlock()
		return err
	}
	ids := slices.Sorted(maps.Keys(m.records))
	m.mu.Unlock()
	for _, id := range ids {
		r, err := m.Get(ctx, id)
		if err == ErrNotFound {
			continue
		}
		if err != nil {
			return err
		}
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// Names implements State.
func (m *MemoryState) Names(ctx context.Context, _ string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(m.byName)), nil
}

// MarkDue implements State.
func (m *MemoryState) MarkDue(ctx context.Context, sel Selector, at time.Time, resetAttempts bool) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	ids := map[string]struct{}{}
	for _, id := range sel.IDs {
		ids[id] = struct{}{}
	}
	for _, n := range sel.Nodes {
		maps.Copy(ids, m.byNode[n])
	}
	for _, n := range sel.StoreNames {
		maps.Copy(ids, m.byName[n])
	}
	changed := 0
	for id := range ids {
		r, ok := m.records[id]
		if !ok {
			continue
		}
		if r.NextAttempt.IsZero() || r.NextAttempt.After(at) || (resetAttempts && r.Attempts != 0) {
			if r.NextAttempt.IsZero() || r.NextAttempt.After(at) {
				r.NextAttempt = at
			}
			if resetAttempts {
				r.Attempts = 0
			}
			r.Revision++
			changed++
		}
	}
	return changed, nil
}

// Due implements State.
func (m *MemoryState) Due(ctx context.Context, _ string, now time.Time, lease time.Duration, limit int) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	var due []*Record
	for _, r := range m.records {
		if !r.NextAttempt.IsZero() && !r.NextAttempt.After(now) {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b *Record) int {
		return cmp.Or(a.NextAttempt.Compare(b.NextAttempt), strings.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(due) > limit {
		due = due[:limit]
	}
	out := make([]Record, len(due))
	for i, r := range due {
		r.NextAttempt = now.Add(lease)
		r.Revision++
		out[i] = r.Clone()
	}
	return out, nil
}

// Observations implements State.
func (m *MemoryState) Observations(ctx context.Context, names []string) (map[string]Observation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]Observation, len(names))
	for _, n := range names {
		if o, ok := m.obs[n]; ok {
			out[n] = o
		}
	}
	return out, nil
}

// PutObservations implements State.
func (m *MemoryState) PutObservations(ctx context.Context, _ string, obs ...Observation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	for _, o := range obs {
		m.obs[o.Name] = o
	}
	return nil
}

// PutWait implements State.
func (m *MemoryState) PutWait(ctx context.Context, w Wait) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	w.StoreNames = slices.Clone(w.StoreNames)
	m.waits[w.ID] = w
	return nil
}

// Waits implements State.
func (m *MemoryState) Waits(ctx context.Context) ([]Wait, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	out := make([]Wait, 0, len(m.waits))
	for _, id := range slices.Sorted(maps.Keys(m.waits)) {
		w := m.waits[id]
		w.StoreNames = slices.Clone(w.StoreNames)
		out = append(out, w)
	}
	return out, nil
}

// DeleteWait implements State.
func (m *MemoryState) DeleteWait(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	delete(m.waits, id)
	return nil
}

// NewEpoch implements State.
func (m *MemoryState) NewEpoch(ctx context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	m.epoch++
	return m.epoch, nil
}

// Close implements State. Later calls fail with ErrStateUnavailable.
func (m *MemoryState) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// StoreNames returns the distinct candidate store names of services,
// sorted.
func StoreNames(services []binding.ServiceBinding) []string {
	set := map[string]struct{}{}
	for _, sb := range services {
		for _, b := range sb.Secrets {
			for _, n := range b.StoreNames {
				set[n] = struct{}{}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func addIndex(idx map[string]map[string]struct{}, key, id string) {
	set := idx[key]
	if set == nil {
		set = map[string]struct{}{}
		idx[key] = set
	}
	set[id] = struct{}{}
}

func dropIndex(idx map[string]map[string]struct{}, key, id string) {
	if set := idx[key]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(idx, key)
		}
	}
}
