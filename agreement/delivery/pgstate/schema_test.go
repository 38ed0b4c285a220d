package pgstate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// TestConcurrentMigration: agbots starting at once on an empty database
// all open it; the schema is made once, and opening again changes nothing.
func TestConcurrentMigration(t *testing.T) {
	db := pgtest.NewDatabase(t)
	pool := db.Pool(t)
	const agbots = 6
	start := make(chan struct{})
	states := make([]state.Backend, agbots)
	errs := make([]error, agbots)
	var wg sync.WaitGroup
	for i := range agbots {
		wg.Go(func() {
			<-start
			states[i], _, errs[i] = pgstate.Open(t.Context(), pgstate.Options{URL: db.URL})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "agbot %d opens the state", i)
		t.Cleanup(func() { _ = states[i].Close() })
	}
	versions := func() []int {
		rows, err := pool.Query(t.Context(), "SELECT version FROM edgesecrets_delivery.schema_version ORDER BY version")
		require.NoError(t, err)
		var vs []int
		for rows.Next() {
			var v int
			require.NoError(t, rows.Scan(&v))
			vs = append(vs, v)
		}
		require.NoError(t, rows.Err())
		return vs
	}
	assert.Equal(t, pgstate.Versions(), versions(), "each migration applied once")

	require.NoError(t, states[0].Create(t.Context(), newRecord("agr-1", time.Time{}, "org/a")))
	again := open(t, db.URL, pgstate.Options{})
	_, err := again.Get(t.Context(), "agr-1")
	require.NoError(t, err, "opening an up-to-date schema keeps its content")
	assert.Equal(t, pgstate.Versions(), versions(), "and applies nothing")
}

// TestSchemaNewerRefused: an agbot does not run on a schema a newer one
// made.
func TestSchemaNewerRefused(t *testing.T) {
	db := pgtest.NewDatabase(t)
	open(t, db.URL, pgstate.Options{})
	_, err := db.Pool(t).Exec(t.Context(), "INSERT INTO edgesecrets_delivery.schema_version (version, description) VALUES (99, 'from the future')")
	require.NoError(t, err)
	_, _, err = pgstate.Open(t.Context(), pgstate.Options{URL: db.URL})
	require.ErrorIs(t, err, pgstate.ErrSchemaNewer)
	assert.NotErrorIs(t, err, state.ErrStateUnavailable, "a newer schema is an answer, not an outage")
	assert.Contains(t, err.Error(), "version 99")
}

// TestSchemasAreSeparate: agbot groups with different schemas in one
// database share nothing.
func TestSchemasAreSeparate(t *testing.T) {
	db := pgtest.NewDatabase(t)
	a := open(t, db.URL, pgstate.Options{Schema: "group_a"})
	b := open(t, db.URL, pgstate.Options{Schema: "Group B"})
	require.NoError(t, a.Create(t.Context(), newRecord("agr-1", time.Time{}, "org/a")))
	_, err := b.Get(t.Context(), "agr-1")
	require.ErrorIs(t, err, state.ErrNotFound)
	assert.Equal(t, "Group B", pgstate.SchemaOf(b))
}

// TestOpenErrors: bad options and an unreachable database fail clearly,
// without the URL's password in the error.
func TestOpenErrors(t *testing.T) {
	const password = "s3cret-password-in-url"
	for _, c := range []struct {
		name string
		opts pgstate.Options
		is   error
		says string
	}{
		{"no URL", pgstate.Options{}, nil, "Options.URL is required"},
		{"bad URL", pgstate.Options{URL: "postgres://user:" + password + "@127.0.0.1:notaport/db"}, nil, "not a valid PostgreSQL connection string"},
		{"negative lease", pgstate.Options{URL: "postgres://127.0.0.1/db", LeasePeriod: -time.Second}, nil, "negative LeasePeriod"},
		{"bad schema", pgstate.Options{URL: "postgres://127.0.0.1/db", Schema: "a\x00b"}, nil, "schema"},
		{"unreachable", pgstate.Options{URL: "postgres://user:" + password + "@127.0.0.1:1/db", Timeout: 2 * time.Second}, state.ErrStateUnavailable, "migrating the schema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, certs, err := pgstate.Open(ctx, c.opts)
			require.Error(t, err)
			assert.Nil(t, st)
			assert.Nil(t, certs)
			if c.is != nil {
				assert.ErrorIs(t, err, c.is)
			}
			assert.Contains(t, err.Error(), c.says)
			assert.NotContains(t, err.Error(), password)
		})
	}
}

// TestBadInputStoresNothing: names PostgreSQL text cannot hold exactly
// are refused with an error naming them, and nothing of the call is
// stored.
func TestBadInputStoresNothing(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	m := joinAll(t, db.URL, pgstate.Options{}, "agbot-1")[0]
	good := newRecord("good", time.Time{}, "org/a")
	require.NoError(t, m.Create(ctx, good))

	badBinding := newRecord("bad-binding", time.Time{}, "org/\xff")
	badNode := good.Clone()
	badNode.Node = "node\x00"
	for name, c := range map[string]struct {
		call func() error
		says string
	}{
		"record id":      {func() error { return m.Create(ctx, newRecord("agr\x00", time.Time{}, "org/a")) }, "id"},
		"store name":     {func() error { return m.Create(ctx, badBinding) }, "store name"},
		"node in Update": {func() error { return m.Update(ctx, m.id, &badNode) }, "node"},
		"wait":           {func() error { return m.PutWait(ctx, state.Wait{ID: "w", StoreNames: []string{"\xfe"}}) }, "store name"},
		"observation":    {func() error { return m.PutObservations(ctx, m.id, state.Observation{Name: "org/\x00"}) }, "name"},
		"member id":      {func() error { return second(m.Join(ctx, "agbot\xff")) }, "id"},
	} {
		err := c.call()
		require.ErrorIs(t, err, pgstate.ErrBadInput, name)
		require.ErrorIs(t, err, edgesecrets.ErrInvalid, "%s: the module-wide kind", name)
		assert.Contains(t, err.Error(), c.says, name)
	}
	_, err := m.Get(ctx, "bad-binding")
	require.ErrorIs(t, err, state.ErrNotFound)
	got, err := m.Get(ctx, "good")
	require.NoError(t, err)
	assert.Equal(t, "node-good", got.Node, "a refused Update stored nothing")
	waits, err := m.Waits(ctx)
	require.NoError(t, err)
	assert.Empty(t, waits)
	names, err := m.Names(ctx, m.id)
	require.NoError(t, err)
	assert.Equal(t, []string{"org/a"}, names)
}

// TestUpgradeKeepsTheNames: a schema an older agbot made (version 2,
// before the names bound had a table of their own) with records in it is
// brought up to date by Open: the names it bound are polled, records
// created and deleted afterwards add and drop theirs, and a Join prunes
// the rows of names no longer bound.
func TestUpgradeKeepsTheNames(t *testing.T) {
	ctx := t.Context()
	db, pool := oldSchema(t, 2, twoRecords)

	m := joinAll(t, db.URL, pgstate.Options{}, "agbot-1")[0]
	names := func() []string {
		t.Helper()
		got, err := m.Names(ctx, m.id)
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, []string{"org/a", "org/b"}, names(), "the names bound before the upgrade")

	// An agbot of version 2, still running, binds a record as it did.
	_, err := pool.Exec(ctx, `
INSERT INTO edgesecrets_delivery.agreements (id, node, revision, services, body) VALUES ('agr-old', 'node-9', 1, '[]', '{}');
INSERT INTO edgesecrets_delivery.bindings (store_name, agreement_id) VALUES ('org/old', 'agr-old');`)
	require.NoError(t, err, "a version 2 agbot's insert of a binding")
	assert.Equal(t, []string{"org/a", "org/b", "org/old"}, names(), "its name is polled")
	require.NoError(t, m.Delete(ctx, "agr-old"))

	require.NoError(t, m.Create(ctx, newRecord("agr-3", time.Time{}, "org/c")))
	assert.Equal(t, []string{"org/a", "org/b", "org/c"}, names(), "a record created after it adds its name")
	require.NoError(t, m.Delete(ctx, "agr-1", "agr-3"))
	assert.Equal(t, []string{"org/b"}, names(), "deleted records' names are not polled")

	bound := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM edgesecrets_delivery.bound_names").Scan(&n))
		return n
	}
	require.Equal(t, 4, bound(), "the rows of the names no longer bound stay until a Join")
	_, err = m.Join(ctx, m.id)
	require.NoError(t, err)
	assert.Equal(t, 1, bound(), "a Join prunes them")
	assert.Equal(t, []string{"org/b"}, names())
}
