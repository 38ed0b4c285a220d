package mock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// Operations a Store records besides the secretstore Op constants.
const (
	// OpGetBatch is recorded for a GetBatch passed on to a wrapped store
	// that implements secretstore.BatchGetter. On other stores a GetBatch
	// is recorded as one Get per name, which is what the backend sees.
	OpGetBatch = "getbatch"
	// OpClose is recorded for Close.
	OpClose = "close"
	// AnyOp selects every operation in FailNext, SetLatency and Count.
	AnyOp = "*"
)

// ErrInjected is the cause of every failure a Store injects, so a test can
// tell an injected fault from a real one with errors.Is.
var ErrInjected = errors.New("mock: injected fault")

// Call is one recorded call.
type Call struct {
	// Op is a secretstore Op constant (OpCheckCredentials for a credential
	// check), OpGetBatch or OpClose.
	Op string
	// Name is the secret name, or the prefix for a List; empty for
	// OpGetBatch and OpClose.
	Name string
	// Names are the names of an OpGetBatch.
	Names []string
}

// Store is a secretstore.Store that passes every call to the store it wraps,
// after recording the call and applying any fault set up for it. The zero
// value is not usable; call NewStore. It is safe for concurrent use, and
// faults may be changed while calls are running.
//
// For each call, in this order: the call is recorded; the latency set for
// its operation elapses (or the context ends, which fails the call with the
// context's error); the hook runs; if the store is switched unavailable the
// call fails with ErrUnavailable; if failures are pending for the operation
// one is used up and the call fails with its kind; otherwise the wrapped
// store serves the call. Close is recorded and passed on without faults.
type Store struct {
	inner secretstore.Store

	mu          sync.Mutex
	calls       []Call
	failures    map[string]failure
	latency     map[string]time.Duration
	unavailable bool
	hook        func(context.Context, Call) error
}

type failure struct {
	n    int
	kind error
}

var (
	_ secretstore.BatchGetter       = (*Store)(nil)
	_ secretstore.CredentialChecker = (*Store)(nil)
)

// NewStore wraps inner, or a new empty memory store when inner is nil.
func NewStore(inner secretstore.Store) *Store {
	if inner == nil {
		inner = memory.New()
	}
	return &Store{inner: inner, failures: map[string]failure{}, latency: map[string]time.Duration{}}
}

// Inner returns the wrapped store, to set up or inspect data without
// recording calls or meeting faults.
func (s *Store) Inner() secretstore.Store { return s.inner }

// FailNext makes the next n calls of op (a secretstore Op constant,
// OpGetBatch, or AnyOp for calls of any operation) fail with an error of
// the given kind, usually one of secretstore's Err kinds. It replaces what
// was pending for op; n <= 0 clears it. Failures pending for the call's own
// operation are used before those set for AnyOp.
func (s *Store) FailNext(op string, n int, kind error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= 0 {
		delete(s.failures, op)
		return
	}
	s.failures[op] = failure{n: n, kind: kind}
}

// SetLatency makes every call of op (or of any operation, for AnyOp) wait
// d before it proceeds. A latency set for the call's own operation takes
// precedence over the AnyOp one; d <= 0 removes the setting.
func (s *Store) SetLatency(op string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		delete(s.latency, op)
		return
	}
	s.latency[op] = d
}

// SetUnavailable switches the store down (every call but Close fails with
// ErrUnavailable) or back up.
func (s *Store) SetUnavailable(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unavailable = down
}

// SetHook installs h, called for every call but Close after the latency
// and before any other fault. A non-nil error from h fails the call with
// that error, unchanged. h may block (to hold a call in flight) and should
// then return when ctx ends. A nil h removes the hook.
func (s *Store) SetHook(h func(ctx context.Context, c Call) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

// Calls returns the calls recorded so far, oldest first.
func (s *Store) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Count returns how many calls of op (all calls, for AnyOp) were recorded.
func (s *Store) Count(op string) int {
	return s.count(func(c Call) bool { return op == AnyOp || c.Op == op })
}

// CountName returns how many calls of op were recorded for name.
func (s *Store) CountName(op, name string) int {
	return s.count(func(c Call) bool { return (op == AnyOp || c.Op == op) && c.Name == name })
}

func (s *Store) count(match func(Call) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if match(c) {
			n++
		}
	}
	return n
}

// Reset forgets the recorded calls and removes every fault and the hook.
// The wrapped store's data is untouched.
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
	clear(s.failures)
	clear(s.latency)
	s.unavailable = false
	s.hook = nil
}

// begin records c and applies the faults set up for it. A non-nil error
// means the call must fail with it without reaching the wrapped store.
func (s *Store) begin(ctx context.Context, c Call) error {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	d, ok := s.latency[c.Op]
	if !ok {
		d = s.latency[AnyOp]
	}
	hook := s.hook
	s.mu.Unlock()

	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return secretstore.NewError(c.Op, c.Name, nil, ctx.Err())
		}
	}
	if hook != nil {
		if err := hook(ctx, c); err != nil {
			return err
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unavailable {
		return secretstore.NewError(c.Op, c.Name, secretstore.ErrUnavailable, ErrInjected)
	}
	for _, op := range []string{c.Op, AnyOp} {
		f, ok := s.failures[op]
		if !ok {
			continue
		}
		if f.n--; f.n == 0 {
			delete(s.failures, op)
		} else {
			s.failures[op] = f
		}
		return secretstore.NewError(c.Op, c.Name, f.kind, ErrInjected)
	}
	return nil
}

// CheckCredentials implements secretstore.CredentialChecker: the check is
// recorded as secretstore.OpCheckCredentials and meets the faults set up
// for it like any call (FailNext(secretstore.OpCheckCredentials, ...),
// SetUnavailable, AnyOp failures), then runs the wrapped store's check;
// a wrapped store without one gives secretstore.ErrNoCredentialCheck.
func (s *Store) CheckCredentials(ctx context.Context) error {
	if err := s.begin(ctx, Call{Op: secretstore.OpCheckCredentials}); err != nil {
		return err
	}
	return secretstore.CheckCredentials(ctx, s.inner)
}

// Get implements secretstore.Store.
func (s *Store) Get(ctx context.Context, name string) (*secretstore.Secret, error) {
	if err := s.begin(ctx, Call{Op: secretstore.OpGet, Name: name}); err != nil {
		return nil, err
	}
	return s.inner.Get(ctx, name)
}

// Stat implements secretstore.Store.
func (s *Store) Stat(ctx context.Context, name string) (secretstore.Metadata, error) {
	if err := s.begin(ctx, Call{Op: secretstore.OpStat, Name: name}); err != nil {
		return secretstore.Metadata{}, err
	}
	return s.inner.Stat(ctx, name)
}

// Put implements secretstore.Store.
func (s *Store) Put(ctx context.Context, secret *secretstore.Secret, opts secretstore.PutOptions) (bool, error) {
	var name string
	if secret != nil {
		name = secret.Name
	}
	if err := s.begin(ctx, Call{Op: secretstore.OpPut, Name: name}); err != nil {
		return false, err
	}
	return s.inner.Put(ctx, secret, opts)
}

// Delete implements secretstore.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.begin(ctx, Call{Op: secretstore.OpDelete, Name: name}); err != nil {
		return err
	}
	return s.inner.Delete(ctx, name)
}

// List implements secretstore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := s.begin(ctx, Call{Op: secretstore.OpList, Name: prefix}); err != nil {
		return nil, err
	}
	return s.inner.List(ctx, prefix)
}

// GetBatch implements secretstore.BatchGetter. When the wrapped store reads
// batches in one call, the batch is one OpGetBatch call here too; otherwise
// it is one Get per distinct name, each recorded and subject to faults.
func (s *Store) GetBatch(ctx context.Context, names []string) (map[string]*secretstore.Secret, error) {
	bg, ok := s.inner.(secretstore.BatchGetter)
	if !ok {
		return secretstore.GetBatch(ctx, storeOnly{s}, names)
	}
	if err := s.begin(ctx, Call{Op: OpGetBatch, Names: slices.Clone(names)}); err != nil {
		return nil, err
	}
	return bg.GetBatch(ctx, names)
}

// Close records the call and closes the wrapped store.
func (s *Store) Close() error {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Op: OpClose})
	s.mu.Unlock()
	return s.inner.Close()
}

// storeOnly hides Store's GetBatch so secretstore.GetBatch falls back to
// one Get per name through the mock.
type storeOnly struct{ secretstore.Store }
