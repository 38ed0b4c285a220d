package secretstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Monitor is Store middleware that records when the backend last answered
// and counts calls and errors per operation. It feeds the agbot's /health
// "lastVaultInteraction".
//
// A call counts as a successful interaction when the backend answered: no
// error, or an error of kind ErrNotFound, ErrConflict or ErrPermission.
// ErrUnavailable, ErrInvalid (rejected before reaching the backend) and
// context errors do not. The credential check (CheckCredentials) is a call
// like the others, recorded under OpCheckCredentials.
type Monitor struct {
	Store
	now func() time.Time

	lastOK atomic.Int64 // unix nanoseconds; 0 = never
	mu     sync.Mutex
	stats  map[string]OpStats
}

// OpStats counts the calls of one operation.
type OpStats struct {
	Calls  int64
	Errors int64
}

// MonitorOption configures a Monitor.
type MonitorOption func(*Monitor)

// WithMonitorClock replaces time.Now, for tests.
func WithMonitorClock(now func() time.Time) MonitorOption {
	return func(m *Monitor) { m.now = now }
}

// NewMonitor wraps store.
func NewMonitor(store Store, opts ...MonitorOption) *Monitor {
	m := &Monitor{Store: store, now: time.Now, stats: map[string]OpStats{}}
	for _, o := range opts {
		o(m)
	}
	return m
}

// LastSuccess returns the time of the last successful backend interaction,
// or the zero time if there was none.
func (m *Monitor) LastSuccess() time.Time {
	ns := m.lastOK.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Stats returns a copy of the per-operation counters, keyed by Op name.
func (m *Monitor) Stats() map[string]OpStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]OpStats, len(m.stats))
	for k, v := range m.stats {
		out[k] = v
	}
	return out
}

// Record notes the outcome of one call of op. Middleware that talks to the
// backend by other means (a health probe) may call it.
func (m *Monitor) Record(op string, err error) {
	m.mu.Lock()
	st := m.stats[op]
	st.Calls++
	if err != nil {
		st.Errors++
	}
	m.stats[op] = st
	m.mu.Unlock()
	if answered(err) {
		m.lastOK.Store(m.now().UnixNano())
	}
}

func answered(err error) bool {
	return err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrPermission)
}

// Get implements Store.
func (m *Monitor) Get(ctx context.Context, name string) (*Secret, error) {
	s, err := m.Store.Get(ctx, name)
	m.Record(OpGet, err)
	return s, err
}

// Stat implements Store.
func (m *Monitor) Stat(ctx context.Context, name string) (Metadata, error) {
	md, err := m.Store.Stat(ctx, name)
	m.Record(OpStat, err)
	return md, err
}

// Put implements Store.
func (m *Monitor) Put(ctx context.Context, s *Secret, opts PutOptions) (bool, error) {
	changed, err := m.Store.Put(ctx, s, opts)
	m.Record(OpPut, err)
	return changed, err
}

// Delete implements Store.
func (m *Monitor) Delete(ctx context.Context, name string) error {
	err := m.Store.Delete(ctx, name)
	m.Record(OpDelete, err)
	return err
}

// List implements Store.
func (m *Monitor) List(ctx context.Context, prefix string) ([]string, error) {
	names, err := m.Store.List(ctx, prefix)
	m.Record(OpList, err)
	return names, err
}

// GetBatch reads through GetBatch on the wrapped store and records it as one Get.
func (m *Monitor) GetBatch(ctx context.Context, names []string) (map[string]*Secret, error) {
	out, err := GetBatch(ctx, m.Store, names)
	m.Record(OpGet, err)
	return out, err
}

// CheckCredentials runs the wrapped store's credential check (see
// CredentialChecker) and records it under OpCheckCredentials. For a store
// without one it returns ErrNoCredentialCheck and records nothing: no
// backend was asked.
func (m *Monitor) CheckCredentials(ctx context.Context) error {
	err := CheckCredentials(ctx, m.Store)
	if !errors.Is(err, ErrNoCredentialCheck) {
		m.Record(OpCheckCredentials, err)
	}
	return err
}
