package pgstate

import "strings"

// queries are the State's statements for its schema. Each is one
// statement, so that the database runs it as one transaction; rows are
// locked in id order, so that concurrent statements over overlapping
// records wait for each other instead of deadlocking.
type queries struct {
	fence string

	create, get, page, bound, update, rebind, delete, markDue, due string

	names, pruneNames, reviewNext                  string
	observations, allObservations, putObservations string
	putWait, waits, deleteWait, newEpoch           string

	join, previous, heartbeat, leave, prune string

	withoutBin, putBin string
}

// recordColumns read a record: its JSON body only when it has no binary
// one (written by an agbot of an older version). recordColumnCount is how
// many they are.
const (
	recordColumns = `a.id, a.node, a.revision, a.next_attempt, a.attempts, a.services, a.body_bin,
	CASE WHEN a.body_bin IS NULL THEN a.body END`
	recordColumnCount = 8
)

func newQueries(schema string) queries {
	q := queries{
		fence: `SELECT {s}.fence($1, $2)`,

		create: `
WITH ins AS (
	INSERT INTO {s}.agreements (id, node, revision, next_attempt, attempts, services, body, body_bin)
	VALUES ($1, $2, 1, $3, $4, $5, $6, $8)
	ON CONFLICT (id) DO NOTHING
	RETURNING id
), bound AS (
	INSERT INTO {s}.bindings (store_name, agreement_id)
	SELECT n, ins.id FROM ins, unnest($7::text[]) AS n
)
SELECT count(*) FROM ins`,

		get: `SELECT ` + recordColumns + ` FROM {s}.agreements a WHERE a.id = $1`,

		page: `SELECT ` + recordColumns + ` FROM {s}.agreements a WHERE a.id > $1 ORDER BY a.id LIMIT $2`,

		// bound finds the records through the bindings table's primary key
		// (store_name, agreement_id).
		bound: `SELECT ` + recordColumns + ` FROM {s}.agreements a
WHERE a.id IN (SELECT b.agreement_id FROM {s}.bindings b WHERE b.store_name = ANY($1))
ORDER BY a.id`,

		// A record is stored when its revision is the stored one and
		// may_write allows the member; storing it releases its claim.
		update: `
WITH v AS (
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::timestamptz[], $5::bigint[], $6::text[], $8::bytea[])
		AS v(id, revision, node, next_attempt, attempts, body, body_bin)
), ok AS (
	SELECT a.id FROM {s}.agreements a JOIN v ON a.id = v.id
	WHERE a.revision = v.revision
		AND {s}.may_write(a.lease_owner, a.lease_until, $7)
	ORDER BY a.id
	FOR UPDATE OF a
)
UPDATE {s}.agreements a
SET node = v.node, revision = a.revision + 1, next_attempt = v.next_attempt, attempts = v.attempts,
	body = v.body::jsonb, body_bin = v.body_bin, lease_owner = NULL, lease_until = NULL
FROM v, ok
WHERE a.id = v.id AND a.id = ok.id
RETURNING a.id`,

		// rebind is update for one record that also replaces its services
		// and its rows in bindings: names no longer bound go, new ones
		// come (the two sets are disjoint, so the statement's CTEs do not
		// touch the same row).
		rebind: `
WITH ok AS (
	SELECT a.id FROM {s}.agreements a
	WHERE a.id = $1 AND a.revision = $2
		AND {s}.may_write(a.lease_owner, a.lease_until, $9)
	FOR UPDATE OF a
), upd AS (
	UPDATE {s}.agreements a
	SET node = $3, revision = a.revision + 1, next_attempt = $4, attempts = $5,
		services = $6::jsonb, body = $7::jsonb, body_bin = $10, lease_owner = NULL, lease_until = NULL
	FROM ok
	WHERE a.id = ok.id
	RETURNING a.id
), unbound AS (
	DELETE FROM {s}.bindings b USING upd
	WHERE b.agreement_id = upd.id AND b.store_name <> ALL($8::text[])
), bound AS (
	INSERT INTO {s}.bindings (store_name, agreement_id)
	SELECT n, upd.id FROM upd, unnest($8::text[]) AS n
	ON CONFLICT DO NOTHING
)
SELECT id FROM upd`,

		delete: `
DELETE FROM {s}.agreements
WHERE id IN (SELECT id FROM {s}.agreements WHERE id = ANY($1) ORDER BY id FOR UPDATE)`,

		markDue: `
WITH selected AS (
	SELECT id FROM {s}.agreements WHERE id = ANY($1)
	UNION SELECT id FROM {s}.agreements WHERE node = ANY($2)
	UNION SELECT agreement_id FROM {s}.bindings WHERE store_name = ANY($3)
), changing AS (
	SELECT a.id FROM {s}.agreements a JOIN selected USING (id)
	WHERE a.next_attempt IS NULL OR a.next_attempt > $4 OR ($5 AND a.attempts <> 0)
	ORDER BY a.id
	FOR UPDATE OF a
)
UPDATE {s}.agreements a
SET next_attempt = CASE WHEN a.next_attempt IS NULL OR a.next_attempt > $4 THEN $4 ELSE a.next_attempt END,
	attempts = CASE WHEN $5 THEN 0 ELSE a.attempts END,
	revision = a.revision + 1
FROM changing
WHERE a.id = changing.id`,

		// Due claims the records due by the caller's clock ($2), and those
		// whose claim is void (its holder's lease or membership ran out,
		// judged by the database's clock), that nobody else holds a valid
		// claim on. SKIP LOCKED: members claiming at once take disjoint
		// records without waiting for each other. Its fence is in the
		// statement (member_live's rule, as the fence function writes it
		// out; incarnation $6, 0 for a member that did not join through
		// the State): a member not live claims nothing, and the first
		// column of every row says whether it is, on a row with no record
		// when nothing was claimed.
		due: `
WITH me AS (
	SELECT $6::bigint = 0 OR EXISTS (
		SELECT 1 FROM {s}.members WHERE member = $5 AND incarnation = $6 AND expires_at > now()
	) AS live
), claimable AS (
	SELECT a.id, a.next_attempt AS was FROM {s}.agreements a
	WHERE (SELECT live FROM me)
		AND a.next_attempt IS NOT NULL
		AND (a.next_attempt <= $2
			OR (a.lease_owner IS NOT NULL AND NOT {s}.claim_valid(a.lease_owner, a.lease_until)))
		AND (a.lease_owner IS NULL OR a.lease_owner = $5 OR NOT {s}.claim_valid(a.lease_owner, a.lease_until))
	ORDER BY a.next_attempt, a.id
	LIMIT $1
	FOR UPDATE OF a SKIP LOCKED
), claimed AS (
	UPDATE {s}.agreements a
	SET lease_owner = $5, lease_until = now() + $4 * interval '1 microsecond',
		next_attempt = $3, revision = a.revision + 1
	FROM claimable c
	WHERE a.id = c.id
	RETURNING c.was, ` + recordColumns + ` AS body
)
SELECT me.live, c.was, c.id, c.node, c.revision, c.next_attempt, c.attempts, c.services, c.body_bin, c.body
FROM me LEFT JOIN claimed c ON true`,

		// names returns the names' generation and the live members, and,
		// unless both are the caller's ($2, $3: what its last read
		// returned), the names member $1 polls: the array is read only
		// then (a CASE evaluates the branch it takes), in the same
		// snapshot as the generation. It reads a row per name, and a
		// binding of each through the bindings' primary key, not every
		// binding. Its owner test is name_owner's rule over the live
		// members read once: name_owner called per name costs a function
		// call and a read of members each (40 ms for 1,000 names). Its
		// last column is its fence: whether member $1 is live in
		// incarnation $4 (member_live's rule over the live members read).
		names: `
WITH live AS MATERIALIZED (
	SELECT member, incarnation, hashtextextended(member, 0) AS h FROM {s}.members WHERE expires_at > now()
), fp AS (
	SELECT (SELECT coalesce(sum(g.n), 0) FROM {s}.names_generation g)::bigint AS generation,
		coalesce((SELECT array_agg(l.member ORDER BY l.member) FROM live l), '{}')::text[] AS members
), cur AS (
	SELECT fp.generation, fp.members, fp.generation IS DISTINCT FROM $2 OR fp.members IS DISTINCT FROM $3::text[] AS changed FROM fp
)
SELECT cur.generation, cur.members, cur.changed, CASE WHEN cur.changed THEN ARRAY(
	SELECT n.store_name FROM {s}.bound_names n
	WHERE (SELECT l.member FROM live l ORDER BY hashtextextended(n.store_name, l.h) DESC, l.member LIMIT 1) = $1
		AND EXISTS (SELECT 1 FROM {s}.bindings b WHERE b.store_name = n.store_name)
	ORDER BY n.store_name) END,
	EXISTS (SELECT 1 FROM live l WHERE l.member = $1 AND l.incarnation = $4)
FROM cur`,

		// pruneNames drops the names no record binds. A record bound to
		// one meanwhile keeps it: its binding's foreign key check locks
		// the row, and the statement fails rather than delete it.
		pruneNames: `
DELETE FROM {s}.bound_names n
WHERE NOT EXISTS (SELECT 1 FROM {s}.bindings b WHERE b.store_name = n.store_name)`,

		// reviewNext reads the next $1 records after the shared review
		// cursor, moves the cursor past them (to '' when fewer are left:
		// the pass ends) and returns, on every row, where it was and where
		// it is (the range claimed) and a record of the range: one row
		// with no record when the range is empty. One read of the
		// records' index serves the claim and the slice. FOR UPDATE:
		// members claiming at once take consecutive ranges.
		reviewNext: `
WITH cur AS (SELECT after FROM {s}.review_cursor WHERE one FOR UPDATE),
slice AS MATERIALIZED (
	SELECT ` + recordColumns + ` AS body FROM {s}.agreements a WHERE a.id > (SELECT after FROM cur) ORDER BY a.id LIMIT $1
), moved AS (
	UPDATE {s}.review_cursor r
	SET after = CASE WHEN (SELECT count(*) FROM slice) < $1 THEN '' ELSE (SELECT max(id) FROM slice) END
	FROM cur
	WHERE r.one
	RETURNING cur.after AS claimed_from, r.after AS claimed_through
)
SELECT m.claimed_from, m.claimed_through, s.id, s.node, s.revision, s.next_attempt, s.attempts, s.services, s.body_bin, s.body
FROM moved m LEFT JOIN slice s ON true
ORDER BY s.id`,

		// observations returns the observations' generation and, in the
		// same snapshot, the observations of the names $1 if the
		// generation is not $2 (the one the caller's cache holds), else
		// only of the names $3 (those its cache lacks): a row with a null
		// name when none is read.
		observations: `
WITH g AS (SELECT coalesce(sum(n), 0)::bigint AS generation FROM {s}.observations_generation)
SELECT g.generation, o.name, o.state, o.tag, o.since, o.checked_at
FROM g LEFT JOIN {s}.observations o
	ON o.name = ANY(CASE WHEN g.generation = $2 THEN $3::text[] ELSE $1::text[] END)`,
		allObservations: `SELECT name, state, tag, since, checked_at FROM {s}.observations`,

		// A member stores the observations of the names it polls, and of
		// names no record binds (a deployment's wait).
		putObservations: `
WITH v AS (
	SELECT * FROM unnest($1::text[], $2::smallint[], $3::text[], $4::timestamptz[], $5::timestamptz[])
		AS v(name, state, tag, since, checked_at)
)
INSERT INTO {s}.observations AS o (name, state, tag, since, checked_at, written_by, written_at)
SELECT v.name, v.state, v.tag, v.since, v.checked_at, $6, now() FROM v
WHERE NOT EXISTS (SELECT 1 FROM {s}.bindings b WHERE b.store_name = v.name) OR {s}.name_owner(v.name) = $6
ORDER BY v.name
ON CONFLICT (name) DO UPDATE
SET state = excluded.state, tag = excluded.tag, since = excluded.since, checked_at = excluded.checked_at,
	written_by = excluded.written_by, written_at = excluded.written_at
RETURNING o.name`,

		putWait: `
INSERT INTO {s}.waits (id, store_names, created_at) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET store_names = excluded.store_names, created_at = excluded.created_at`,

		waits: `SELECT id, store_names, created_at FROM {s}.waits ORDER BY id`,

		deleteWait: `DELETE FROM {s}.waits WHERE id = $1`,

		newEpoch: `SELECT nextval('{s}.epochs')`,

		previous: `SELECT incarnation, expires_at > now() FROM {s}.members WHERE member = $1`,

		join: `
INSERT INTO {s}.members (member, incarnation, joined_at, heartbeat_at, expires_at)
VALUES ($1, nextval('{s}.member_incarnations'), now(), now(), now() + $2 * interval '1 microsecond')
ON CONFLICT (member) DO UPDATE
SET incarnation = excluded.incarnation, joined_at = excluded.joined_at,
	heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at
RETURNING incarnation`,

		heartbeat: `
UPDATE {s}.members SET heartbeat_at = now(), expires_at = now() + $3 * interval '1 microsecond'
WHERE member = $1 AND incarnation = $2 AND expires_at > now()`,

		// A member that left stays as a row that expired, so that its
		// claims are void at once; Join prunes rows long expired.
		leave: `UPDATE {s}.members SET expires_at = now() WHERE member = $1 AND incarnation = $2`,

		prune: `DELETE FROM {s}.members WHERE expires_at < now() - interval '1 day'`,

		// withoutBin and putBin are the backfill's: the records without a
		// binary body (through the partial index on them), and their
		// binary body stored unless the record was written meanwhile.
		withoutBin: `SELECT id, revision, body FROM {s}.agreements WHERE body_bin IS NULL AND id > $1 ORDER BY id LIMIT $2`,
		putBin: `
UPDATE {s}.agreements a SET body_bin = v.body_bin
FROM unnest($1::text[], $2::bigint[], $3::bytea[]) AS v(id, revision, body_bin)
WHERE a.id = v.id AND a.revision = v.revision AND a.body_bin IS NULL`,
	}
	for _, p := range []*string{
		&q.fence, &q.create, &q.get, &q.page, &q.bound, &q.update, &q.rebind, &q.delete, &q.markDue, &q.due,
		&q.names, &q.pruneNames, &q.reviewNext, &q.observations, &q.allObservations, &q.putObservations, &q.putWait, &q.waits, &q.deleteWait, &q.newEpoch,
		&q.join, &q.previous, &q.heartbeat, &q.leave, &q.prune, &q.withoutBin, &q.putBin,
	} {
		*p = strings.ReplaceAll(*p, "{s}", schema)
	}
	return q
}
