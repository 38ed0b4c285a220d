package pgstate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/errkind"
	"github.com/jackc/pgx/v5"
)

// ErrSchemaNewer: the database's schema was made by a newer version of
// this package. An older agbot does not write to it (it could lose what
// the newer one keeps); upgrade it. It refines edgesecrets.ErrInvalid.
var ErrSchemaNewer = errkind.New("pgstate: the database schema is newer than this agbot knows", edgesecrets.ErrInvalid)

// migration is one step of the schema. Steps are applied in order, each
// once, and never changed once released: a change is a new step.
type migration struct {
	description string
	sql         string
}

// migrations are the schema's steps; the schema's version is the number
// of steps applied. In their text {s} is the schema's quoted name.
//
// The protocol rules live in the database as functions, so that every
// statement applies them with the database's clock (now(), the start of
// its transaction) and the model (issue 19) can point at one place:
//
//   - member_live(m, inc): member m is live in incarnation inc: its row
//     has that incarnation and its heartbeat has not lapsed.
//   - claim_valid(owner, until): a claim (lease) of a record is valid:
//     held, not expired, and its holder is not a member whose membership
//     lapsed or ended. A member that stops heartbeating so loses every
//     claim with its membership; a member id that never joined holds its
//     claims until they expire.
//   - may_write(owner, until, m): member m may store the record: nobody
//     but m holds a valid claim on it, and m does not write under a claim
//     of its own that lapsed.
//   - name_owner(n): the live member that polls store name n: the highest
//     rendezvous hash of (member, n) among the live members.
//   - fence(m, inc): raises SQLSTATE ED001 unless member m is live in
//     incarnation inc (inc 0: a member that never joined, not fenced).
var migrations = []migration{
	{
		description: "agreements, bindings, observations, waits, members, epochs and the lease rules",
		sql: `
-- fillfactor: room on each page for the new versions of its rows, so that
-- an update that changes no indexed column (a reply stored) is a HOT
-- update, without new index entries.
CREATE TABLE {s}.agreements (
	id                text COLLATE "C" PRIMARY KEY,
	node              text COLLATE "C" NOT NULL,
	revision          bigint NOT NULL,
	next_attempt      timestamptz,
	attempts          bigint NOT NULL DEFAULT 0,
	lease_owner       text COLLATE "C",
	lease_until       timestamptz,
	services          jsonb NOT NULL,
	body              jsonb NOT NULL,
	CHECK ((lease_owner IS NULL) = (lease_until IS NULL))
) WITH (fillfactor = 70);
CREATE INDEX agreements_node ON {s}.agreements (node);
CREATE INDEX agreements_due ON {s}.agreements (next_attempt, id) WHERE next_attempt IS NOT NULL;

CREATE TABLE {s}.bindings (
	store_name   text COLLATE "C" NOT NULL,
	agreement_id text COLLATE "C" NOT NULL REFERENCES {s}.agreements (id) ON DELETE CASCADE,
	PRIMARY KEY (store_name, agreement_id)
);
CREATE INDEX bindings_agreement ON {s}.bindings (agreement_id);

CREATE TABLE {s}.observations (
	name       text COLLATE "C" PRIMARY KEY,
	state      smallint NOT NULL,
	tag        text NOT NULL,
	since      timestamptz,
	checked_at timestamptz,
	written_by text NOT NULL,
	written_at timestamptz NOT NULL
);

CREATE TABLE {s}.waits (
	id          text COLLATE "C" PRIMARY KEY,
	store_names text[] NOT NULL,
	created_at  timestamptz
);

CREATE TABLE {s}.members (
	member       text COLLATE "C" PRIMARY KEY,
	incarnation  bigint NOT NULL,
	joined_at    timestamptz NOT NULL,
	heartbeat_at timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL
);

CREATE SEQUENCE {s}.member_incarnations;
CREATE SEQUENCE {s}.epochs;

CREATE FUNCTION {s}.member_live(m text, inc bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT EXISTS (SELECT 1 FROM {s}.members WHERE member = m AND incarnation = inc AND expires_at > now())
$$;

CREATE FUNCTION {s}.claim_valid(owner text, until timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT owner IS NOT NULL AND until > now()
		AND NOT EXISTS (SELECT 1 FROM {s}.members WHERE member = owner AND expires_at <= now())
$$;

CREATE FUNCTION {s}.may_write(owner text, until timestamptz, m text) RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT CASE
		WHEN owner IS NULL THEN true
		WHEN owner = m THEN {s}.claim_valid(owner, until)
		ELSE NOT {s}.claim_valid(owner, until)
	END
$$;

CREATE FUNCTION {s}.name_owner(n text) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT member FROM {s}.members WHERE expires_at > now()
	ORDER BY hashtextextended(n, hashtextextended(member, 0)) DESC, member
	LIMIT 1
$$;

CREATE FUNCTION {s}.fence(m text, inc bigint) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
	IF inc <> 0 AND NOT {s}.member_live(m, inc) THEN
		RAISE EXCEPTION 'member % (incarnation %) is not live', m, inc USING ERRCODE = 'ED001';
	END IF;
END
$$;
`,
	},
	{
		description: "identity records and request nonces",
		sql: `
-- The hub's identity records (identity.CertStore), one per instance. A
-- revoked record is a tombstone and stays. revision is the compare-and-set
-- counter.
CREATE TABLE {s}.identities (
	provider        text COLLATE "C" NOT NULL,
	instance_id     text COLLATE "C" NOT NULL,
	org             text COLLATE "C" NOT NULL,
	node            text COLLATE "C" NOT NULL,
	current_serial  text NOT NULL,
	previous_serial text NOT NULL,
	not_after       timestamptz,
	revoked         boolean NOT NULL,
	revoked_at      timestamptz,
	updated_at      timestamptz,
	revision        bigint NOT NULL,
	PRIMARY KEY (provider, instance_id)
);

-- The nonces of the request proofs accepted, each until its proof leaves
-- the window (expires_at); the primary key makes a nonce single-use.
CREATE TABLE {s}.nonces (
	provider    text COLLATE "C" NOT NULL,
	instance_id text COLLATE "C" NOT NULL,
	nonce       bytea NOT NULL,
	expires_at  timestamptz NOT NULL,
	PRIMARY KEY (provider, instance_id, nonce)
);
CREATE INDEX nonces_expiry ON {s}.nonces (expires_at);
`,
	},
	{
		description: "the names bound, for Names without reading every binding, and the review's shared cursor",
		sql: `
-- One row per store name some record binds, so that Names reads one row
-- per name, not one per binding. A trigger adds the name of every binding
-- inserted (also by an agbot of version 2 still running during an
-- upgrade), and the foreign key keeps a bound name from being pruned. Rows
-- of names no longer bound stay until a Join prunes them; Names skips
-- them.
CREATE TABLE {s}.bound_names (
	store_name text COLLATE "C" PRIMARY KEY
);
INSERT INTO {s}.bound_names (store_name) SELECT DISTINCT store_name FROM {s}.bindings;
CREATE FUNCTION {s}.bind_name() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {s}.bound_names (store_name) VALUES (NEW.store_name) ON CONFLICT DO NOTHING;
	RETURN NEW;
END
$$;
CREATE TRIGGER bindings_bind_name BEFORE INSERT ON {s}.bindings
	FOR EACH ROW EXECUTE FUNCTION {s}.bind_name();
ALTER TABLE {s}.bindings ADD CONSTRAINT bindings_bound_name
	FOREIGN KEY (store_name) REFERENCES {s}.bound_names (store_name);

-- The anti-entropy review's pass, shared by the members: the last id
-- claimed ('' at the start of a pass). ClaimReview moves it.
CREATE TABLE {s}.review_cursor (
	one   boolean PRIMARY KEY DEFAULT true CHECK (one),
	after text COLLATE "C" NOT NULL
);
INSERT INTO {s}.review_cursor (after) VALUES ('');
`,
	},
	{
		description: "the names' generation, so that Names is read again only after the bindings change",
		sql: `
-- A counter every statement that changes the bindings bumps (a trigger,
-- also for an agbot of an older version still running during an
-- upgrade), so that Names is read again only when the generation or the
-- live members changed. Transactional, so a reader never sees a change
-- to the bindings without its bump; kept in 64 rows, the one of the
-- writer's backend, so that concurrent writers do not wait for each
-- other's commits. The generation is their sum, which only grows.
CREATE TABLE {s}.names_generation (
	slot smallint PRIMARY KEY,
	n    bigint NOT NULL
);
INSERT INTO {s}.names_generation (slot, n) SELECT g, 0 FROM generate_series(0, 63) AS g;
CREATE FUNCTION {s}.bump_names_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE {s}.names_generation SET n = n + 1 WHERE slot = pg_backend_pid() % 64;
	RETURN NULL;
END
$$;
-- AFTER ... FOR EACH STATEMENT: the bump comes after the statement's
-- other locks (a binding's writer holds its agreement's row already), so
-- a writer holding a slot never waits for one that waits for the slot.
CREATE TRIGGER bindings_names_generation AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {s}.bindings
	FOR EACH STATEMENT EXECUTE FUNCTION {s}.bump_names_generation();
`,
	},
	{
		description: "the records' body in binary, read instead of the JSON body",
		sql: `
-- Each record's body also in the compact binary form of package
-- recordcodec (a format byte first), which agbots read instead of the JSON
-- body, decoded at a fraction of the cost. An agbot of an older version still
-- running during an upgrade writes the JSON body alone: the trigger then
-- drops the binary body it made stale, and the JSON body is read until the
-- record is next written (or the upgrading agbot's backfill writes it).
ALTER TABLE {s}.agreements ADD COLUMN body_bin bytea;
-- The records without one, for the backfill: empty once it is done.
CREATE INDEX agreements_without_body_bin ON {s}.agreements (id) WHERE body_bin IS NULL;
CREATE FUNCTION {s}.drop_stale_body_bin() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	NEW.body_bin := NULL;
	RETURN NEW;
END
$$;
CREATE TRIGGER agreements_drop_stale_body_bin BEFORE UPDATE OF body ON {s}.agreements
	FOR EACH ROW WHEN (NEW.body_bin IS NOT DISTINCT FROM OLD.body_bin)
	EXECUTE FUNCTION {s}.drop_stale_body_bin();
`,
	},
	{
		description: "the observations' generation, so that Observations reads again only after they change",
		sql: `
-- A counter every statement that changes the observations bumps, kept as
-- the names' generation is (a trigger, 64 slots, their sum only grows),
-- so that an agbot reads again only the observations it has not read
-- since the last change: an idle interval reads the counter, not a row
-- per name its review's slice binds.
CREATE TABLE {s}.observations_generation (
	slot smallint PRIMARY KEY,
	n    bigint NOT NULL
);
INSERT INTO {s}.observations_generation (slot, n) SELECT g, 0 FROM generate_series(0, 63) AS g;
CREATE FUNCTION {s}.bump_observations_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE {s}.observations_generation SET n = n + 1 WHERE slot = pg_backend_pid() % 64;
	RETURN NULL;
END
$$;
CREATE TRIGGER observations_generation AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {s}.observations
	FOR EACH STATEMENT EXECUTE FUNCTION {s}.bump_observations_generation();
`,
	},
	{
		description: "the fence reads the member's row itself",
		sql: `
-- member_live's rule written out: a SQL function with a subquery is not
-- inlined, and called from PL/pgSQL it is planned again in each
-- transaction, most of the fence's cost (every fenced write pays it); this
-- statement's plan stays with the session. TestFenceIsMemberLive holds the
-- two to one rule.
CREATE OR REPLACE FUNCTION {s}.fence(m text, inc bigint) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
	IF inc <> 0 AND NOT EXISTS (
		SELECT 1 FROM {s}.members WHERE member = m AND incarnation = inc AND expires_at > now()
	) THEN
		RAISE EXCEPTION 'member % (incarnation %) is not live', m, inc USING ERRCODE = 'ED001';
	END IF;
END
$$;
`,
	},
}

// leaseLostCode is the SQLSTATE fence raises.
const leaseLostCode = "ED001"

// migrationLock returns the advisory lock key that serializes the
// migrations of one schema across every agbot starting at once.
func migrationLock(schema string) int64 {
	sum := sha256.Sum256([]byte("edgesecrets/delivery/pgstate migrations\x00" + schema))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// migrate brings the schema up to date in one transaction, under a
// transaction-level advisory lock: a second agbot starting at once waits
// for the first one's commit and then finds nothing to do. A failed step
// leaves the schema as it was. It returns the version.
func migrate(ctx context.Context, conn *pgx.Conn, schema string) (int, error) {
	return migrateSteps(ctx, conn, schema, migrations)
}

// migrateSteps is migrate with the steps given: the tests stop at an
// earlier version with it.
func migrateSteps(ctx context.Context, conn *pgx.Conn, schema string, migrations []migration) (int, error) {
	quoted := pgx.Identifier{schema}.Sanitize()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock(schema)); err != nil {
		return 0, err
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		// Created only when missing: a schema an administrator made needs
		// no CREATE privilege on the database.
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
			return 0, err
		}
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+quoted+`.schema_version (
		version     integer PRIMARY KEY,
		description text NOT NULL,
		applied_at  timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return 0, err
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+quoted+".schema_version").Scan(&version); err != nil {
		return 0, err
	}
	if version > len(migrations) {
		return version, fmt.Errorf("%w: schema %s is at version %d, this agbot knows versions up to %d", ErrSchemaNewer, quoted, version, len(migrations))
	}
	for v := version + 1; v <= len(migrations); v++ {
		m := migrations[v-1]
		if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{s}", quoted)); err != nil {
			return version, fmt.Errorf("pgstate: schema %s: migration to version %d (%s): %w", quoted, v, m.description, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+quoted+".schema_version (version, description) VALUES ($1, $2)", v, m.description); err != nil {
			return version, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return version, err
	}
	return len(migrations), nil
}
