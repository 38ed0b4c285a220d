// Package memory is the in-memory secretstore backend: the reference
// semantics every other backend is measured against, and the embedded
// default for tests, examples and single-process deployments.
//
// It keeps versions (increasing decimal strings), labels, and atomic
// compare-and-set and create-only writes, and is safe for concurrent use.
// It has nothing to retry: every call either succeeds or is refused.
// Importing the package registers it with secretstore under the type
// "memory"; the config's section has no settings:
//
//	{"type": "memory", "defaultScope": "myorg"}
package memory

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// maxValueBytes bounds one secret's data (driver.ValueLimiter).
const maxValueBytes = 1 << 20

// backendType is the name the backend registers under.
const backendType = "memory"

func init() { secretstore.Register(backendType, backend{}) }

// New returns an empty in-memory store.
func New() *secretstore.Store {
	s, err := secretstore.New(newDriver(), secretstore.Options{MaxAttempts: 1, Backend: backendType})
	if err != nil {
		panic("memory: " + err.Error()) // the options are constant and valid
	}
	return s
}

// store is the driver. It keeps what Put gives it and returns what it
// keeps: secretstore.Store copies both ways. A stored *driver.Secret is
// never changed, only replaced, so a caller may read one after the lock
// is released.
type store struct {
	mu      sync.RWMutex
	secrets map[string]*driver.Secret
	version uint64 // last version handed out, store-wide

	writes atomic.Int64 // creates, updates and deletes performed
}

func newDriver() *store { return &store{secrets: map[string]*driver.Secret{}} }

func (s *store) Get(_ context.Context, name string) (*driver.Secret, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sec, ok := s.secrets[name]
	if !ok {
		return nil, &secretstore.Error{Kind: edgesecrets.ErrNotFound}
	}
	return sec, nil
}

func (s *store) Stat(ctx context.Context, name string) (*driver.Secret, error) {
	return s.Get(ctx, name)
}

func (s *store) Put(_ context.Context, w *driver.Write) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, exists := s.secrets[w.Name]
	switch {
	case w.CreateOnly && exists:
		return &secretstore.Error{Kind: edgesecrets.ErrConflict, Err: errors.New("secret exists and the write is create-only")}
	case w.IfVersion != "" && (!exists || cur.Version != w.IfVersion):
		return &secretstore.Error{Kind: edgesecrets.ErrConflict, Err: errors.New("current version does not match the expected version")}
	}
	s.version++
	s.secrets[w.Name] = &driver.Secret{Data: w.Data, Labels: w.Labels, Version: strconv.FormatUint(s.version, 10), UpdatedAt: time.Now()}
	s.writes.Add(1)
	return nil
}

func (s *store) Delete(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.secrets[name]; ok {
		delete(s.secrets, name)
		s.writes.Add(1)
	}
	return nil
}

func (s *store) List(_ context.Context, prefix string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var names []string
	for name := range s.secrets {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	return names, nil
}

// CheckCredentials implements driver.CredentialChecker: a memory store has
// no credentials to reject.
func (s *store) CheckCredentials(context.Context) error { return nil }

// MaxValueBytes is the memory backend's limit on one secret's data,
// 1 MiB: the size of a certificate chain or a kubeconfig with room to
// spare, and what Open Horizon's secret body carries (package ohsecret).
func (s *store) MaxValueBytes() int { return maxValueBytes }

func (s *store) Close() error { return nil }

// backend registers the memory store with secretstore.
type backend struct{}

// config is the memory section: it has no settings, but unknown fields are
// still reported.
type config struct{}

func (backend) Validate(cfg secretstore.Config) error {
	return cfg.DecodeSection(&config{})
}

func (backend) Open(_ context.Context, cfg secretstore.Config, opts secretstore.OpenOptions) (*secretstore.Store, error) {
	return secretstore.New(newDriver(), secretstore.Options{Scope: cfg.DefaultScope, MaxAttempts: 1, Backend: backendType, MeterProvider: opts.MeterProvider})
}
