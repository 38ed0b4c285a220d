package pgstate_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// addMembers stores agbot-1 live in incarnation 3 and agbot-2 lapsed in
// incarnation 1, as their heartbeats would have left them.
func addMembers(t testing.TB, pool *pgxpool.Pool) {
	_, err := pool.Exec(t.Context(), `
INSERT INTO edgesecrets_delivery.members (member, incarnation, joined_at, heartbeat_at, expires_at) VALUES
	('agbot-1', 3, now(), now(), now() + interval '1 hour'),
	('agbot-2', 1, now() - interval '2 minutes', now() - interval '1 minute', now() - interval '1 second')`)
	require.NoError(t, err)
}

// TestFenceIsMemberLive: the fence (which writes member_live's rule out,
// for its plan's sake) refuses exactly the members member_live finds not
// live, and never a caller that did not join (incarnation 0).
func TestFenceIsMemberLive(t *testing.T) {
	db := pgtest.NewDatabase(t)
	st, _, err := pgstate.Open(t.Context(), pgstate.Options{URL: db.URL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	pool := db.Pool(t)
	addMembers(t, pool)

	for _, tc := range []struct {
		name   string
		member string
		inc    int64
		live   bool
	}{
		{"live in its incarnation", "agbot-1", 3, true},
		{"live, an earlier incarnation", "agbot-1", 2, false},
		{"live, a later incarnation", "agbot-1", 4, false},
		{"lapsed", "agbot-2", 1, false},
		{"never joined", "agbot-3", 1, false},
		{"not joined through a State", "agbot-3", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var live bool
			require.NoError(t, pool.QueryRow(t.Context(), "SELECT edgesecrets_delivery.member_live($1, $2)", tc.member, tc.inc).Scan(&live))
			assert.Equal(t, tc.live, live, "member_live")

			_, err := pool.Exec(t.Context(), "SELECT edgesecrets_delivery.fence($1, $2)", tc.member, tc.inc)
			if tc.live || tc.inc == 0 {
				assert.NoError(t, err, "fence lets the member through")
				return
			}
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "fence refuses the member: %v", err)
			assert.Equal(t, "ED001", pgErr.Code)
		})
	}
}

// BenchmarkFence: the fence of a live member as schema version 6 had it
// (calling member_live) and as it is, side by side in one run:
//
//	go test -run '^$' -bench Fence ./agreement/delivery/pgstate/
func BenchmarkFence(b *testing.B) {
	versions := pgstate.Versions()
	for _, version := range []int{6, versions[len(versions)-1]} {
		b.Run(fmt.Sprintf("schema=%d", version), func(b *testing.B) {
			db := pgtest.NewDatabase(b)
			require.NoError(b, pgstate.MigrateTo(b.Context(), db.URL, "", version))
			pool := db.Pool(b)
			addMembers(b, pool)
			for b.Loop() {
				// Each in a transaction of its own, as in an agbot's batch.
				if _, err := pool.Exec(b.Context(), "SELECT edgesecrets_delivery.fence('agbot-1', 3)"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
