package pgstate

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// Each query an agbot runs every interval finds its rows through an
// index: at a realistic row count (100,000 agreements, in sync, bound to
// 1,000 names, a name bound to about 100 of them), with the statistics
// analysed, no plan reads the whole agreements table. (A name bound to 1 %
// of the fleet, org/hot, is left out: for 1,000 rows of 100,000 the
// planner rightly prefers one sequential read to 1,000 index lookups.)
// Nor does one read every binding (Names reads one row per name), or
// every observation (1,000 of them).
func TestPerIntervalQueriesUseIndexes(t *testing.T) {
	const n = 100_000
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	st, _, err := Open(ctx, Options{URL: db.URL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	s := st
	fill := fmt.Sprintf(`
INSERT INTO %[1]s.agreements (id, node, revision, next_attempt, attempts, services, body)
SELECT format('agr-%%07s', i), format('node-%%07s', i), 1, NULL, 0, '[]'::jsonb, '{}'::jsonb
FROM generate_series(0, %[2]d - 1) AS i;
INSERT INTO %[1]s.bound_names (store_name)
SELECT DISTINCT CASE WHEN i %% 100 = 0 THEN 'org/hot' ELSE format('org/s-%%03s', i %% 999) END
FROM generate_series(0, %[2]d - 1) AS i;
INSERT INTO %[1]s.bindings (store_name, agreement_id)
SELECT CASE WHEN i %% 100 = 0 THEN 'org/hot' ELSE format('org/s-%%03s', i %% 999) END, format('agr-%%07s', i)
FROM generate_series(0, %[2]d - 1) AS i;
INSERT INTO %[1]s.observations (name, state, tag, since, checked_at, written_by, written_at)
SELECT store_name, 1, '', now(), now(), 'm1', now() FROM %[1]s.bound_names;
ANALYZE %[1]s.agreements; ANALYZE %[1]s.bindings; ANALYZE %[1]s.bound_names; ANALYZE %[1]s.observations;`, s.schema, n)
	_, err = s.pool.Exec(ctx, fill)
	require.NoError(t, err)

	now := time.Now()
	var sliceNames []string
	for i := range 300 {
		sliceNames = append(sliceNames, fmt.Sprintf("org/s-%03d", i*3))
	}
	for _, q := range []struct {
		name  string
		query string
		args  []any
	}{
		{"a slice of the review (RecordsAfter)", s.q.page, []any{"agr-0050000", 334}},
		{"the records bound to a name (RecordsBound)", s.q.bound, []any{[]string{"org/s-001"}}},
		{"marking a name's records due (MarkDue)", s.q.markDue, []any{[]string{}, []string{}, []string{"org/s-001"}, micro(now), false}},
		{"claiming due records (Due)", s.q.due, []any{64, micro(now), micro(now.Add(time.Minute)), time.Minute.Microseconds(), "m1", int64(1)}},
		{"the names a member polls (Names)", s.q.names, []any{"m1", int64(-1), []string{}, int64(1)}},
		{"claiming and reading a slice of the shared review (ReviewNext)", s.q.reviewNext, []any{334}},
		{"the observations of a slice's names (Observations)", s.q.observations, []any{sliceNames, int64(-1), sliceNames}},
		{"the observations of a slice's names, read before (Observations)", s.q.observations, []any{sliceNames, int64(0), []string{}}},
	} {
		t.Run(q.name, func(t *testing.T) {
			rows, err := s.pool.Query(ctx, "EXPLAIN "+q.query, q.args...)
			require.NoError(t, err)
			var plan []string
			for rows.Next() {
				var line string
				require.NoError(t, rows.Scan(&line))
				plan = append(plan, line)
			}
			require.NoError(t, rows.Err())
			text := strings.Join(plan, "\n")
			assert.NotRegexp(t, `Seq Scan on agreements`, text, "a sequential scan of the agreements table:\n%s", text)
			assert.NotRegexp(t, `Seq Scan on observations `, text, "a sequential scan of the observations table:\n%s", text)
			for i, line := range plan {
				if strings.Contains(line, "Index Scan using agreements_pkey") {
					// An ordered scan with no condition reads the index from
					// its start: every agreement before the one wanted.
					cond := i+1 < len(plan) && strings.Contains(plan[i+1], "Index Cond")
					assert.True(t, cond, "a read of the agreements' index from its start:\n%s", text)
				}
				if strings.Contains(line, " on bindings") {
					cond := i+1 < len(plan) && regexp.MustCompile(`Index Cond|Recheck Cond`).MatchString(plan[i+1])
					assert.True(t, cond, "a read of every binding:\n%s", text)
				}
			}
		})
	}
}
