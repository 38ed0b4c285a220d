package pgstate_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// TestObservationsFollowEveryChange: Observations, which keeps what it
// read until the observations' generation moves, still returns every
// change: one the other agbot stored, rows written, edited and deleted
// straight in the table (an agbot of an older version, an operator), and
// its own agbot's writes. Without a change it reads no row again, and a
// name it has not read is read alone.
func TestObservationsFollowEveryChange(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	ms := joinAll(t, db.URL, pgstate.Options{}, "agbot-1", "agbot-2")
	pool := db.Pool(t)
	// Names no record binds (a deployment's wait): any member stores them.
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("org/wait-%d", i))
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	missing := func(name string, checked time.Duration) state.Observation {
		return state.Observation{Name: name, State: state.Missing, Since: at, CheckedAt: at.Add(checked)}
	}
	require.NoError(t, ms[1].PutObservations(ctx, ms[1].id, missing(names[0], 0), missing(names[1], 0)))

	asked := names[:4]
	check := func(what string) {
		t.Helper()
		got, err := ms[0].Observations(ctx, asked)
		require.NoError(t, err)
		all, err := ms[1].Observations(ctx, nil) // the truth: read past any cache
		require.NoError(t, err)
		want := map[string]state.Observation{}
		for _, n := range asked {
			if o, ok := all[n]; ok {
				want[n] = o
			}
		}
		assert.Equal(t, want, got, "%s: the observations of %v", what, asked)
	}
	check("at the start")
	reads := pgstate.ObservationsRead(ms[0].sharedState)
	check("unchanged")
	check("unchanged")
	assert.Equal(t, reads, pgstate.ObservationsRead(ms[0].sharedState), "without a change Observations reads no row again")
	asked = names[:5]
	check("a name not read before")
	assert.Equal(t, reads+1, pgstate.ObservationsRead(ms[0].sharedState), "only the name not read before is read")

	for _, step := range []struct {
		name   string
		change func(t *testing.T)
	}{
		{"an observation the other agbot stored", func(t *testing.T) {
			require.NoError(t, ms[1].PutObservations(ctx, ms[1].id, missing(names[0], 3*time.Second)))
		}},
		{"a new observation the other agbot stored", func(t *testing.T) {
			require.NoError(t, ms[1].PutObservations(ctx, ms[1].id, missing(names[2], time.Second)))
		}},
		{"the agbot's own write", func(t *testing.T) {
			require.NoError(t, ms[0].PutObservations(ctx, ms[0].id, missing(names[3], 2*time.Second)))
		}},
		{"a row written straight into the table", func(t *testing.T) {
			_, err := pool.Exec(ctx, `INSERT INTO edgesecrets_delivery.observations (name, state, tag, since, checked_at, written_by, written_at)
VALUES ($1, 2, '', now(), now(), 'agbot-old', now())`, names[4])
			require.NoError(t, err)
		}},
		{"a row edited straight in the table", func(t *testing.T) {
			_, err := pool.Exec(ctx, `UPDATE edgesecrets_delivery.observations SET checked_at = checked_at + interval '1 minute' WHERE name = $1`, names[1])
			require.NoError(t, err)
		}},
		{"a row deleted straight from the table", func(t *testing.T) {
			_, err := pool.Exec(ctx, `DELETE FROM edgesecrets_delivery.observations WHERE name = $1`, names[0])
			require.NoError(t, err)
		}},
	} {
		before, err := ms[0].Observations(ctx, asked)
		require.NoError(t, err)
		step.change(t)
		check(step.name)
		after, err := ms[0].Observations(ctx, asked)
		require.NoError(t, err)
		assert.False(t, maps.Equal(before, after), "%s: the change is seen", step.name)
	}
}
