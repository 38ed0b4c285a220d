// Package memory is the in-memory secretstore backend: the reference
// semantics every other backend is measured against, and the embedded
// default for tests, examples and single-process deployments.
//
// It keeps versions (increasing decimal strings), labels, compare-and-set and
// create-only writes, deep-copies every secret in and out, takes an
// injectable clock and is safe for concurrent use. Importing the package
// registers it with secretstore under the type "memory".
package memory

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Type is the name the backend registers under.
const Type = "memory"

func init() { secretstore.Register(Type, backend{}) }

// Store is an in-memory secretstore.Store and secretstore.CredentialChecker.
type Store struct {
	scope secretstore.Scope
	now   func() time.Time

	mu      sync.RWMutex
	secrets map[string]*secretstore.Secret // keyed by scoped path
	version uint64                         // last version handed out, store-wide
	closed  bool

	writes atomic.Int64
}

// Option configures a Store.
type Option func(*Store)

// WithClock replaces time.Now for UpdatedAt stamps.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithScope makes every name relative to scope (a valid secret name). It
// panics on an invalid scope; use secretstore.Open to get an error instead.
func WithScope(scope string) Option {
	sc, err := secretstore.NewScope(scope)
	if err != nil {
		panic("memory: " + err.Error())
	}
	return func(s *Store) { s.scope = sc }
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, secrets: map[string]*secretstore.Secret{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Writes returns how many writes (creates, updates, deletes) the store has
// performed. A Put that changes nothing does not count.
func (s *Store) Writes() int64 { return s.writes.Load() }

// Get implements secretstore.Store.
func (s *Store) Get(ctx context.Context, name string) (*secretstore.Secret, error) {
	if err := s.check(ctx, secretstore.OpGet, name); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sec, ok := s.secrets[s.scope.Path(name)]
	if !ok {
		return nil, secretstore.NewError(secretstore.OpGet, name, secretstore.ErrNotFound, nil)
	}
	out := sec.Clone()
	out.Name = name
	return out, nil
}

// Stat implements secretstore.Store.
func (s *Store) Stat(ctx context.Context, name string) (secretstore.Metadata, error) {
	if err := s.check(ctx, secretstore.OpStat, name); err != nil {
		return secretstore.Metadata{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sec, ok := s.secrets[s.scope.Path(name)]
	if !ok {
		return secretstore.Metadata{}, secretstore.NewError(secretstore.OpStat, name, secretstore.ErrNotFound, nil)
	}
	md := sec.Metadata()
	md.Name = name
	return md, nil
}

// Put implements secretstore.Store.
func (s *Store) Put(ctx context.Context, in *secretstore.Secret, opts secretstore.PutOptions) (bool, error) {
	if err := secretstore.CheckSecret(in); err != nil {
		return false, err
	}
	if err := s.check(ctx, secretstore.OpPut, in.Name); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.scope.Path(in.Name)
	cur, exists := s.secrets[path]
	switch {
	case opts.CreateOnly && exists:
		return false, secretstore.NewError(secretstore.OpPut, in.Name, secretstore.ErrConflict, errors.New("secret exists and the write is create-only"))
	case opts.IfVersion != "" && (!exists || cur.Version != opts.IfVersion):
		return false, secretstore.NewError(secretstore.OpPut, in.Name, secretstore.ErrConflict, errors.New("current version does not match the expected version"))
	case exists && cur.Data.Equal(in.Data) && secretstore.LabelsEqual(cur.Labels, in.Labels):
		return false, nil
	}
	s.version++
	next := in.Clone()
	if next.Data == nil {
		next.Data = secretstore.Data{}
	}
	next.Name = path
	next.Version = strconv.FormatUint(s.version, 10)
	next.UpdatedAt = s.now()
	s.secrets[path] = next
	s.writes.Add(1)
	return true, nil
}

// Delete implements secretstore.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.check(ctx, secretstore.OpDelete, name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.scope.Path(name)
	if _, ok := s.secrets[path]; ok {
		delete(s.secrets, path)
		s.writes.Add(1)
	}
	return nil
}

// List implements secretstore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := secretstore.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	if err := s.live(ctx, secretstore.OpList, prefix); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := []string{}
	for path := range s.secrets {
		if name, ok := s.scope.Rel(path); ok && strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// CheckCredentials implements secretstore.CredentialChecker: a memory store
// has no credentials to reject, so it returns nil (ErrUnavailable once
// closed, like every other call, or the context's error).
func (s *Store) CheckCredentials(ctx context.Context) error {
	return s.live(ctx, secretstore.OpCheckCredentials, "")
}

// Close implements secretstore.Store. Later calls fail with ErrUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *Store) check(ctx context.Context, op, name string) error {
	if err := secretstore.CheckName(op, name); err != nil {
		return err
	}
	return s.live(ctx, op, name)
}

func (s *Store) live(ctx context.Context, op, name string) error {
	if err := ctx.Err(); err != nil {
		return secretstore.NewError(op, name, nil, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return secretstore.NewError(op, name, secretstore.ErrUnavailable, errors.New("store is closed"))
	}
	return nil
}

// backend registers the memory store with secretstore.
type backend struct{}

// config is the memory section: it has no settings, but unknown fields are
// still reported.
type config struct{}

func (backend) Validate(cfg secretstore.Config) error {
	return cfg.DecodeSection(&config{})
}

func (backend) Open(_ context.Context, cfg secretstore.Config, _ secretstore.OpenOptions) (secretstore.Store, error) {
	sc, err := secretstore.NewScope(cfg.DefaultScope)
	if err != nil {
		return nil, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, err)
	}
	s := New()
	s.scope = sc
	return s, nil
}
