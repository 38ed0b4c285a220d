package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// queryString runs a query returning one text value.
func queryString(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&s), sql)
	return s
}

func TestStartedServerAnswersOnLoopbackWithItsSettings(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{Settings: map[string]string{"statement_timeout": "1234ms"}})
	assert.True(t, strings.HasPrefix(srv.URL, "postgres://postgres:"), "logs in as the superuser: %s", srv.Name)
	host, _, err := net.SplitHostPort(srv.Addr)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	assert.Contains(t, srv.URL, "@"+srv.Addr+"/postgres?")
	assert.Equal(t, "postgres", srv.Name)

	pool := srv.Pool(t)
	for setting, want := range map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": "",
		"fsync":                   "on",
		"synchronous_commit":      "on",
		"data_directory":          srv.DataDir,
		"statement_timeout":       "1234ms", // from Options.Settings
	} {
		assert.Equal(t, want, queryString(t, pool, "SELECT current_setting($1)", setting), setting)
	}
	assert.True(t, strings.HasPrefix(srv.DataDir, os.TempDir()), "a throwaway directory: %s", srv.DataDir)

	// A wrong password is refused: logins need the password in URL.
	bad := strings.Replace(srv.URL, "postgres://postgres:", "postgres://postgres:x", 1)
	_, err = pgx.Connect(t.Context(), bad)
	require.Error(t, err, "a wrong password is refused")

	require.NoError(t, srv.Close())
	assert.False(t, srv.Running())
	_, err = os.Stat(srv.DataDir)
	assert.True(t, errors.Is(err, os.ErrNotExist), "Close removes the data directory: %v", err)
	require.NoError(t, srv.Close(), "Close twice")
}

// createRows makes a table with the given rows, committed.
func createRows(t *testing.T, pool *pgxpool.Pool, values ...string) {
	t.Helper()
	_, err := pool.Exec(t.Context(), "CREATE TABLE IF NOT EXISTS rows (v text PRIMARY KEY)")
	require.NoError(t, err)
	for _, v := range values {
		_, err := pool.Exec(t.Context(), "INSERT INTO rows VALUES ($1)", v)
		require.NoError(t, err)
	}
}

// readRows reads the table back, connecting afresh.
func readRows(t *testing.T, url string) []string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), "SELECT v FROM rows ORDER BY v")
	require.NoError(t, err)
	vs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return vs
}

func TestStopThenStartKeepsDataAndAddress(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	createRows(t, srv.Pool(t), "kept")
	url := srv.URL

	require.NoError(t, srv.Stop())
	assert.False(t, srv.Running())
	_, err := pgx.Connect(t.Context(), url)
	require.Error(t, err, "nothing answers while stopped")
	require.NoError(t, srv.Stop(), "stopping a stopped server does nothing")
	require.NoError(t, srv.Kill(), "killing a stopped server does nothing")

	require.NoError(t, srv.Start(t.Context()))
	assert.True(t, srv.Running())
	assert.Equal(t, url, srv.URL, "same address and credentials")
	assert.Equal(t, []string{"kept"}, readRows(t, url))
	assert.Error(t, srv.Start(t.Context()), "starting a running server")

	log := srv.Output()
	assert.Contains(t, log, "received fast shutdown request")
	assert.NotContains(t, log, "automatic recovery", "a clean shutdown needs no recovery")
}

func TestKillThenStartRecoversCommittedRowsOnly(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	pool := srv.Pool(t)
	createRows(t, pool, "committed")
	// A transaction left open at the crash must be rolled back.
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), "INSERT INTO rows VALUES ('uncommitted')")
	require.NoError(t, err)

	require.NoError(t, srv.Kill())
	assert.False(t, srv.Running())
	_, err = pgx.Connect(t.Context(), srv.URL)
	require.Error(t, err, "nothing answers after Kill")
	_ = tx.Rollback(context.Background()) // its connection is gone

	require.NoError(t, srv.Start(t.Context()))
	assert.Equal(t, []string{"committed"}, readRows(t, srv.URL))
	assert.Contains(t, srv.Output(), "not properly shut down; automatic recovery in progress",
		"Kill is a crash, recovered from the write-ahead log")
}

func TestPauseHangsQueriesUntilResume(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	pool := srv.Pool(t)
	createRows(t, pool, "a")
	conn, err := pool.Acquire(t.Context()) // a session open before the pause
	require.NoError(t, err)
	defer conn.Release()

	require.NoError(t, srv.Pause())
	assert.True(t, srv.Running(), "a paused server still runs")
	for name, query := range map[string]func(context.Context) error{
		"open session": func(ctx context.Context) error {
			_, err := conn.Exec(ctx, "SELECT 1")
			return err
		},
		"new login": func(ctx context.Context) error {
			c, err := pgx.Connect(ctx, srv.URL)
			if err == nil {
				c.Close(context.Background())
			}
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		err := query(ctx)
		cancel()
		require.Error(t, err, "%s: a paused server does not answer", name)
	}

	require.NoError(t, srv.Resume())
	// The open session's cancelled query may have broken it: use the pool.
	assert.Equal(t, []string{"a"}, readRows(t, srv.URL), "answers again after Resume")
	assert.Equal(t, "1", queryString(t, pool, "SELECT '1'"))

	// Stop works on a paused server.
	require.NoError(t, srv.Pause())
	require.NoError(t, srv.Stop())
	assert.False(t, srv.Running())

	// A server left paused does not hang the cleanups of the test (its
	// databases' drops, its pools, its own Close).
	require.NoError(t, srv.Start(t.Context()))
	passed := t.Run("left paused", func(t *testing.T) {
		db := srv.CreateDatabase(t)
		createRows(t, db.Pool(t), "x")
		require.NoError(t, srv.Pause())
	})
	assert.True(t, passed)
	assert.True(t, srv.Running())
}

func TestDumpHoldsTheRowsOfItsDatabaseOnly(t *testing.T) {
	db := pgtest.NewDatabase(t)
	other := pgtest.NewDatabase(t)
	createRows(t, db.Pool(t), "canary-4f1d")
	createRows(t, other.Pool(t), "elsewhere")

	dump := db.Dump(t)
	assert.Contains(t, dump, "CREATE TABLE public.rows")
	assert.Contains(t, dump, "canary-4f1d", "the row written is in the dump")
	assert.NotContains(t, dump, "elsewhere", "the dump is of one database")
	assert.Contains(t, other.Dump(t), "elsewhere")
}

func TestNewDatabaseIsFreshAndDroppedAfterTheTest(t *testing.T) {
	var names []string
	for i := range 2 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			db := pgtest.NewDatabase(t)
			names = append(names, db.Name)
			pool := db.Pool(t)
			var tables int
			require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables))
			assert.Zero(t, tables, "a fresh database has no table")
			createRows(t, pool, "x")
		})
	}
	require.Len(t, names, 2)
	assert.NotEqual(t, names[0], names[1])

	srv := pgtest.Shared(t)
	assert.Same(t, srv, pgtest.Shared(t), "one shared server per test binary")
	var left int
	require.NoError(t, srv.Pool(t).QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names).Scan(&left))
	assert.Zero(t, left, "databases are dropped when their test ends")
}

func TestTwoServersRunAtOnce(t *testing.T) {
	srvs := make([]*pgtest.Server, 2)
	var wg sync.WaitGroup
	for i := range srvs {
		wg.Go(func() { srvs[i] = pgtest.Start(t, pgtest.Options{}) })
	}
	wg.Wait()
	a, b := srvs[0], srvs[1]
	require.NotNil(t, a)
	require.NotNil(t, b)
	assert.NotEqual(t, a.Addr, b.Addr)
	assert.NotEqual(t, a.DataDir, b.DataDir)

	createRows(t, a.Pool(t), "in-a")
	createRows(t, b.Pool(t), "in-b")
	assert.Equal(t, []string{"in-a"}, readRows(t, a.URL))
	assert.Equal(t, []string{"in-b"}, readRows(t, b.URL))

	// Stopping one leaves the other serving.
	require.NoError(t, a.Stop())
	assert.Equal(t, []string{"in-b"}, readRows(t, b.URL))
}

func TestLogIsShownOnlyWhenTheTestFails(t *testing.T) {
	for _, failed := range []bool{false, true} {
		t.Run(fmt.Sprint("failed=", failed), func(t *testing.T) {
			ft := &cleanupTB{TB: t, failed: failed}
			srv := pgtest.Start(ft, pgtest.Options{})
			u, err := url.Parse(srv.URL)
			require.NoError(t, err)
			password, _ := u.User.Password()
			ft.runCleanups()

			logged := strings.Join(ft.logs, "\n")
			if !failed {
				assert.Empty(t, logged, "a passing test's output is quiet")
				return
			}
			assert.Contains(t, logged, "database system is ready to accept connections", "the server's log, on failure")
			assert.Contains(t, logged, "received immediate shutdown request", "up to its end")
			assert.NotContains(t, logged, password)
			assert.NoDirExists(t, srv.DataDir, "removed after logging")
		})
	}
}

// cleanupTB runs its cleanups when told, records Logf, and reports the
// failure state it was given.
type cleanupTB struct {
	testing.TB
	failed   bool
	logs     []string
	cleanups []func()
}

func (c *cleanupTB) Helper()          {}
func (c *cleanupTB) Failed() bool     { return c.failed }
func (c *cleanupTB) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }
func (c *cleanupTB) Logf(format string, args ...any) {
	c.logs = append(c.logs, fmt.Sprintf(format, args...))
}

func (c *cleanupTB) runCleanups() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
}

func TestWithoutPostgreSQLSkipsOrFailsInCI(t *testing.T) {
	t.Setenv(pgtest.EnvBinDir, filepath.Join(t.TempDir(), "no-postgres"))
	testkit.CheckUnavailable(t, func(tb testing.TB) { pgtest.Start(tb, pgtest.Options{}) },
		"scripts/devpostgres.sh", "no executable initdb")

	_, err := pgtest.StartServer(t.Context(), pgtest.Options{})
	assert.ErrorIs(t, err, pgtest.ErrUnavailable)
}
