package pgstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// certStore is the hub's identity.CertStore in the State's database, so
// that every agbot sharing the database verifies every agent, an agent
// registers once whichever agbot it reaches, and a request proof accepted
// by one agbot is refused by all. Open returns it; it is closed with the
// State. Its calls run through the State's call: the same timeout,
// retries and errors (state.ErrStateUnavailable becomes
// edgesecrets.ErrUnavailable).
//
// It has no member fence: any agbot sharing the database, joined or not,
// may register and refresh agents. Its writes are fenced by their own
// rules instead: a record changes only by a compare-and-set of its
// revision, and a nonce is recorded by an insert that a unique key makes
// atomic, so two agbots never both win.
type certStore struct {
	s *State
	q certQueries
}

var _ identity.CertStore = (*certStore)(nil)

// nonceSkew is how long after its expiry a nonce is still remembered: the
// clocks of the agbots sharing the database may differ, and an agbot whose
// clock is ahead must not forget a nonce that another one still accepts
// proofs for.
const nonceSkew = time.Minute

// maxNoncePrune bounds how many expired nonces one UseNonce deletes, so a
// use costs O(1) amortised.
const maxNoncePrune = 64

// certQueries are the certStore's statements for its schema.
type certQueries struct {
	get, create, update, useNonce, pruneNonces string
}

const identityColumns = `org, node, current_serial, previous_serial, not_after, revoked, revoked_at, updated_at, revision`

func newCertQueries(schema string) certQueries {
	q := certQueries{
		get: `SELECT ` + identityColumns + ` FROM {s}.identities WHERE provider = $1 AND instance_id = $2`,

		create: `
INSERT INTO {s}.identities (provider, instance_id, ` + identityColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1)
ON CONFLICT (provider, instance_id) DO NOTHING
RETURNING revision`,

		update: `
UPDATE {s}.identities
SET org = $3, node = $4, current_serial = $5, previous_serial = $6, not_after = $7,
	revoked = $8, revoked_at = $9, updated_at = $10, revision = revision + 1
WHERE provider = $1 AND instance_id = $2 AND revision = $11
RETURNING revision`,

		// A nonce already recorded is used, unless it expired before $5
		// (it is then as good as forgotten): the unique key makes the
		// check and the insert one step, so of two concurrent uses one
		// inserts and the other finds its row.
		useNonce: `
INSERT INTO {s}.nonces AS n (provider, instance_id, nonce, expires_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (provider, instance_id, nonce) DO UPDATE SET expires_at = excluded.expires_at
WHERE n.expires_at < $5
RETURNING true`,

		// SKIP LOCKED: agbots pruning at once delete disjoint rows without
		// waiting for each other.
		pruneNonces: `
DELETE FROM {s}.nonces
WHERE (provider, instance_id, nonce) IN (
	SELECT provider, instance_id, nonce FROM {s}.nonces WHERE expires_at < $1
	ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}
	for _, p := range []*string{&q.get, &q.create, &q.update, &q.useNonce, &q.pruneNonces} {
		*p = strings.ReplaceAll(*p, "{s}", schema)
	}
	return q
}

// instanceName names an instance in the State's errors.
func instanceName(provider, instanceID string) string { return quote(provider + "/" + instanceID) }

// checkInstance refuses an instance whose names PostgreSQL text cannot
// hold exactly.
func checkInstance(id identity.Identity) error {
	c := &checker{what: "identity record " + instanceName(id.Provider, id.InstanceID)}
	c.check("provider", id.Provider)
	c.check("instance id", id.InstanceID)
	c.check("org", id.Org)
	c.check("node", id.Node)
	return c.err
}

// Get implements identity.CertStore.
func (c *certStore) Get(ctx context.Context, provider, instanceID string) (identity.Record, error) {
	id := identity.Identity{Provider: provider, InstanceID: instanceID}
	if err := checkInstance(id); err != nil {
		return identity.Record{}, certError(id, err)
	}
	var (
		rec   identity.Record
		found bool
	)
	err := c.s.call(ctx, op{what: "reading the identity record of " + instanceName(provider, instanceID), rerun: true}, func(ctx context.Context) error {
		var (
			notAfter, revokedAt, updatedAt *time.Time
			revision                       int64
		)
		rec = identity.Record{Instance: id}
		err := c.s.pool.QueryRow(ctx, c.q.get, provider, instanceID).Scan(&rec.Instance.Org, &rec.Instance.Node,
			&rec.CurrentSerial, &rec.PreviousSerial, &notAfter, &rec.Revoked, &revokedAt, &updatedAt, &revision)
		if found = !errors.Is(err, pgx.ErrNoRows); !found {
			return nil
		}
		rec.NotAfter, rec.RevokedAt, rec.UpdatedAt, rec.Revision = fromDB(notAfter), fromDB(revokedAt), fromDB(updatedAt), uint64(revision)
		return err
	})
	if err != nil {
		return identity.Record{}, certError(id, err)
	}
	if !found {
		return identity.Record{}, &identity.Error{Op: "store", Instance: id, Kind: edgesecrets.ErrNotFound, Reason: "no record"}
	}
	return rec, nil
}

// Put implements identity.CertStore: compare-and-set on Revision, 0 to
// create. It returns the record as stored: its times to the microsecond,
// in UTC.
func (c *certStore) Put(ctx context.Context, rec identity.Record) (identity.Record, error) {
	id := rec.Instance
	if err := checkInstance(id); err != nil {
		return identity.Record{}, certError(id, err)
	}
	ch := &checker{what: "identity record " + instanceName(id.Provider, id.InstanceID)}
	ch.check("current serial", rec.CurrentSerial)
	ch.check("previous serial", rec.PreviousSerial)
	if ch.err != nil {
		return identity.Record{}, certError(id, ch.err)
	}
	args := []any{id.Provider, id.InstanceID, id.Org, id.Node, rec.CurrentSerial, rec.PreviousSerial,
		micro(rec.NotAfter), rec.Revoked, micro(rec.RevokedAt), micro(rec.UpdatedAt)}
	query := c.q.create
	if rec.Revision != 0 {
		query = c.q.update
		args = append(args, int64(rec.Revision))
	}
	var stored bool
	// Not run again when a connection breaks under it: a compare-and-set
	// that took effect would then report a conflict.
	err := c.s.call(ctx, op{what: "storing the identity record of " + instanceName(id.Provider, id.InstanceID)}, func(ctx context.Context) error {
		var revision int64
		err := c.s.pool.QueryRow(ctx, query, args...).Scan(&revision)
		if stored = !errors.Is(err, pgx.ErrNoRows); !stored {
			return nil
		}
		return err
	})
	if err != nil {
		return identity.Record{}, certError(id, err)
	}
	if !stored {
		return identity.Record{}, &identity.Error{Op: "store", Instance: id, Kind: edgesecrets.ErrConflict, Reason: "record changed since it was read"}
	}
	rec.Revision++
	rec.NotAfter, rec.RevokedAt, rec.UpdatedAt = fromDB(micro(rec.NotAfter)), fromDB(micro(rec.RevokedAt)), fromDB(micro(rec.UpdatedAt))
	return rec, nil
}

// UseNonce implements identity.CertStore: insert-if-absent in one
// statement, so of two concurrent uses of a nonce, through one agbot or
// two, exactly one succeeds. In the same transaction it deletes up to 64
// nonces that expired more than a minute before u.Now (an allowance for
// the clocks of the agbots sharing the database), so the table holds
// about the nonces of one proof window.
func (c *certStore) UseNonce(ctx context.Context, u identity.NonceUse) error {
	id := identity.Identity{Provider: u.Provider, InstanceID: u.InstanceID}
	if err := checkInstance(id); err != nil {
		return certError(id, err)
	}
	if len(u.Nonce) == 0 || u.Expires.IsZero() || u.Now.IsZero() {
		return &identity.Error{Op: "store", Instance: id, Kind: edgesecrets.ErrInvalid,
			Reason: fmt.Sprintf("a nonce use needs a nonce (%d bytes given), an expiry and the current time", len(u.Nonce))}
	}
	forgetBefore := micro(u.Now.Add(-nonceSkew))
	var used bool
	err := c.s.call(ctx, op{what: "recording a request nonce of " + instanceName(u.Provider, u.InstanceID)}, func(ctx context.Context) error {
		b := &pgx.Batch{}
		b.Queue(c.q.useNonce, u.Provider, u.InstanceID, u.Nonce, micro(u.Expires), forgetBefore).QueryRow(func(row pgx.Row) error {
			var ok bool
			err := row.Scan(&ok)
			if used = errors.Is(err, pgx.ErrNoRows); used {
				return nil
			}
			return err
		})
		// After the insert, so that its wait on a row (a concurrent use of
		// the same nonce) never comes after locks this transaction took.
		b.Queue(c.q.pruneNonces, forgetBefore, maxNoncePrune)
		return c.s.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return certError(id, err)
	}
	if used {
		return &identity.Error{Op: "store", Instance: id, Kind: identity.ErrReplayed, Reason: "nonce already used"}
	}
	return nil
}

// certError gives a failure of the State the identity package's form: a
// context error as it is, a name PostgreSQL cannot hold
// edgesecrets.ErrInvalid, anything else edgesecrets.ErrUnavailable.
func certError(id identity.Identity, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, errBadInput):
		return &identity.Error{Op: "store", Instance: id, Kind: edgesecrets.ErrInvalid, Reason: "the record names text PostgreSQL cannot hold", Err: err}
	case errors.Is(err, state.ErrStateUnavailable):
		return &identity.Error{Op: "store", Instance: id, Kind: edgesecrets.ErrUnavailable, Reason: "the PostgreSQL state is unavailable", Err: err}
	}
	return &identity.Error{Op: "store", Instance: id, Kind: edgesecrets.ErrUnavailable, Reason: "the PostgreSQL state failed", Err: err}
}
