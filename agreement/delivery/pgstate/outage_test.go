package pgstate_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// everyCall returns one call of each method of m, the State's and the
// Membership's but Join and Leave, on the record id (whose stored copy
// rec is) and store name name.
func everyCall(m *member, rec state.Record, name string) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"Create": func(ctx context.Context) error {
			return m.Create(ctx, newRecord(fmt.Sprintf("new-%d", time.Now().UnixNano()), time.Time{}, name))
		},
		"Get": func(ctx context.Context) error { return second(m.Get(ctx, rec.ID)) },
		"Update": func(ctx context.Context) error {
			cur, err := m.Get(ctx, rec.ID)
			if err != nil {
				return err
			}
			cur.Attempts++
			return m.Update(ctx, m.id, &cur)
		},
		"Delete":  func(ctx context.Context) error { return m.Delete(ctx, "never-stored") },
		"Records": func(ctx context.Context) error { return m.Records(ctx, func(state.Record) bool { return true }) },
		"Names":   func(ctx context.Context) error { return second(m.Names(ctx, m.id)) },
		"MarkDue": func(ctx context.Context) error {
			return second(m.MarkDue(ctx, state.Selector{IDs: []string{rec.ID}}, time.Now().Add(time.Hour), false))
		},
		"Due":          func(ctx context.Context) error { return second(m.Due(ctx, m.id, time.Now(), time.Minute, 10)) },
		"Observations": func(ctx context.Context) error { return second(m.Observations(ctx, []string{name})) },
		"PutObservations": func(ctx context.Context) error {
			return m.PutObservations(ctx, m.id, state.Observation{Name: "org/unbound", State: state.Missing})
		},
		"PutWait": func(ctx context.Context) error {
			return m.PutWait(ctx, state.Wait{ID: "dep", StoreNames: []string{name}})
		},
		"Waits":      func(ctx context.Context) error { return second(m.Waits(ctx)) },
		"DeleteWait": func(ctx context.Context) error { return m.DeleteWait(ctx, "never-stored") },
		"NewEpoch":   func(ctx context.Context) error { return second(m.NewEpoch(ctx)) },
		"Heartbeat":  func(ctx context.Context) error { return second(m.Heartbeat(ctx, m.id)) },
	}
}

// assertAllUnavailable runs every call and asserts each fails with
// ErrStateUnavailable within bound.
func assertAllUnavailable(t *testing.T, calls map[string]func(context.Context) error, bound time.Duration) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		start := time.Now()
		err := calls[name](t.Context())
		assert.ErrorIs(t, err, state.ErrStateUnavailable, "%s while the database is unreachable", name)
		assert.Less(t, time.Since(start), bound, "%s answers within the State's timeout", name)
	}
}

// assertAllWork runs every call and asserts each succeeds, the first one
// included: no broken connection is handed out after the database came
// back.
func assertAllWork(t *testing.T, calls map[string]func(context.Context) error) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		assert.NoError(t, calls[name](t.Context()), "%s once the database is back", name)
	}
}

// outageSetup starts a dedicated server, joins one member, stores a
// record and fills the pool with connections.
func outageSetup(t *testing.T, opts pgstate.Options) (*pgtest.Server, *member, state.Record) {
	srv := pgtest.Start(t, pgtest.Options{})
	m, rec := fillPool(t, srv.URL, opts)
	return srv, m, rec
}

// fillPool joins one member on url with a pool of four connections, stores
// a record and fills the pool.
func fillPool(t *testing.T, url string, opts pgstate.Options) (*member, state.Record) {
	opts.MaxConns = 4
	m := joinAll(t, url, opts, "agbot-1")[0]
	rec := newRecord("agr-1", time.Time{}, "org/db")
	require.NoError(t, m.Create(t.Context(), rec))
	done := make(chan error, 4)
	for range 4 {
		go func() { done <- second(m.NewEpoch(t.Context())) }()
	}
	for range 4 {
		require.NoError(t, <-done)
	}
	return m, *rec
}

// TestDatabaseOutage: while the server is stopped, killed or hung, every
// call fails with ErrStateUnavailable within the State's timeout; once it
// is back, every call works again, the first included, and nothing
// stored before is lost.
func TestDatabaseOutage(t *testing.T) {
	const timeout = time.Second
	for _, c := range []struct {
		name        string
		down, up    func(*pgtest.Server) error
		unavailable time.Duration // how fast calls fail
	}{
		// The bounds leave room for a loaded machine (-race, 2 cores shared
		// by every package's tests); a call that hangs or retries on its
		// own exceeds them by far.
		{"stopped", (*pgtest.Server).Stop, func(s *pgtest.Server) error { return s.Start(context.Background()) }, 3 * time.Second},
		{"killed", (*pgtest.Server).Kill, func(s *pgtest.Server) error { return s.Start(context.Background()) }, 3 * time.Second},
		{"hung", (*pgtest.Server).Pause, (*pgtest.Server).Resume, timeout + 3*time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, m, rec := outageSetup(t, pgstate.Options{Timeout: timeout, LeasePeriod: time.Minute})
			calls := everyCall(m, rec, "org/db")
			assertAllWork(t, calls)

			require.NoError(t, c.down(srv))
			assertAllUnavailable(t, calls, c.unavailable)
			require.NoError(t, c.up(srv))
			assertAllWork(t, calls)
			got, err := m.Get(t.Context(), rec.ID)
			require.NoError(t, err)
			assert.Equal(t, 2, got.Attempts, "the Updates made before and after the outage are kept")
		})
	}
}

// TestOutageOf30Seconds: the database stopped for 30 s. Every call fails
// with ErrStateUnavailable throughout, none hangs; when the database is
// back, nothing stored is lost, the member, whose lease lapsed meanwhile,
// learns it must join again, does, and works on.
func TestOutageOf30Seconds(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s outage; run without -short")
	}
	const (
		timeout = 2 * time.Second
		period  = 10 * time.Second
		outage  = 30 * time.Second
	)
	srv, m, rec := outageSetup(t, pgstate.Options{Timeout: timeout, LeasePeriod: period})
	ctx := t.Context()
	ids := createRecords(t, m, 50, time.Now().Add(-time.Second), storeNames(5))
	claimed, err := m.Due(ctx, m.id, time.Now(), period, 0)
	require.NoError(t, err)
	require.Len(t, claimed, len(ids))
	for i := range claimed[:25] {
		claimed[i].LastError = "acknowledged before the outage"
		claimed[i].NextAttempt = time.Time{}
	}
	require.NoError(t, m.Update(ctx, m.id, slicePtrs(claimed[:25])...))

	require.NoError(t, srv.Stop())
	calls := everyCall(m, rec, "org/db")
	for start := time.Now(); time.Since(start) < outage; {
		assertAllUnavailable(t, calls, timeout+time.Second)
		time.Sleep(time.Second)
	}
	require.NoError(t, srv.Start(ctx))

	_, err = m.Heartbeat(ctx, m.id)
	require.ErrorIs(t, err, state.ErrLeaseLost, "the member's lease lapsed during the outage")
	_, err = m.Due(ctx, m.id, time.Now(), period, 0)
	require.ErrorIs(t, err, state.ErrLeaseLost, "it claims nothing before it joins again")
	_, err = m.Join(ctx, m.id)
	require.NoError(t, err)
	again, err := m.Due(ctx, m.id, time.Now(), period, 0)
	require.NoError(t, err)
	assert.Len(t, again, 25, "the records claimed and not stored before the outage are due again after it")
	assertAllWork(t, calls)

	kept := 0
	require.NoError(t, m.Records(ctx, func(r state.Record) bool {
		if r.LastError == "acknowledged before the outage" {
			kept++
		}
		return true
	}))
	assert.Equal(t, 25, kept, "every Update acknowledged before the outage is kept")
}

func slicePtrs(recs []state.Record) []*state.Record {
	out := make([]*state.Record, len(recs))
	for i := range recs {
		out[i] = &recs[i]
	}
	return out
}
