package identity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
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

// CertStore keeps what the Issuer must remember: one Record per instance,
// and the nonces of the request proofs it accepted, so no register or
// refresh request can be used twice. Implementations must be safe for
// concurrent use and, for a hub that restarts, durable (a bbolt file, a
// PostgreSQL table): a store that forgets records makes every certificate
// fail verification, one that forgets nonces within ProofWindow lets a
// captured request be replayed. Errors other than the kinds named below are
// reported as edgesecrets.ErrUnavailable.
type CertStore interface {
	// Get returns the record for the instance, or an error matching
	// edgesecrets.ErrNotFound.
	Get(ctx context.Context, provider, instanceID string) (Record, error)
	// Put stores rec if the stored record's Revision equals rec.Revision
	// (0: no record may exist yet), and returns it with its new Revision.
	// A lost race is an error matching edgesecrets.ErrConflict. Put is
	// compare-and-set so two refreshes of one instance cannot both win.
	Put(ctx context.Context, rec Record) (Record, error)
	// UseNonce records that the Issuer accepted a proof carrying
	// u.Nonce for the instance (u.Provider, u.InstanceID). If that nonce is
	// already recorded for the instance, it records nothing and returns an
	// error matching ErrReplayed: the check and the insert are one atomic
	// step (a unique key, INSERT ... ON CONFLICT DO NOTHING), so of two
	// concurrent uses exactly one succeeds. Nonces are random (16 to 64
	// bytes); a store keeps each until u.Expires and may forget it after:
	// the Issuer refuses proofs older than its window anyway. u.Now is the
	// Issuer's current time, for stores that expire entries as they go.
	UseNonce(ctx context.Context, u NonceUse) error
}

// NonceUse is one accepted request proof, for CertStore.UseNonce.
type NonceUse struct {
	// Provider and InstanceID name the instance the proof was for.
	Provider, InstanceID string
	// Nonce is the proof's random single-use value.
	Nonce []byte
	// Expires is when the proof leaves the Issuer's window; the store must
	// remember the nonce until then.
	Expires time.Time
	// Now is the Issuer's current time.
	Now time.Time
}

// maxMemoryNonces bounds the nonces a memoryCertStore remembers at once:
// above it, UseNonce refuses with edgesecrets.ErrUnavailable until some expire.
const maxMemoryNonces = 1 << 16

// memoryCertStore is the in-memory CertStore (NewMemoryCertStore).
type memoryCertStore struct {
	mu      sync.Mutex
	records map[instanceKey]Record
	nonces  map[nonceKey]time.Time // → expiry
	// sweepAt is the nonce count at which expired nonces are dropped next.
	sweepAt int
}

type instanceKey struct{ provider, instanceID string }

type nonceKey struct {
	instanceKey
	nonce string
}

// NewMemoryCertStore returns an empty in-memory CertStore, the Issuer's
// default. Its records are lost when the process exits, so every
// certificate it knows about then fails verification; use a persistent
// CertStore where that matters. It remembers at most 65536 request proofs
// at once: above that, UseNonce refuses with edgesecrets.ErrUnavailable
// until some leave their window.
func NewMemoryCertStore() CertStore {
	return &memoryCertStore{records: make(map[instanceKey]Record), nonces: make(map[nonceKey]time.Time), sweepAt: 64}
}

// Get implements CertStore.
func (s *memoryCertStore) Get(ctx context.Context, provider, instanceID string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[instanceKey{provider, instanceID}]
	if !ok {
		return Record{}, newError(opStore, Identity{Provider: provider, InstanceID: instanceID}, edgesecrets.ErrNotFound, "no record", nil)
	}
	return rec, nil
}

// Put implements CertStore.
func (s *memoryCertStore) Put(ctx context.Context, rec Record) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	key := instanceKey{rec.Instance.Provider, rec.Instance.InstanceID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records[key].Revision != rec.Revision {
		return Record{}, newError(opStore, rec.Instance, edgesecrets.ErrConflict, "record changed since it was read", nil)
	}
	rec.Revision++
	s.records[key] = rec
	return rec, nil
}

// UseNonce implements CertStore.
func (s *memoryCertStore) UseNonce(ctx context.Context, u NonceUse) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := Identity{Provider: u.Provider, InstanceID: u.InstanceID}
	key := nonceKey{instanceKey{u.Provider, u.InstanceID}, string(u.Nonce)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if expires, used := s.nonces[key]; used && !expires.Before(u.Now) {
		return newError(opStore, id, ErrReplayed, "nonce already used", nil)
	}
	if len(s.nonces) >= s.sweepAt {
		for k, expires := range s.nonces {
			if expires.Before(u.Now) {
				delete(s.nonces, k)
			}
		}
		// Sweep again once the table has doubled: amortised O(1) per use.
		s.sweepAt = max(64, 2*len(s.nonces))
	}
	if len(s.nonces) >= maxMemoryNonces {
		return newError(opStore, id, edgesecrets.ErrUnavailable, fmt.Sprintf("%d request proofs are within their window; retry later", len(s.nonces)), nil)
	}
	s.nonces[key] = u.Expires
	return nil
}
