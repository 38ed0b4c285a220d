// Package pgtest starts real PostgreSQL servers for tests: throwaway
// clusters of the server from Debian's packages, which scripts/devpostgres.sh
// installs when it is missing.
//
// A server runs from a copy of a template cluster, made once with initdb and
// cached where devvault.sh caches the Vault binary (~/.cache/edgesecrets),
// in a temporary directory of its own. It listens on 127.0.0.1 at a free
// port and on no Unix socket, takes password (SCRAM) logins only, and keeps
// fsync on: tests of crash safety kill it. It runs as the current user or,
// under root (PostgreSQL refuses to run as root), as the system user that
// scripts/devpostgres.sh creates. It is stopped by PID when its test (or,
// for the shared server, the test binary) ends, and its log is kept out of
// the test output unless the test fails.
//
// Use NewDatabase for ordinary tests (a fresh database on a server that the
// test binary shares) and Start for tests that stop, kill or pause their
// server. Tests that Kill a server must not run on the shared one.
//
// Without PostgreSQL, tests skip with a message saying how to get it; in CI
// (CI=true) they fail instead.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// EnvBinDir names the environment variable holding the directory of the
// PostgreSQL programs (initdb, postgres, pg_dump). Unset, pgtest uses the
// newest /usr/lib/postgresql/*/bin.
const EnvBinDir = "EDGESECRETS_POSTGRES_BIN"

// EnvUser names the environment variable holding the user that servers run
// as when the tests run as root; DefaultUser when unset.
const EnvUser = "EDGESECRETS_POSTGRES_USER"

// DefaultUser is the system user scripts/devpostgres.sh creates for servers
// started by root.
const DefaultUser = "edgesecrets-pg"

// HowToGet tells a developer how to make the PostgreSQL tests run.
const HowToGet = "run `bash scripts/test.sh`, or `export " + EnvBinDir + "=$(scripts/devpostgres.sh)` then go test"

// ErrUnavailable is wrapped by StartServer's error when this machine has no
// PostgreSQL server to run (or, under root, no user to run it as).
var ErrUnavailable = errors.New("no PostgreSQL server available")

// superuser is the role initdb creates and every URL logs in as.
const superuser = "postgres"

// adminDatabase is the database initdb creates, a Server's default one.
const adminDatabase = "postgres"

const (
	// startTimeout bounds a start, crash recovery included. Generous: a
	// loaded 2-core machine is slow.
	startTimeout = 2 * time.Minute
	// stopTimeout bounds a fast shutdown before the server is killed.
	stopTimeout = time.Minute
	// adminTimeout bounds creating and dropping a database, and a dump.
	adminTimeout = time.Minute
)

// baseSettings are the server settings pgtest starts every server with,
// before Options.Settings.
var baseSettings = map[string]string{
	"listen_addresses":        "127.0.0.1",
	"unix_socket_directories": "", // no socket, in /var/run or anywhere
	// Crash safety as in production: tests kill the server.
	"fsync":              "on",
	"synchronous_commit": "on",
	"full_page_writes":   "on",
	// Less to write and to start: no replication, small memory, no JIT.
	"wal_level":       "minimal",
	"max_wal_senders": "0",
	"shared_buffers":  "16MB",
	"huge_pages":      "off",
	"jit":             "off",
}

// Options select how a server starts.
type Options struct {
	// Settings are extra server settings (postgresql.conf names and
	// values), given on the postgres command line after pgtest's own.
	Settings map[string]string
}

// Database is one database of a Server.
type Database struct {
	// Name is the database's name.
	Name string
	// URL is its connection string, postgres://...@127.0.0.1:<port>/<name>,
	// logging in as the superuser with a password. Never log it.
	URL string

	srv *Server
}

// Server is a PostgreSQL server on a throwaway data directory. Its
// embedded Database is the default database, "postgres". Its methods are
// safe for concurrent use.
type Server struct {
	Database
	// Addr is the address it listens on, 127.0.0.1:<port>; the same across
	// Stop and Start.
	Addr string
	// DataDir is the data directory.
	DataDir string

	inst     *installation
	dir      string // holds DataDir and the log; removed by Close
	logPath  string
	password string
	args     []string // of postgres, the same at every start
	dbs      atomic.Int64

	mu     sync.Mutex
	proc   *testkit.Process // nil while stopped
	paused bool
	closed bool
}

// Start starts a dedicated server and stops it (and removes its files)
// when t ends. Without PostgreSQL it skips t, or fails it in CI. On test
// failure the server's log is logged.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := StartServer(context.Background(), opts)
	if err != nil {
		fatalOrSkip(t, err)
	}
	t.Cleanup(func() {
		// Shut down, show the log, then remove it with the rest.
		if err := s.halt(); err != nil {
			t.Errorf("pgtest: shutting down the server at %s: %v", s.Addr, err)
		}
		if t.Failed() {
			t.Logf("pgtest: log of the PostgreSQL server at %s:\n%s", s.Addr, s.Output())
		}
		if err := s.Close(); err != nil {
			t.Errorf("pgtest: closing the server at %s: %v", s.Addr, err)
		}
	})
	return s
}

// fatalOrSkip ends t for a StartServer error: a skip when PostgreSQL is
// unavailable outside CI, a failure otherwise.
func fatalOrSkip(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("pgtest: %v", err)
	}
	testkit.Unavailable(t, fmt.Sprintf("pgtest: %v; to run the PostgreSQL tests, %s", err, HowToGet))
}

// StartServer starts a server and waits until it accepts connections. The
// caller must Close it. Its error wraps ErrUnavailable when this machine
// cannot run PostgreSQL.
func StartServer(ctx context.Context, opts Options) (*Server, error) {
	inst, err := locate()
	if err != nil {
		return nil, err
	}
	tp, err := templateFor(ctx, inst)
	if err != nil {
		return nil, fmt.Errorf("template cluster: %w", err)
	}
	dir, err := inst.mkdirTemp("pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		DataDir:  filepath.Join(dir, "data"),
		inst:     inst,
		dir:      dir,
		logPath:  filepath.Join(dir, "postgres.log"),
		password: tp.password,
	}
	settings := maps.Clone(baseSettings)
	if tp.major >= 14 {
		// After a crash, one syncfs of the file system instead of an
		// fsync of every file: three times faster here (BenchmarkRestart/Kill).
		settings["recovery_init_sync_method"] = "syncfs"
	}
	maps.Copy(settings, opts.Settings)
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		s.args = append(s.args, "-c", name+"="+settings[name])
	}
	if err := copyTree(tp.dataDir, s.DataDir, inst.owner, false); err != nil {
		return nil, errors.Join(fmt.Errorf("copying the template cluster: %w", err), os.RemoveAll(dir))
	}
	// Another process may take the free port before the server binds it:
	// then try another.
	_, err = testkit.RetryPortTaken(func() (struct{}, error) {
		if err := s.listenOnFreePort(); err != nil {
			return struct{}{}, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return struct{}{}, s.launch(ctx)
	})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return s, nil
}

// listenOnFreePort points the server at a free loopback port.
func (s *Server) listenOnFreePort() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.Addr = l.Addr().String()
	if err := l.Close(); err != nil {
		return err
	}
	s.Database = *s.database(adminDatabase)
	return nil
}

// database describes the database name of s.
func (s *Server) database(name string) *Database {
	u := fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", superuser, s.password, s.Addr, name)
	return &Database{Name: name, URL: u, srv: s}
}

// launch starts the postmaster and waits until it accepts connections.
// s.mu is held.
func (s *Server) launch(ctx context.Context) error {
	if s.closed {
		return errors.New("pgtest: server closed")
	}
	if s.proc != nil && s.proc.Running() {
		return errors.New("pgtest: server already running")
	}
	logFile, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// The child has its own copy; this one only seeks.
	defer func() { _ = logFile.Close() }()
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	args := append([]string{"-D", s.DataDir, "-p", port}, s.args...)
	// Not inst.command's context: the server outlives this call.
	cmd := s.inst.command(context.Background(), "postgres", args...)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	p, err := testkit.StartProcess(cmd)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	s.proc, s.paused = p, false
	if err := s.waitReady(ctx, p); err != nil {
		_ = s.killLocked()
		return testkit.NotReady("postgres on "+s.Addr, err, s.logSince(logStart))
	}
	return nil
}

// waitReady waits until the postmaster says it is ready (after crash
// recovery, if any) and accepts a login.
func (s *Server) waitReady(ctx context.Context, p *testkit.Process) error {
	cfg, err := pgx.ParseConfig(s.URL)
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = 5 * time.Second
	return p.WaitReady(ctx, startTimeout, 20*time.Millisecond, func(ctx context.Context) error {
		// Logging in only once it is ready keeps "the database system is
		// starting up" out of the log.
		if err := s.pidFileReady(p.Cmd.Process.Pid); err != nil {
			return err
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
}

// pidFileReady reports, as pg_ctl reads it, whether the data directory's
// postmaster.pid names the postmaster pid and its status line says
// "ready": its lines are the PID, the data directory, the start time, the
// port, the socket directory, the listen address, the shared memory key
// and the status.
func (s *Server) pidFileReady(pid int) error {
	b, err := os.ReadFile(filepath.Join(s.DataDir, "postmaster.pid"))
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[0]) != strconv.Itoa(pid) {
		return errors.New("postmaster.pid not written yet")
	}
	if status := strings.TrimSpace(lines[7]); status != "ready" {
		return fmt.Errorf("postmaster status %q", status)
	}
	return nil
}

// Start starts the server again on its data directory and address after
// Stop or Kill, and waits until it accepts connections (after crash
// recovery, following Kill).
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.launch(ctx)
}

// Stop shuts the server down as an administrator would (a fast shutdown:
// sessions are ended, data checkpointed) and waits until it has exited. Its
// data stays for Start. Stopping a stopped server does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutdownLocked(fastShutdown)
}

// shutdownLocked shuts the server down in mode, killing it if it has not
// exited in stopTimeout. s.mu is held.
func (s *Server) shutdownLocked(mode syscall.Signal) error {
	p := s.proc
	if p == nil || !p.Running() {
		s.proc, s.paused = nil, false
		return nil
	}
	if err := shutdown(p.Cmd.Process.Pid, mode); err != nil {
		return errors.Join(fmt.Errorf("pgtest: signalling postgres: %w", err), s.killLocked())
	}
	select {
	case <-p.Exited():
		s.proc, s.paused = nil, false
		return nil
	case <-time.After(stopTimeout):
		return errors.Join(fmt.Errorf("pgtest: postgres did not stop within %v; killed", stopTimeout), s.killLocked())
	}
}

// Kill kills the server and all its processes at once (SIGKILL), as a
// crash would, and waits until none runs. The next Start recovers from the
// write-ahead log. Killing a stopped server does nothing.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked()
}

func (s *Server) killLocked() error {
	p := s.proc
	if p == nil || !p.Running() {
		s.proc, s.paused = nil, false
		return nil
	}
	err := killTree(p.Cmd.Process.Pid)
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		return errors.Join(err, errors.New("pgtest: postgres did not exit after SIGKILL"))
	}
	s.proc, s.paused = nil, false
	return err
}

// Pause freezes the server's processes (SIGSTOP), as a hung server: the
// kernel still accepts connections on its port, but nothing answers, and
// running queries hang. It returns once every process is stopped. Resume
// undoes it; Stop, Kill and Close work on a paused server too.
func (s *Server) Pause() error { return s.setPaused(true) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.setPaused(false) }

func (s *Server) setPaused(paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || !s.proc.Running() {
		return errors.New("pgtest: pausing or resuming a server that is not running")
	}
	s.paused = paused
	if paused {
		return pauseTree(s.proc.Cmd.Process.Pid)
	}
	return resumeTree(s.proc.Cmd.Process.Pid)
}

// Running reports whether the server process runs (paused or not).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.proc.Running()
}

// Close shuts the server down at once (an immediate shutdown, without a
// checkpoint) and removes its directory, data and log. Later calls do
// nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.shutdownLocked(immediateShutdown)
	return errors.Join(err, os.RemoveAll(s.dir))
}

// halt shuts the server down at once, keeping its files.
func (s *Server) halt() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutdownLocked(immediateShutdown)
}

// CPUTime returns the CPU time the running server has used so far: its
// postmaster's and every process of it, those that ended included (the
// database's side of a benchmark: take it before and after). It has a
// resolution of 10 ms. Linux only.
func (s *Server) CPUTime() (time.Duration, error) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || !p.Running() {
		return 0, errors.New("pgtest: the server is not running")
	}
	return treeCPU(p.Cmd.Process.Pid)
}

// Server returns the server d is a database of.
func (d *Database) Server() *Server { return d.srv }

// Output returns the server's log so far (its last MiB): what the
// postmaster and its processes wrote to stderr.
func (s *Server) Output() string { return s.logSince(0) }

func (s *Server) logSince(offset int64) string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer func() { _ = f.Close() }() // read-only
	const max = 1 << 20
	if end, err := f.Seek(0, io.SeekEnd); err == nil && end-offset > max {
		offset = end - max
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	return string(b)
}

// CreateDatabase creates a fresh, empty database on the server and drops
// it when t ends (if the server is running then).
func (s *Server) CreateDatabase(t testing.TB) *Database {
	t.Helper()
	db := s.database(fmt.Sprintf("test_%d", s.dbs.Add(1)))
	if err := s.exec("CREATE DATABASE " + db.Name); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", db.Name, err)
	}
	t.Cleanup(func() {
		if !s.answering() {
			return // a stopped or paused server is the test's own, going away
		}
		// FORCE ends the sessions a test left open.
		if err := s.exec("DROP DATABASE " + db.Name + " WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", db.Name, err)
		}
	})
	return db
}

// answering reports whether the server runs and is not paused.
func (s *Server) answering() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.proc.Running() && !s.paused
}

// exec runs one statement in the default database.
func (s *Server) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	// The statement's result is what counts; closing only ends the session.
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, sql)
	return err
}

// Pool opens a pgx connection pool on the database, closed when t ends.
func (d *Database) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), d.URL)
	if err != nil {
		t.Fatalf("pgtest: opening a pool on %s: %v", d.Name, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Dump returns the database as pg_dump writes it (plain SQL: the schema
// and every row), for scans of what reached the database.
func (d *Database) Dump(t testing.TB) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(d.srv.Addr)
	// The password goes through the environment, not the command line (ps).
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.srv.inst.program("pg_dump"),
		"--host="+host, "--port="+port, "--username="+superuser, "--no-password", "--dbname="+d.Name)
	cmd.Env = append(cleanEnv(), "PGPASSWORD="+d.srv.password)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pgtest: pg_dump of %s: %v\n%s", d.Name, err, stderr.String())
	}
	return string(out)
}

// shared is the one server per test binary that Shared hands out.
var shared struct {
	mu   sync.Mutex
	srv  *Server
	main atomic.Bool // Main is running the tests
}

// Shared returns the test binary's shared server, starting it on first
// use. Call Main from TestMain: it closes the server when the tests end.
// Tests sharing the server must not stop, kill or pause it, and should
// work in a database of their own (NewDatabase).
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil {
		if !shared.main.Load() {
			// Checked after availability, so that a machine without
			// PostgreSQL still skips.
			if _, err := locate(); err != nil {
				fatalOrSkip(t, err)
			}
			t.Fatalf("pgtest: the shared server needs `func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }` to be closed")
		}
		srv, err := StartServer(context.Background(), Options{})
		if err != nil {
			fatalOrSkip(t, err)
		}
		shared.srv = srv
	}
	srv := shared.srv
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgtest: log of the shared PostgreSQL server at %s:\n%s", srv.Addr, srv.Output())
		}
	})
	return srv
}

// NewDatabase returns a fresh database on the shared server (see Shared),
// dropped when t ends.
func NewDatabase(t testing.TB) *Database {
	t.Helper()
	return Shared(t).CreateDatabase(t)
}

// Main runs the tests, then closes the shared server if one was started.
// Use it as
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int {
	shared.main.Store(true)
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		if err := shared.srv.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: closing the shared server: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		shared.srv = nil
	}
	return code
}
