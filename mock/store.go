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
	opGetBatch = "getbatch"
	opClose    = "close"
)

// ErrInjected is the cause of every failure a Store injects with
// Faults.Fail, so a test can tell an injected fault from a real one with
// errors.Is.
var ErrInjected = errors.New("mock: injected fault")

// Call is one recorded call.
type Call struct {
	// Op is the operation: "get", "stat", "put", "delete", "list" or
	// "check-credentials" (the operation names of secretstore.Error.Op), "getbatch" for a
	// GetBatch, passed on to the wrapped store's GetBatch, or "close".
	Op string
	// Name is the secret name, or the prefix for a List; empty for
	// "getbatch", "check-credentials" and "close".
	Name string
	// Names are the names of a "getbatch".
	Names []string
}

// Faults are the faults a Store injects into the calls that reach it, every
// call but Close. The zero value injects none.
//
// For each call, in this order: the call is recorded; Latency elapses (or
// the call's context ends, which fails the call with the context's error);
// Hook runs; Fail fails the call; otherwise the wrapped store serves it.
type Faults struct {
	// Op limits Latency and Fail to the calls of one operation (a value of
	// Call.Op); "" means the calls of every operation.
	Op string
	// Latency delays each of those calls before it goes further; zero means
	// none.
	Latency time.Duration
	// Fail fails those calls with an error of this kind, usually one of
	// secretstore's Err kinds (edgesecrets.ErrUnavailable for a store that
	// is down), caused by ErrInjected. Nil fails none.
	Fail error
	// Times limits Fail to the next Times of those calls; zero means every
	// one, until the faults are set again.
	Times int
	// Hook, when set, is called for every call. A non-nil error from it
	// fails the call with that error, unchanged. It may block (to hold a
	// call in flight) and should then return when ctx ends. It is called
	// concurrently when calls are.
	Hook func(ctx context.Context, c Call) error
	// Versionless makes reads (Get, Stat, GetBatch) report no Version, as
	// a store without versions does (Vault KV v1), so code's fallback to
	// checksums of the data can be tested.
	Versionless bool
}

// Store is a *secretstore.Store over a driver that passes every call to
// the store it wraps, after recording the call and applying the faults set
// up for it. Pass its Store field where a *secretstore.Store is wanted.
// The zero value is not usable; call NewStore. It is safe for concurrent
// use, and faults may be changed while calls are running.
//
// It records what the backend would see: a call refused before reaching a
// backend (an invalid name, a closed store) is not recorded, and a Put is
// recorded as the Get it makes to compare, then, when something changed,
// the Put. The portable store does not retry here: each failure Faults
// injects fails the call it is used up by.
type Store struct {
	*secretstore.Store
	// Inner is the wrapped store, to set up or inspect data without
	// recording calls or meeting faults. Changing the field changes
	// nothing.
	Inner *secretstore.Store

	d *recorder
}

// recorder is the driver: the faults and the recorded calls.
type recorder struct {
	inner *secretstore.Store

	mu     sync.Mutex
	calls  []Call
	faults Faults
	left   int // failures Faults.Times has left; unused when Times is 0
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
	d := &recorder{inner: inner}
	s, err := secretstore.New(d, secretstore.Options{MaxAttempts: 1})
	if err != nil {
		panic("mock: " + err.Error()) // constant, valid options
	}
	return &Store{Store: s, Inner: inner, d: d}
}

// SetFaults replaces the faults the store injects; SetFaults(Faults{})
// removes them. The recorded calls and the wrapped store's data are
// untouched.
func (s *Store) SetFaults(f Faults) {
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = f
	d.left = f.Times
}

// Calls returns the recorded calls of operation op for the secret name,
// oldest first: op "" matches every operation and name "" every name; a
// "getbatch" matches each of its Names. len(s.Calls(op, name)) counts them.
func (s *Store) Calls(op, name string) []Call {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	var out []Call
	for _, c := range s.d.calls {
		if (op == "" || c.Op == op) && (name == "" || c.Name == name || slices.Contains(c.Names, name)) {
			out = append(out, c)
		}
	}
	return out
}

// begin records c and applies the faults set up for it. A non-nil error
// means the call must fail with it without reaching the wrapped store.
func (s *recorder) begin(ctx context.Context, c Call) error {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	f := s.faults
	s.mu.Unlock()

	if f.Latency > 0 && (f.Op == "" || f.Op == c.Op) {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return &secretstore.Error{Op: c.Op, Name: c.Name, Err: ctx.Err()}
		}
	}
	if f.Hook != nil {
		if err := f.Hook(ctx, c); err != nil {
			return err
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	f = s.faults // as they are now: the hook may have changed them
	if f.Fail == nil || (f.Op != "" && f.Op != c.Op) {
		return nil
	}
	if f.Times > 0 {
		if s.left == 0 {
			return nil
		}
		s.left--
	}
	return &secretstore.Error{Op: c.Op, Name: c.Name, Kind: f.Fail, Err: ErrInjected}
}

// CheckCredentials implements driver.CredentialChecker: the check is
// recorded as "check-credentials" and meets the faults set up
// for it like any call, then runs the wrapped store's check.
func (s *recorder) CheckCredentials(ctx context.Context) error {
	if err := s.begin(ctx, Call{Op: "check-credentials"}); err != nil {
		return err
	}
	return s.inner.CheckCredentials(ctx)
}

// MaxValueBytes implements driver.ValueLimiter: the wrapped store's
// limit per secret.
func (s *recorder) MaxValueBytes() int { return s.inner.MaxValueBytes() }

// toDriver copies a secret into the driver's form.
func (s *recorder) toDriver(sec *secretstore.Secret) *driver.Secret {
	return &driver.Secret{Data: sec.Data, Labels: sec.Labels, Version: s.version(sec.Version), UpdatedAt: sec.UpdatedAt}
}

// version is v, or nothing when versions are hidden.
func (s *recorder) version(v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.Versionless {
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

// GetBatch implements driver.BatchGetter: one "getbatch" call, passed on
// to the wrapped store's GetBatch.
func (s *recorder) GetBatch(ctx context.Context, names []string) (map[string]*driver.Secret, error) {
	if err := s.begin(ctx, Call{Op: opGetBatch, Names: slices.Clone(names)}); err != nil {
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
	s.calls = append(s.calls, Call{Op: opClose})
	s.mu.Unlock()
	return s.inner.Close()
}
