package identity

import (
	"context"
	"sync"
	"time"
)

// Record is the hub's state for one instance, keyed by (Provider,
// InstanceID). A revoked record is a tombstone: it is kept so the instance
// can neither refresh nor register again.
type Record struct {
	// Instance is the full identity the instance registered with.
	Instance Identity
	// CurrentSerial is the serial (lowercase hex) of the newest
	// certificate issued.
	CurrentSerial string
	// PreviousSerial is the serial the current one replaced, or "". A
	// refresh presenting it is allowed once more (the agent may have lost
	// the last response).
	PreviousSerial string
	// NotAfter is the expiry of the current certificate.
	NotAfter time.Time
	// Revoked marks a tombstone; RevokedAt says when.
	Revoked   bool
	RevokedAt time.Time
	// UpdatedAt is when the record last changed.
	UpdatedAt time.Time
	// Revision is maintained by the CertStore for compare-and-set: 0 for a
	// record not yet stored.
	Revision uint64
}

// CertStore keeps instance records. Implementations must be safe for
// concurrent use; Put is compare-and-set so two refreshes of one instance
// cannot both win.
type CertStore interface {
	// Get returns the record for the instance, or an error matching
	// ErrNotFound.
	Get(ctx context.Context, provider, instanceID string) (Record, error)
	// Put stores rec if the stored record's Revision equals rec.Revision
	// (0: no record may exist yet), and returns it with its new Revision.
	// A lost race is an error matching ErrConflict.
	Put(ctx context.Context, rec Record) (Record, error)
}

// MemoryCertStore is the in-memory CertStore, the default. Its records are
// lost when the process exits, so every certificate it knows about then
// fails verification; use a persistent CertStore where that matters.
type MemoryCertStore struct {
	mu      sync.Mutex
	records map[instanceKey]Record
}

type instanceKey struct{ provider, instanceID string }

// NewMemoryCertStore returns an empty MemoryCertStore.
func NewMemoryCertStore() *MemoryCertStore {
	return &MemoryCertStore{records: make(map[instanceKey]Record)}
}

// Get implements CertStore.
func (s *MemoryCertStore) Get(ctx context.Context, provider, instanceID string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[instanceKey{provider, instanceID}]
	if !ok {
		return Record{}, newError(OpStore, Identity{Provider: provider, InstanceID: instanceID}, ErrNotFound, "no record", nil)
	}
	return rec, nil
}

// Put implements CertStore.
func (s *MemoryCertStore) Put(ctx context.Context, rec Record) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	key := instanceKey{rec.Instance.Provider, rec.Instance.InstanceID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records[key].Revision != rec.Revision {
		return Record{}, newError(OpStore, rec.Instance, ErrConflict, "record changed since it was read", nil)
	}
	rec.Revision++
	s.records[key] = rec
	return rec, nil
}
