package pgstate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// sharedState is what the tests use of the State Open returns: a
// state.Backend that is also a state.Membership.
type sharedState interface {
	state.Backend
	state.Membership
}

// twoRecords inserts two records binding org/a and org/b, as an agbot of
// schema version 2 or 3 did.
const twoRecords = `
INSERT INTO edgesecrets_delivery.agreements (id, node, revision, services, body)
VALUES ('agr-1', 'node-1', 1, '[]', '{}'), ('agr-2', 'node-2', 1, '[]', '{}');
INSERT INTO edgesecrets_delivery.bindings (store_name, agreement_id)
VALUES ('org/a', 'agr-1'), ('org/b', 'agr-1'), ('org/b', 'agr-2');`

// oldSchema makes a database whose schema an agbot of the given schema
// version made, runs insert there as such an agbot would have, and
// returns the database and a pool on it: the upgrade tests start there.
func oldSchema(t *testing.T, version int, insert string) (*pgtest.Database, *pgxpool.Pool) {
	t.Helper()
	db := pgtest.NewDatabase(t)
	require.NoError(t, pgstate.MigrateTo(t.Context(), db.URL, "", version))
	pool := db.Pool(t)
	_, err := pool.Exec(t.Context(), insert)
	require.NoError(t, err)
	return db, pool
}

// open opens a State on url (closed when t ends) without joining.
func open(t testing.TB, url string, opts pgstate.Options) sharedState {
	t.Helper()
	opts.URL = url
	st, _, err := pgstate.Open(t.Context(), opts)
	require.NoError(t, err, "opening the state")
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// member is one agbot's State, joined under its id.
type member struct {
	id string
	sharedState
}

// joinAll opens one State per id on url, as separate agbots would (each
// its own pool), and joins each.
func joinAll(t testing.TB, url string, opts pgstate.Options, ids ...string) []*member {
	t.Helper()
	out := make([]*member, len(ids))
	for i, id := range ids {
		st := open(t, url, opts)
		_, err := st.Join(t.Context(), id)
		require.NoError(t, err, "joining as %s", id)
		out[i] = &member{id: id, sharedState: st}
	}
	return out
}

// heartbeat renews m's lease every period/4 until the returned stop is
// called (or t ends), and reports the first failure on t.
func heartbeat(t testing.TB, m *member, period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period / 4)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := m.Heartbeat(ctx, m.id); err != nil && ctx.Err() == nil {
				t.Errorf("heartbeat of %s: %v", m.id, err)
				return
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// tag returns a version content tag.
func tag(t testing.TB, v string) secretstore.ContentTag {
	t.Helper()
	ct, err := secretstore.ParseContentTag("version:" + v)
	require.NoError(t, err)
	return ct
}

// newRecord returns an active record bound to names, one service secret
// each, due at next.
func newRecord(id string, next time.Time, names ...string) *state.Record {
	secrets := map[string]binding.BoundSecret{}
	var slots []state.Slot
	for i, n := range names {
		name := fmt.Sprintf("secret%02d", i)
		secrets[name] = binding.BoundSecret{StoreNames: []string{n}, Format: "json"}
		slots = append(slots, state.Slot{Name: name, Desired: state.Content{StoreName: n}})
	}
	return &state.Record{
		ID:          id,
		Node:        "node-" + id,
		Services:    []binding.ServiceBinding{{Service: agreement.ServiceRef{Org: "org", URL: "svc"}, Secrets: secrets}},
		Slots:       slots,
		Phase:       state.PhaseActive,
		NextAttempt: next,
		CreatedAt:   time.Now(),
	}
}

// createRecords creates n records agr-0000… bound to names round robin,
// due at next.
func createRecords(t testing.TB, st state.Backend, n int, next time.Time, names []string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("agr-%04d", i)
		require.NoError(t, st.Create(t.Context(), newRecord(ids[i], next, names[i%len(names)])))
	}
	return ids
}

// storeNames returns n store names.
func storeNames(n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("org/secret-%03d", i)
	}
	return out
}
