package boltstate

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// identityFormat is the format byte of a stored identity record: JSON
// follows (the record holds serials and names, all text).
const identityFormat byte = 1

// certStore is the hub's identity.CertStore kept in the state file, so an
// agbot's identity records survive restarts with its agreements. Open
// returns it; it is closed with the state.
type certStore struct{ s *State }

var _ identity.CertStore = (*certStore)(nil)

// identityKey is the key of an instance: the provider's length, the
// provider, the instance id, so no two instances share a key whatever
// their names hold.
func identityKey(provider, instanceID string) []byte {
	k := binary.AppendUvarint(nil, uint64(len(provider)))
	k = append(k, provider...)
	return append(k, instanceID...)
}

// storedIdentity is the JSON form of an identity.Record.
type storedIdentity struct {
	Instance       identity.Identity `json:"instance"`
	CurrentSerial  string            `json:"currentSerial,omitempty"`
	PreviousSerial string            `json:"previousSerial,omitempty"`
	NotAfter       jsonTime          `json:"notAfter"`
	Revoked        bool              `json:"revoked,omitempty"`
	RevokedAt      jsonTime          `json:"revokedAt"`
	UpdatedAt      jsonTime          `json:"updatedAt"`
	Revision       uint64            `json:"revision"`
}

// jsonTime is a time in the binary form of this file (seconds and
// nanoseconds since the zero time), so the zero time and every instant
// round-trip exactly.
type jsonTime [2]int64

func timeJSON(t time.Time) jsonTime {
	if t.IsZero() {
		return jsonTime{}
	}
	return jsonTime{t.Unix() - zeroUnix, int64(t.Nanosecond())}
}

func (j jsonTime) time() time.Time {
	if j == (jsonTime{}) {
		return time.Time{}
	}
	return time.Unix(j[0]+zeroUnix, j[1]).UTC()
}

func encodeIdentity(r identity.Record) ([]byte, error) {
	b, err := json.Marshal(storedIdentity{
		Instance: r.Instance, CurrentSerial: r.CurrentSerial, PreviousSerial: r.PreviousSerial,
		NotAfter: timeJSON(r.NotAfter), Revoked: r.Revoked, RevokedAt: timeJSON(r.RevokedAt),
		UpdatedAt: timeJSON(r.UpdatedAt), Revision: r.Revision,
	})
	if err != nil {
		return nil, err
	}
	return append([]byte{identityFormat}, b...), nil
}

func decodeIdentity(v []byte) (identity.Record, error) {
	if len(v) == 0 || v[0] != identityFormat {
		return identity.Record{}, fmt.Errorf("%w: identity record format", errCorrupt)
	}
	var s storedIdentity
	if err := json.Unmarshal(v[1:], &s); err != nil {
		return identity.Record{}, fmt.Errorf("%w: identity record: %v", errCorrupt, err)
	}
	return identity.Record{
		Instance: s.Instance, CurrentSerial: s.CurrentSerial, PreviousSerial: s.PreviousSerial,
		NotAfter: s.NotAfter.time(), Revoked: s.Revoked, RevokedAt: s.RevokedAt.time(),
		UpdatedAt: s.UpdatedAt.time(), Revision: s.Revision,
	}, nil
}

// Get implements identity.CertStore.
func (c *certStore) Get(ctx context.Context, provider, instanceID string) (identity.Record, error) {
	id := identity.Identity{Provider: provider, InstanceID: instanceID}
	var rec identity.Record
	var found bool
	err := c.s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketIdentities).Get(identityKey(provider, instanceID))
		if v == nil {
			return nil
		}
		found = true
		var err error
		rec, err = decodeIdentity(v)
		return err
	})
	if err != nil {
		return identity.Record{}, storeError(id, err)
	}
	if !found {
		return identity.Record{}, &identity.Error{Op: "store", Instance: id, Kind: edgesecrets.ErrNotFound, Reason: "no record"}
	}
	return rec, nil
}

// Put implements identity.CertStore: compare-and-set on Revision, 0 to
// create.
func (c *certStore) Put(ctx context.Context, rec identity.Record) (identity.Record, error) {
	stored := rec
	stored.Revision++
	v, err := encodeIdentity(stored)
	if err != nil {
		return identity.Record{}, storeError(rec.Instance, err)
	}
	var conflict bool
	key := identityKey(rec.Instance.Provider, rec.Instance.InstanceID)
	err = c.s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIdentities)
		var current uint64
		if old := b.Get(key); old != nil {
			cur, err := decodeIdentity(old)
			if err != nil {
				return err
			}
			current = cur.Revision
		}
		conflict = current != rec.Revision
		if conflict {
			return nil
		}
		return b.Put(key, v)
	})
	if err != nil {
		return identity.Record{}, storeError(rec.Instance, err)
	}
	if conflict {
		return identity.Record{}, &identity.Error{Op: "store", Instance: rec.Instance, Kind: edgesecrets.ErrConflict, Reason: "record changed since it was read"}
	}
	return stored, nil
}

// storeError gives a failure of the file the identity package's form: a
// context error as it is, anything else ErrUnavailable.
func storeError(id identity.Identity, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	reason := "the state file failed"
	if errors.Is(err, state.ErrStateUnavailable) {
		reason = "the state file is unavailable"
	}
	return &identity.Error{Op: "store", Instance: id, Kind: edgesecrets.ErrUnavailable, Reason: reason, Err: err}
}

// nonceKey is the key of one request proof: the instance's identityKey,
// then the nonce, length-prefixed so no two (instance, nonce) pairs share
// a key.
func nonceKey(u identity.NonceUse) []byte {
	id := identityKey(u.Provider, u.InstanceID)
	k := binary.AppendUvarint(nil, uint64(len(id)))
	k = append(k, id...)
	return append(k, u.Nonce...)
}

// maxNonceSweep bounds how many expired nonces one UseNonce drops, so a
// use costs O(1) amortised.
const maxNonceSweep = 64

// UseNonce implements identity.CertStore: insert-if-absent in one
// transaction, so of two concurrent uses of a nonce exactly one succeeds.
// Expired nonces are dropped as later uses go.
func (c *certStore) UseNonce(ctx context.Context, u identity.NonceUse) error {
	id := identity.Identity{Provider: u.Provider, InstanceID: u.InstanceID}
	key := nonceKey(u)
	var replayed bool
	err := c.s.update(ctx, func(tx *bolt.Tx) error {
		nonces, byExpiry := tx.Bucket(bucketNonces), tx.Bucket(bucketNonceExpiry)
		// Collect first: deleting under a bbolt cursor skips keys.
		var expired [][]byte
		cur := byExpiry.Cursor()
		for k, _ := cur.First(); k != nil && len(expired) < maxNonceSweep && len(k) >= 8 && int64(beUint64(k[:8])) < u.Now.UnixNano(); k, _ = cur.Next() {
			expired = append(expired, slices.Clone(k))
		}
		for _, k := range expired {
			if err := nonces.Delete(k[8:]); err != nil {
				return err
			}
			if err := byExpiry.Delete(k); err != nil {
				return err
			}
		}
		if nonces.Get(key) != nil {
			replayed = true
			return nil
		}
		expiry := binary.BigEndian.AppendUint64(nil, uint64(u.Expires.UnixNano()))
		if err := nonces.Put(key, expiry); err != nil {
			return err
		}
		return byExpiry.Put(append(expiry, key...), nil)
	})
	if err != nil {
		return storeError(id, err)
	}
	if replayed {
		return &identity.Error{Op: "store", Instance: id, Kind: identity.ErrReplayed, Reason: "nonce already used"}
	}
	return nil
}
