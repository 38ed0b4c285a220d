package pgstate_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// ownedNames is the truth Names must return: the names with a binding,
// by their owner among the live members (name_owner).
func ownedNames(t *testing.T, db *pgtest.Database) map[string][]string {
	t.Helper()
	rows, err := db.Pool(t).Query(t.Context(), `
SELECT n.store_name, edgesecrets_delivery.name_owner(n.store_name) FROM edgesecrets_delivery.bound_names n
WHERE EXISTS (SELECT 1 FROM edgesecrets_delivery.bindings b WHERE b.store_name = n.store_name)
ORDER BY n.store_name`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var n, owner string
		require.NoError(t, rows.Scan(&n, &owner))
		out[owner] = append(out[owner], n)
	}
	require.NoError(t, rows.Err())
	return out
}

// Names, read again only after a change, still follows every change that
// moves a name: records created, deleted and rebound by another agbot,
// bindings written straight into the tables (an agbot of an older
// version), a member joining and one leaving. Without a change it reads
// only the generation.
func TestNamesFollowEveryChange(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	ms := joinAll(t, db.URL, pgstate.Options{}, "agbot-1", "agbot-2")
	createRecords(t, ms[0], 40, time.Time{}, storeNames(20))
	pool := db.Pool(t)

	check := func(what string, live ...*member) {
		t.Helper()
		want := ownedNames(t, db)
		for _, m := range live {
			got, err := m.Names(ctx, m.id)
			require.NoError(t, err)
			assert.Equal(t, want[m.id], got, "%s: the names of %s", what, m.id)
		}
	}
	check("at the start", ms...)
	reads := pgstate.NamesReads(ms[0].sharedState)
	check("unchanged", ms...)
	check("unchanged", ms...)
	assert.Equal(t, reads, pgstate.NamesReads(ms[0].sharedState), "without a change Names reads only the generation")

	for _, step := range []struct {
		name   string
		change func(t *testing.T)
	}{
		{"a record of new names created by the other agbot", func(t *testing.T) {
			for i := range 10 {
				require.NoError(t, ms[1].Create(ctx, newRecord("agr-new-"+string(rune('a'+i)), time.Time{}, "org/new-"+string(rune('a'+i)))))
			}
		}},
		{"records deleted by the other agbot, the last of their names", func(t *testing.T) {
			for i := range 10 {
				require.NoError(t, ms[1].Delete(ctx, "agr-new-"+string(rune('a'+i))))
			}
		}},
		{"a record rebound by the other agbot", func(t *testing.T) {
			rec, err := ms[1].Get(ctx, "agr-0000")
			require.NoError(t, err)
			moved := newRecord("agr-0000", time.Time{}, "org/moved-1", "org/moved-2", "org/moved-3")
			moved.Revision = rec.Revision
			require.NoError(t, ms[1].Rebind(ctx, ms[1].id, moved))
		}},
		{"bindings written straight into the tables", func(t *testing.T) {
			_, err := pool.Exec(ctx, `
INSERT INTO edgesecrets_delivery.agreements (id, node, revision, services, body) VALUES ('agr-raw', 'node-raw', 1, '[]', '{}');
INSERT INTO edgesecrets_delivery.bindings (store_name, agreement_id)
SELECT format('org/raw-%s', i), 'agr-raw' FROM generate_series(1, 10) AS i;`)
			require.NoError(t, err)
		}},
		{"bindings deleted straight from the tables", func(t *testing.T) {
			_, err := pool.Exec(ctx, `DELETE FROM edgesecrets_delivery.agreements WHERE id = 'agr-raw'`)
			require.NoError(t, err)
		}},
	} {
		before := pgstate.NamesReads(ms[0].sharedState)
		step.change(t)
		check(step.name, ms...)
		assert.Greater(t, pgstate.NamesReads(ms[0].sharedState), before, "%s: the names are read again", step.name)
	}

	// A member joining takes its names; once it leaves, they come back.
	third := joinAll(t, db.URL, pgstate.Options{}, "agbot-3")[0]
	check("a third member joined", ms[0], ms[1], third)
	require.NoError(t, third.Leave(ctx, third.id))
	check("the third member left", ms...)
}

// TestUpgradeFromVersion3: a schema of version 3 (before the names'
// generation) with records in it is brought up to date by Open, and an
// agbot of version 3 still running, which knows nothing of the
// generation, moves the names of the new one when it binds or deletes.
func TestUpgradeFromVersion3(t *testing.T) {
	ctx := t.Context()
	db, pool := oldSchema(t, 3, twoRecords)

	m := joinAll(t, db.URL, pgstate.Options{}, "agbot-1")[0]
	names := func() []string {
		t.Helper()
		got, err := m.Names(ctx, m.id)
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, []string{"org/a", "org/b"}, names(), "the names bound before the upgrade")
	assert.Equal(t, []string{"org/a", "org/b"}, names(), "again, from the generation")

	// The statements of a version 3 agbot: Create and Delete.
	old, err := pool.Exec(ctx, `
WITH ins AS (
	INSERT INTO edgesecrets_delivery.agreements (id, node, revision, next_attempt, attempts, services, body)
	VALUES ('agr-old', 'node-9', 1, NULL, 0, '[]', '{}') ON CONFLICT (id) DO NOTHING RETURNING id
), bound AS (
	INSERT INTO edgesecrets_delivery.bindings (store_name, agreement_id) SELECT n, ins.id FROM ins, unnest('{org/old}'::text[]) AS n
)
SELECT count(*) FROM ins`)
	require.NoError(t, err, "a version 3 agbot's Create")
	require.EqualValues(t, 1, old.RowsAffected())
	assert.Equal(t, []string{"org/a", "org/b", "org/old"}, names(), "its name is polled")
	_, err = pool.Exec(ctx, `DELETE FROM edgesecrets_delivery.agreements
WHERE id IN (SELECT id FROM edgesecrets_delivery.agreements WHERE id = ANY('{agr-old,agr-1}') ORDER BY id FOR UPDATE)`)
	require.NoError(t, err, "a version 3 agbot's Delete")
	assert.Equal(t, []string{"org/b"}, names(), "the names it no longer binds are not polled")
}
