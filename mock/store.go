package mock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// Operations a Store records besides the operation names of secretstore.Error.Op.
const (
	// OpGetBatch is recorded for a GetBatch, passed on to the wrapped
	// store's GetBatch.
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
	// Op is an operation name of secretstore.Error.Op ("check-credentials"
	// for a credential check), OpGetBatch or OpClose.
	Op string
	// Name is the secret name, or the prefix for a List; empty for
	// OpGetBatch and OpClose.
	Name string
	// Names are the names of an OpGetBatch.
	Names []string
}

// Store is a *secretstore.Store over a driver that passes every call to
// the store it wraps, after recording the call and applying any fault set
// up for it. Pass its Store field where a *secretstore.Store is wanted.
// The zero value is not usable; call NewStore. It is safe for concurrent
// use, and faults may be changed while calls are running.
//
// It records what the backend would see: a call refused before reaching a
// backend (an invalid name, a closed store) is not recorded, and a Put is
// recorded as the Get it makes to compare, then, when something changed,
// the Put. The portable store does not retry here: each fault fails the
// call it is used up by.
//
// For each call, in this order: the call is recorded; the latency set for
// its operation elapses (or the context ends, which fails the call with the
// context's error); the hook runs; if the store is switched unavailable the
// call fails with ErrUnavailable; if failures are pending for the operation
// one is used up and the call fails with its kind; otherwise the wrapped
// store serves the call. Close is recorded and passed on without faults.
type Store struct {
	*secretstore.Store
	d *recorder
}

// recorder is the driver: the state of the faults and the calls.
type recorder struct {
	inner *secretstore.Store

	mu          sync.Mutex
	calls       []Call
	failures    map[string]failure
	latency     map[string]time.Duration
	unavailable bool
	versionless bool
	hook        func(context.Context, Call) error
}

type failure struct {
	n    int
	kind error
}

var (
	_ driver.BatchGetter       = (*recorder)(nil)
	_ driver.CredentialChecker = (*recorder)(nil)
)

// NewStore wraps inner, or a new empty memory store when inner is nil.
func NewStore(inner *secretstore.Store) *Store {
	if inner == nil {
		inner = memory.New()
	}
	d := &recorder{inner: inner, failures: map[string]failure{}, latency: map[string]time.Duration{}}
	s, err := secretstore.New(d, secretstore.Options{MaxAttempts: 1})
	if err != nil {
		panic("mock: " + err.Error()) // constant, valid options
	}
	return &Store{Store: s, d: d}
}

// Inner returns the wrapped store, to set up or inspect data without
// recording calls or meeting faults.
func (s *Store) Inner() *secretstore.Store { return s.d.inner }

// FailNext makes the next n calls of op (a secretstore.Error.Op name,
// OpGetBatch, or AnyOp for calls of any operation) fail with an error of
// the given kind, usually one of secretstore's Err kinds. It replaces what
// was pending for op; n <= 0 clears it. Failures pending for the call's own
// operation are used before those set for AnyOp.
func (s *Store) FailNext(op string, n int, kind error) {
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if n <= 0 {
		delete(d.failures, op)
		return
	}
	d.failures[op] = failure{n: n, kind: kind}
}

// SetLatency makes every call of op (or of any operation, for AnyOp) wait
// d before it proceeds. A latency set for the call's own operation takes
// precedence over the AnyOp one; d <= 0 removes the setting.
func (s *Store) SetLatency(op string, d time.Duration) {
	r := s.d
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= 0 {
		delete(r.latency, op)
		return
	}
	r.latency[op] = d
}

// SetUnavailable switches the store down (every call but Close fails with
// ErrUnavailable) or back up.
func (s *Store) SetUnavailable(down bool) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.unavailable = down
}

// SetVersionless makes reads report no Version (Get, Stat, GetBatch), as a
// store without versions does (Vault KV v1), so code's fallback to
// checksums of the data can be tested; or turns that off.
func (s *Store) SetVersionless(on bool) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.versionless = on
}

// SetHook installs h, called for every call but Close after the latency
// and before any other fault. A non-nil error from h fails the call with
// that error, unchanged. h may block (to hold a call in flight) and should
// then return when ctx ends. A nil h removes the hook.
func (s *Store) SetHook(h func(ctx context.Context, c Call) error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.hook = h
}

// Calls returns the calls recorded so far, oldest first.
func (s *Store) Calls() []Call {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return slices.Clone(s.d.calls)
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
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	n := 0
	for _, c := range s.d.calls {
		if match(c) {
			n++
		}
	}
	return n
}

// Reset forgets the recorded calls and removes every fault, the hook and
// SetVersionless.
// The wrapped store's data is untouched.
func (s *Store) Reset() {
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = nil
	clear(d.failures)
	clear(d.latency)
	d.unavailable = false
	d.versionless = false
	d.hook = nil
}

// begin records c and applies the faults set up for it. A non-nil error
// means the call must fail with it without reaching the wrapped store.
func (s *recorder) begin(ctx context.Context, c Call) error {
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
			return &secretstore.Error{Op: c.Op, Name: c.Name, Err: ctx.Err()}
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
		return &secretstore.Error{Op: c.Op, Name: c.Name, Kind: secretstore.ErrUnavailable, Err: ErrInjected}
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
		return &secretstore.Error{Op: c.Op, Name: c.Name, Kind: f.kind, Err: ErrInjected}
	}
	return nil
}

// CheckCredentials implements driver.CredentialChecker: the check is
// recorded as "check-credentials" and meets the faults set up
// for it like any call (FailNext("check-credentials", ...),
// SetUnavailable, AnyOp failures), then runs the wrapped store's check.
func (s *recorder) CheckCredentials(ctx context.Context) error {
	if err := s.begin(ctx, Call{Op: "check-credentials"}); err != nil {
		return err
	}
	return s.inner.CheckCredentials(ctx)
}

// toDriver copies a secret into the driver's form.
func (s *recorder) toDriver(sec *secretstore.Secret) *driver.Secret {
	return &driver.Secret{Data: sec.Data, Labels: sec.Labels, Version: s.version(sec.Version), UpdatedAt: sec.UpdatedAt}
}

// version is v, or nothing when versions are hidden.
func (s *recorder) version(v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.versionless {
		return ""
	}
	return v
}

func (s *recorder) Get(ctx context.Context, name string) (*driver.Secret, error) {
	if err := s.begin(ctx, Call{Op: "get", Name: name}); err != nil {
		return nil, err
	}
	sec, err := s.inner.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.toDriver(sec), nil
}

func (s *recorder) Stat(ctx context.Context, name string) (*driver.Secret, error) {
	if err := s.begin(ctx, Call{Op: "stat", Name: name}); err != nil {
		return nil, err
	}
	md, err := s.inner.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	return &driver.Secret{Labels: md.Labels, Version: s.version(md.Version), UpdatedAt: md.UpdatedAt}, nil
}

func (s *recorder) Put(ctx context.Context, w *driver.Write) error {
	if err := s.begin(ctx, Call{Op: "put", Name: w.Name}); err != nil {
		return err
	}
	_, err := s.inner.Put(ctx, &secretstore.Secret{Name: w.Name, Data: w.Data, Labels: w.Labels},
		secretstore.PutOptions{IfVersion: w.IfVersion, CreateOnly: w.CreateOnly})
	return err
}

func (s *recorder) Delete(ctx context.Context, name string) error {
	if err := s.begin(ctx, Call{Op: "delete", Name: name}); err != nil {
		return err
	}
	return s.inner.Delete(ctx, name)
}

func (s *recorder) List(ctx context.Context, prefix string) ([]string, error) {
	if err := s.begin(ctx, Call{Op: "list", Name: prefix}); err != nil {
		return nil, err
	}
	return s.inner.List(ctx, prefix)
}

// GetBatch implements driver.BatchGetter: one OpGetBatch call, passed on
// to the wrapped store's GetBatch.
func (s *recorder) GetBatch(ctx context.Context, names []string) (map[string]*driver.Secret, error) {
	if err := s.begin(ctx, Call{Op: OpGetBatch, Names: slices.Clone(names)}); err != nil {
		return nil, err
	}
	got, err := s.inner.GetBatch(ctx, names)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*driver.Secret, len(got))
	for n, sec := range got {
		out[n] = s.toDriver(sec)
	}
	return out, nil
}

// Close records the call and closes the wrapped store.
func (s *recorder) Close() error {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Op: OpClose})
	s.mu.Unlock()
	return s.inner.Close()
}
