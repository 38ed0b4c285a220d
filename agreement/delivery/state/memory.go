package state

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/binding"
)

// Memory is a Backend kept in memory, for tests and for agbots that may
// lose their delivery state on restart. It ignores member ids: one engine
// uses it. After Close its calls fail with ErrStateUnavailable. Make one
// with NewMemory.
//
// It keeps each record compact: its bindings as slices, not maps, and
// shared with every record of the same bindings (a fleet has far fewer
// distinct bindings than agreements), so that a large fleet is few
// pointers for the garbage collector to follow. It keeps a queue of the
// records by NextAttempt for Due, an index from each store name to the
// records binding it (MarkDue and RecordsBound), and the records sorted by
// id, sorted again after records come or go (RecordsAfter reads its slice
// from them without a lookup per record).
type Memory struct {
	mu       sync.Mutex
	records  map[string]*memRecord
	names    map[string]map[string]struct{} // store name → ids of the records binding it
	services map[string]*memServices        // the distinct bindings, by servicesKey
	sorted   []*memRecord                   // the records by id; nil after a Create or Delete
	due      dueQueue                       // records with a NextAttempt, earliest first
	obs      map[string]Observation
	waits    map[string]Wait
	epoch    uint64
	closed   bool
}

// memRecord is a stored record: rec without its Services, which are kept
// as services, shared.
type memRecord struct {
	rec      Record
	services *memServices
	slot     int // index in Memory.due; -1 when not in it
}

// memServices are the compact bindings of the records that have the same
// ones; refs counts those records. Never changed once made: a Rebind
// takes other ones.
type memServices struct {
	key      string
	refs     int
	services []memService
}

type memService struct {
	ref     agreement.ServiceRef
	secrets []memSecret // sorted by name
}

type memSecret struct {
	name, format string
	storeNames   []string
}

// intern returns the shared compact form of services, counting one more
// record that has them. m.mu must be held.
func (m *Memory) intern(services []binding.ServiceBinding) *memServices {
	compact := compactServices(services)
	key := servicesKey(compact)
	if s, ok := m.services[key]; ok {
		s.refs++
		return s
	}
	s := &memServices{key: key, refs: 1, services: compact}
	m.services[key] = s
	return s
}

// release counts one record fewer that has s, and forgets s with the
// last. m.mu must be held.
func (m *Memory) release(s *memServices) {
	if s.refs--; s.refs == 0 {
		delete(m.services, s.key)
	}
}

// servicesKey is a canonical encoding of compact bindings: equal exactly
// when the bindings are (services in order, each one's secrets sorted by
// name, every string length-prefixed). A nil and an empty slice differ.
func servicesKey(services []memService) string {
	if services == nil {
		return ""
	}
	b := []byte{1}
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(services)))
	for _, ms := range services {
		str(ms.ref.Org)
		str(ms.ref.URL)
		str(ms.ref.Arch)
		str(ms.ref.Version)
		str(ms.ref.Container)
		b = binary.AppendUvarint(b, uint64(len(ms.secrets)))
		for _, sec := range ms.secrets {
			str(sec.name)
			str(sec.format)
			b = binary.AppendUvarint(b, uint64(len(sec.storeNames)))
			for _, n := range sec.storeNames {
				str(n)
			}
		}
	}
	return string(b)
}

func compactServices(services []binding.ServiceBinding) []memService {
	out := make([]memService, len(services))
	for i, sb := range services {
		out[i] = memService{ref: sb.Service, secrets: make([]memSecret, 0, len(sb.Secrets))}
		for _, name := range slices.Sorted(maps.Keys(sb.Secrets)) {
			b := sb.Secrets[name]
			out[i].secrets = append(out[i].secrets, memSecret{name: name, format: b.Format, storeNames: slices.Clone(b.StoreNames)})
		}
	}
	return out
}

// record returns a deep copy of the stored record.
func (m *memRecord) record() Record {
	r := m.rec.Clone()
	if m.services.services != nil {
		r.Services = make([]binding.ServiceBinding, len(m.services.services))
		for i, ms := range m.services.services {
			secrets := make(map[string]binding.BoundSecret, len(ms.secrets))
			for _, sec := range ms.secrets {
				secrets[sec.name] = binding.BoundSecret{StoreNames: slices.Clone(sec.storeNames), Format: sec.format}
			}
			r.Services[i] = binding.ServiceBinding{Service: ms.ref, Secrets: secrets}
		}
	}
	return r
}

// storeNames calls fn with each distinct store name of the record.
func (m *memRecord) storeNames(fn func(string)) {
	var seen []string
	for _, ms := range m.services.services {
		for _, sec := range ms.secrets {
			for _, n := range sec.storeNames {
				if !slices.Contains(seen, n) {
					seen = append(seen, n)
					fn(n)
				}
			}
		}
	}
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{
		records:  map[string]*memRecord{},
		names:    map[string]map[string]struct{}{},
		services: map[string]*memServices{},
		obs:      map[string]Observation{},
		waits:    map[string]Wait{},
	}
}

var _ Backend = (*Memory)(nil)

func (m *Memory) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.closed {
		return ErrStateUnavailable
	}
	return nil
}

// Create implements Backend.
func (m *Memory) Create(ctx context.Context, rec *Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	if _, ok := m.records[rec.ID]; ok {
		return ErrExists
	}
	rec.Revision = 1
	stored := &memRecord{services: m.intern(rec.Services), slot: -1}
	services := rec.Services
	rec.Services = nil
	stored.rec = rec.Clone()
	rec.Services = services
	m.records[rec.ID] = stored
	m.sorted = nil
	m.schedule(stored)
	m.bind(stored)
	return nil
}

// Get implements Backend.
func (m *Memory) Get(ctx context.Context, id string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return Record{}, err
	}
	r, ok := m.records[id]
	if !ok {
		return Record{}, ErrNotFound
	}
	return r.record(), nil
}

// Update implements Backend.
func (m *Memory) Update(ctx context.Context, _ string, recs ...*Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	var conflicts []string
	for _, rec := range recs {
		stored, ok := m.records[rec.ID]
		if !ok || stored.rec.Revision != rec.Revision {
			conflicts = append(conflicts, rec.ID)
			continue
		}
		rec.Revision++
		// Services change only by Rebind.
		services := rec.Services
		rec.Services = nil
		stored.rec = rec.Clone()
		rec.Services = services
		m.schedule(stored)
	}
	if len(conflicts) > 0 {
		return &ConflictError{IDs: conflicts}
	}
	return nil
}

// Rebind implements Backend.
func (m *Memory) Rebind(ctx context.Context, _ string, rec *Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	stored, ok := m.records[rec.ID]
	if !ok || stored.rec.Revision != rec.Revision {
		return &ConflictError{IDs: []string{rec.ID}}
	}
	rec.Revision++
	m.unbind(stored)
	m.release(stored.services)
	stored.services = m.intern(rec.Services)
	m.bind(stored)
	services := rec.Services
	rec.Services = nil
	stored.rec = rec.Clone()
	rec.Services = services
	m.schedule(stored)
	return nil
}

// bind adds r to the index of each of its store names.
func (m *Memory) bind(r *memRecord) {
	r.storeNames(func(n string) {
		ids := m.names[n]
		if ids == nil {
			ids = map[string]struct{}{}
			m.names[n] = ids
		}
		ids[r.rec.ID] = struct{}{}
	})
}

// unbind removes r from the index of each of its store names.
func (m *Memory) unbind(r *memRecord) {
	r.storeNames(func(n string) {
		delete(m.names[n], r.rec.ID)
		if len(m.names[n]) == 0 {
			delete(m.names, n)
		}
	})
}

// sortedRecords returns the records in id order, sorting them again if
// records came or went since the last call. m.mu must be held.
func (m *Memory) sortedRecords() []*memRecord {
	if m.sorted == nil {
		m.sorted = slices.SortedFunc(maps.Values(m.records), func(a, b *memRecord) int { return strings.Compare(a.rec.ID, b.rec.ID) })
	}
	return m.sorted
}

// boundIDs returns the ids of the records binding any of names, sorted.
// m.mu must be held.
func (m *Memory) boundIDs(names []string) []string {
	set := map[string]struct{}{}
	for _, n := range names {
		for id := range m.names[n] {
			set[id] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Delete implements Backend.
func (m *Memory) Delete(ctx context.Context, ids ...string) error {
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
		m.unbind(r)
		m.release(r.services)
		m.sorted = nil
		if r.slot >= 0 {
			heap.Remove(&m.due, r.slot)
		}
		delete(m.records, id)
	}
	return nil
}

// Records implements Backend.
func (m *Memory) Records(ctx context.Context, fn func(Record) bool) error {
	m.mu.Lock()
	if err := m.check(ctx); err != nil {
		m.mu.Unlock()
		return err
	}
	sorted := m.sortedRecords()
	ids := make([]string, len(sorted))
	for i, r := range sorted {
		ids[i] = r.rec.ID
	}
	m.mu.Unlock()
	return m.each(ctx, ids, fn)
}

// each calls fn with the records of ids still stored, outside the lock,
// so fn may use the Backend.
func (m *Memory) each(ctx context.Context, ids []string, fn func(Record) bool) error {
	for _, id := range ids {
		r, err := m.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
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

// RecordsAfter implements Backend.
func (m *Memory) RecordsAfter(ctx context.Context, after string, limit int, fn func(Record) bool) error {
	if limit <= 0 {
		return fmt.Errorf("delivery: RecordsAfter limit %d is not positive", limit)
	}
	m.mu.Lock()
	if err := m.check(ctx); err != nil {
		m.mu.Unlock()
		return err
	}
	sorted := m.sortedRecords()
	i, found := slices.BinarySearchFunc(sorted, after, func(r *memRecord, id string) int { return strings.Compare(r.rec.ID, id) })
	if found {
		i++
	}
	// Copied under one lock: the slice is bounded by limit.
	sorted = sorted[i:min(len(sorted), i+limit)]
	recs := make([]Record, len(sorted))
	for i, r := range sorted {
		recs[i] = r.record()
	}
	m.mu.Unlock()
	for _, r := range recs {
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// RecordsBound implements Backend.
func (m *Memory) RecordsBound(ctx context.Context, names []string, fn func(Record) bool) error {
	m.mu.Lock()
	if err := m.check(ctx); err != nil {
		m.mu.Unlock()
		return err
	}
	ids := m.boundIDs(names)
	m.mu.Unlock()
	return m.each(ctx, ids, fn)
}

// Names implements Backend.
func (m *Memory) Names(ctx context.Context, _ string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(m.names)), nil
}

// MarkDue implements Backend.
func (m *Memory) MarkDue(ctx context.Context, sel Selector, at time.Time, resetAttempts bool) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	nodes := setOf(sel.Nodes)
	ids := slices.Concat(sel.IDs, m.boundIDs(sel.StoreNames))
	if len(nodes) > 0 {
		for id, r := range m.records {
			if nodes[r.rec.Node] {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var recs []*memRecord
	for _, id := range ids {
		if r, ok := m.records[id]; ok {
			recs = append(recs, r)
		}
	}
	changed := 0
	for _, mr := range recs {
		r := &mr.rec
		if r.NextAttempt.IsZero() || r.NextAttempt.After(at) || (resetAttempts && r.Attempts != 0) {
			if r.NextAttempt.IsZero() || r.NextAttempt.After(at) {
				r.NextAttempt = at
			}
			if resetAttempts {
				r.Attempts = 0
			}
			r.Revision++
			m.schedule(mr)
			changed++
		}
	}
	return changed, nil
}

// Due implements Backend.
func (m *Memory) Due(ctx context.Context, _ string, now time.Time, lease time.Duration, limit int) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	var taken []*memRecord
	for (limit <= 0 || len(taken) < limit) && m.due.Len() > 0 && !m.due[0].rec.NextAttempt.After(now) {
		taken = append(taken, heap.Pop(&m.due).(*memRecord))
	}
	out := make([]Record, len(taken))
	for i, r := range taken {
		r.rec.NextAttempt = now.Add(lease)
		r.rec.Revision++
		m.schedule(r)
		out[i] = r.record()
	}
	return out, nil
}

// schedule puts r where its NextAttempt belongs in the due queue.
func (m *Memory) schedule(r *memRecord) {
	switch {
	case r.rec.NextAttempt.IsZero() && r.slot >= 0:
		heap.Remove(&m.due, r.slot)
	case r.rec.NextAttempt.IsZero():
	case r.slot >= 0:
		heap.Fix(&m.due, r.slot)
	default:
		heap.Push(&m.due, r)
	}
}

// dueQueue is a min-heap of records by NextAttempt, then id.
type dueQueue []*memRecord

func (q dueQueue) Len() int { return len(q) }
func (q dueQueue) Less(i, j int) bool {
	a, b := &q[i].rec, &q[j].rec
	return cmp.Or(a.NextAttempt.Compare(b.NextAttempt), strings.Compare(a.ID, b.ID)) < 0
}
func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].slot, q[j].slot = i, j
}
func (q *dueQueue) Push(x any) {
	r := x.(*memRecord)
	r.slot = len(*q)
	*q = append(*q, r)
}
func (q *dueQueue) Pop() any {
	old := *q
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	r.slot = -1
	return r
}

// Observations implements Backend.
func (m *Memory) Observations(ctx context.Context, names []string) (map[string]Observation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	if names == nil {
		return maps.Clone(m.obs), nil
	}
	out := make(map[string]Observation, len(names))
	for _, n := range names {
		if o, ok := m.obs[n]; ok {
			out[n] = o
		}
	}
	return out, nil
}

// PutObservations implements Backend.
func (m *Memory) PutObservations(ctx context.Context, _ string, obs ...Observation) error {
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

// PutWait implements Backend.
func (m *Memory) PutWait(ctx context.Context, w Wait) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	w.StoreNames = slices.Clone(w.StoreNames)
	m.waits[w.ID] = w
	return nil
}

// Waits implements Backend.
func (m *Memory) Waits(ctx context.Context) ([]Wait, error) {
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

// DeleteWait implements Backend.
func (m *Memory) DeleteWait(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	delete(m.waits, id)
	return nil
}

// NewEpoch implements Backend.
func (m *Memory) NewEpoch(ctx context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	m.epoch++
	return m.epoch, nil
}

// Close implements Backend. Later calls fail with ErrStateUnavailable.
func (m *Memory) Close() error {
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

func setOf(keys []string) map[string]bool {
	if len(keys) == 0 {
		return nil
	}
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	return set
}
