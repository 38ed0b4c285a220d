package pgstate

import (
	"cmp"
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// ErrBadInput exposes the error of a name PostgreSQL text cannot hold to
// the external tests.
var ErrBadInput = errBadInput

// SchemaOf returns the PostgreSQL schema holding the tables of st, a
// State Open returned.
func SchemaOf(st state.Backend) string { return st.(*State).schema }

// Versions returns the schema versions the migrations make, 1 to the
// latest, in order.
func Versions() []int {
	vs := make([]int, len(migrations))
	for i := range vs {
		vs[i] = i + 1
	}
	return vs
}

// MigrateTo brings the schema at url to version, as an agbot that knew
// only the migrations up to it would: the upgrade tests start there.
func MigrateTo(ctx context.Context, url, schema string, version int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	_, err = migrateSteps(ctx, conn, cmp.Or(schema, defaultSchema), migrations[:version])
	return err
}

// NamesReads returns how many times st's Names read the names themselves,
// not only their generation.
func NamesReads(st state.Backend) int64 { return st.(*State).namesReads.Load() }

// ObservationsRead returns how many names st's Observations read from the
// observations table, not from its cache.
func ObservationsRead(st state.Backend) int64 { return st.(*State).observed.reads.Load() }

// ReadObservationsUncached has st's Observations read every name asked
// each call, as before the observations' generation (the benchmarks'
// baseline).
func ReadObservationsUncached(st state.Backend) {
	c := &st.(*State).observed
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = true
}
