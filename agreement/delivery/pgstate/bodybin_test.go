package pgstate_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
)

// Records are read from their binary body, or from their JSON one when
// they have none: those of a schema of version 4 brought up to date, and
// those an agbot of version 4, still running during the upgrade, wrote
// (it writes the JSON body alone; the trigger drops the binary body it
// made stale). A write of this version stores both again, and Open
// backfills the binary body of the records that have none.
func TestRecordsAnOlderAgbotWroteAreRead(t *testing.T) {
	ctx := t.Context()
	db, pool := oldSchema(t, 4, `
INSERT INTO edgesecrets_delivery.agreements (id, node, revision, services, body)
VALUES ('agr-v4', 'node-1', 1, '[]', '{"lastError": "written by version 4", "proposed": true}')`)

	binary := func(id string) bool {
		t.Helper()
		var has bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT body_bin IS NOT NULL FROM edgesecrets_delivery.agreements WHERE id = $1", id).Scan(&has))
		return has
	}
	st := open(t, db.URL, pgstate.Options{})
	got, err := st.Get(ctx, "agr-v4")
	require.NoError(t, err)
	assert.Equal(t, "written by version 4", got.LastError, "a record of version 4 reads, from either body")
	assert.True(t, got.Proposed)
	require.Eventually(t, func() bool { return binary("agr-v4") }, 10*time.Second, 10*time.Millisecond, "the upgrading agbot backfills its binary body")
	again, err := st.Get(ctx, "agr-v4")
	require.NoError(t, err)
	assert.Equal(t, got, again, "the same record, from its binary body")

	a, b := newRecord("agr-a", time.Time{}, "org/a"), newRecord("agr-b", time.Time{}, "org/b")
	b.LastError = "b's diagnostic"
	require.NoError(t, st.Create(ctx, a))
	require.NoError(t, st.Create(ctx, b))
	require.True(t, binary("agr-a"), "a record this version writes has a binary body")

	// A version 4 agbot's Update of agr-a: the JSON body alone (b's).
	_, err = pool.Exec(ctx, `UPDATE edgesecrets_delivery.agreements a SET body = b.body, revision = a.revision + 1
FROM edgesecrets_delivery.agreements b WHERE a.id = 'agr-a' AND b.id = 'agr-b'`)
	require.NoError(t, err)
	assert.False(t, binary("agr-a"), "the binary body it made stale is dropped")
	got, err = st.Get(ctx, "agr-a")
	require.NoError(t, err)
	assert.Equal(t, "b's diagnostic", got.LastError, "what the older agbot wrote is read")

	got.LastError = "written again"
	require.NoError(t, st.Update(ctx, "", &got))
	assert.True(t, binary("agr-a"), "written again by this version, it has a binary body")
	got, err = st.Get(ctx, "agr-a")
	require.NoError(t, err)
	assert.Equal(t, "written again", got.LastError)
}

// Open backfills the binary body of every record without one, page after
// page, each read the same from it as from its JSON body.
func TestOpenBackfillsEveryRecord(t *testing.T) {
	ctx := t.Context()
	db, pool := oldSchema(t, 4, `
INSERT INTO edgesecrets_delivery.agreements (id, node, revision, services, body)
SELECT format('agr-%s', lpad(g::text, 5, '0')), 'node-1', 1, '[]', jsonb_build_object('lastError', format('e%s', g))
FROM generate_series(1, 1234) AS g`)

	st := open(t, db.URL, pgstate.Options{})
	without := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM edgesecrets_delivery.agreements WHERE body_bin IS NULL").Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return without() == 0 }, 30*time.Second, 20*time.Millisecond, "every record backfilled")
	for _, id := range []string{"agr-00001", "agr-00500", "agr-00501", "agr-01234"} {
		got, err := st.Get(ctx, id)
		require.NoError(t, err)
		var want string
		require.NoError(t, pool.QueryRow(ctx, "SELECT body->>'lastError' FROM edgesecrets_delivery.agreements WHERE id = $1", id).Scan(&want))
		assert.Equal(t, want, got.LastError, id)
	}
}
