package pgstate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// Defaults of Options; the doc comment of each field states its value.
const (
	defaultSchema      = "edgesecrets_delivery"
	defaultLeasePeriod = 30 * time.Second
	defaultTimeout     = 10 * time.Second
)

// Options configure Open. URL is required.
type Options struct {
	// URL is the PostgreSQL connection string (postgres://… or key=value
	// form, as pgx reads it). It holds a password: it is never logged or
	// put in an error.
	URL string
	// Schema is the PostgreSQL schema holding the tables, created when
	// missing; empty means "edgesecrets_delivery". Agbots that share the work use
	// the same database and schema.
	Schema string
	// LeasePeriod is how long a heartbeat keeps a member live; zero means
	// 30 seconds. A member that stops heartbeating loses its
	// claims and names one LeasePeriod after its last heartbeat.
	LeasePeriod time.Duration
	// Timeout bounds each call to the database, retries included; zero
	// means 10 seconds. A call that runs out of it (a hung server)
	// fails with state.ErrStateUnavailable.
	Timeout time.Duration
	// MaxConns bounds the connection pool; zero means pgx's default
	// (the larger of 4 and the number of CPUs).
	MaxConns int32
	// Logger receives migrations, joins and connection trouble, naming
	// members and agreements, never values or the URL. Nil discards.
	Logger *slog.Logger
}

// State is a state.Backend on PostgreSQL that several engines (agbots)
// share: also a state.Membership and a state.SharedReview. See the package
// documentation.
type State struct {
	pool    *pgxpool.Pool
	schema  string
	q       queries
	period  time.Duration
	timeout time.Duration
	log     *slog.Logger
	closed  atomic.Bool
	// stopBackfill ends the backfill, and backfilled is closed once it
	// ended.
	stopBackfill context.CancelFunc
	backfilled   chan struct{}

	mu           sync.Mutex
	incarnations map[string]uint64    // members joined through this State
	names        map[string]namesRead // each member's last Names read
	namesReads   atomic.Int64         // Names calls that read the names (the tests count them)
	services     servicesCache
	observed     observationsCache
	reviewBufs   sync.Pool // of *[]state.Record, ReviewNext's claims
}

var (
	_ state.Backend      = (*State)(nil)
	_ state.Membership   = (*State)(nil)
	_ state.SharedReview = (*State)(nil)
)

// Open connects to the database, applies the schema's migrations, and
// returns the State, a state.Backend for delivery.Options.State, and the
// hub's identity records kept in the same database and schema (an
// identity.CertStore), so that every agbot sharing the database verifies
// every agent, and an agent registers once whichever agbot it reaches.
// The State is also a state.Membership and a state.SharedReview:
// delivery.New finds them by type assertion and joins, heartbeats and
// leaves by itself. An unreachable database fails with an error matching
// state.ErrStateUnavailable: the agbot may retry. A schema made by a
// newer agbot fails with ErrSchemaNewer; an Options.Schema that
// PostgreSQL text cannot hold, with an error matching
// edgesecrets.ErrInvalid.
//
// Close of the State closes the connection pool. Later calls of either
// fail (the State's with state.ErrStateUnavailable, the CertStore's
// with edgesecrets.ErrUnavailable). It does not leave: members joined
// through the State stay live until their heartbeats lapse (call Leave
// first for an orderly stop).
func Open(ctx context.Context, opts Options) (*State, identity.CertStore, error) {
	s, err := open(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	return s, &certStore{s: s, q: newCertQueries(pgx.Identifier{s.schema}.Sanitize())}, nil
}

// open is Open without the CertStore.
func open(ctx context.Context, opts Options) (*State, error) {
	if opts.URL == "" {
		return nil, errors.New("pgstate: Options.URL is required")
	}
	if opts.LeasePeriod < 0 || opts.Timeout < 0 || opts.MaxConns < 0 {
		return nil, fmt.Errorf("pgstate: negative LeasePeriod (%s), Timeout (%s) or MaxConns (%d)", opts.LeasePeriod, opts.Timeout, opts.MaxConns)
	}
	s := &State{
		schema:       cmp.Or(opts.Schema, defaultSchema),
		period:       cmp.Or(opts.LeasePeriod, defaultLeasePeriod),
		timeout:      cmp.Or(opts.Timeout, defaultTimeout),
		log:          opts.Logger,
		incarnations: map[string]uint64{},
		names:        map[string]namesRead{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	c := &checker{what: "Options.Schema"}
	if c.check("schema", s.schema); c.err != nil {
		return nil, c.err
	}
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		// pgx's parse errors quote the string, password included.
		return nil, errors.New("pgstate: Options.URL is not a valid PostgreSQL connection string")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.ConnConfig.ConnectTimeout = s.timeout
	cfg.ShouldPing = shouldPing
	s.q = newQueries(pgx.Identifier{s.schema}.Sanitize())
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errors.New("pgstate: Options.URL is not a valid PostgreSQL connection string")
	}
	var version int
	err = s.call(ctx, op{what: "migrating the schema", rerun: true}, func(ctx context.Context) error {
		return s.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
			var err error
			version, err = migrate(ctx, c.Conn(), s.schema)
			return err
		})
	})
	if err != nil {
		s.pool.Close()
		return nil, err
	}
	s.log.Info("delivery state on PostgreSQL ready", slog.String("schema", s.schema), slog.Int("version", version),
		slog.Duration("lease_period", s.period))
	bctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopBackfill, s.backfilled = stop, make(chan struct{})
	go func() {
		defer close(s.backfilled)
		s.backfill(bctx)
	}()
	return s, nil
}

// backfillPage is how many records one statement of the backfill writes.
const backfillPage = 500

// backfill stores the binary body of the records that have none (written
// before schema version 5, or since by an agbot of version 4), a page at
// a time, until none is left, the State closes or a statement fails (the
// next Open goes on): until then they are read from their JSON body,
// which costs more. A record written meanwhile is left to its writer.
func (s *State) backfill(ctx context.Context) {
	after, total := "", 0
	for ctx.Err() == nil {
		var (
			ids       []string
			revisions []int64
			bins      [][]byte
		)
		rows, err := s.pool.Query(ctx, s.q.withoutBin, after, backfillPage)
		if err != nil {
			s.log.Warn("pgstate: the backfill of binary bodies stopped; the next Open goes on", slog.String("err", err.Error()))
			return
		}
		n := 0
		for rows.Next() {
			n++
			var (
				r        state.Record
				revision int64
				data     []byte
			)
			if err := rows.Scan(&r.ID, &revision, &data); err != nil {
				break
			}
			after = r.ID
			if err := decodeBody(&r, data); err != nil {
				s.log.Warn("pgstate: a record's JSON body does not decode; left as it is", slog.String("agreement", r.ID), slog.String("err", err.Error()))
				continue
			}
			ids, revisions, bins = append(ids, r.ID), append(revisions, revision), append(bins, encodeBodyBin(&r))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			s.log.Warn("pgstate: the backfill of binary bodies stopped; the next Open goes on", slog.String("err", err.Error()))
			return
		}
		if len(ids) > 0 {
			tag, err := s.pool.Exec(ctx, s.q.putBin, ids, revisions, bins)
			if err != nil {
				s.log.Warn("pgstate: the backfill of binary bodies stopped; the next Open goes on", slog.String("err", err.Error()))
				return
			}
			total += int(tag.RowsAffected())
		}
		if n < backfillPage {
			break
		}
	}
	if total > 0 {
		s.log.Info("pgstate: records given their binary body", slog.Int("records", total))
	}
}

// Close implements state.Backend; see Open.
func (s *State) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.stopBackfill()
		<-s.backfilled
		s.pool.Close()
	}
	return nil
}

// unavailableError is a call the database did not answer. It matches
// state.ErrStateUnavailable.
type unavailableError struct {
	op    string
	cause error
}

func (e *unavailableError) Error() string {
	return "pgstate: " + e.op + ": " + state.ErrStateUnavailable.Error() + ": " + e.cause.Error()
}

func (e *unavailableError) Unwrap() []error { return []error{state.ErrStateUnavailable, e.cause} }

// leaseLostError is a call refused because the member is not live. It
// matches state.ErrLeaseLost.
type leaseLostError struct {
	op, member string
}

func (e *leaseLostError) Error() string {
	return fmt.Sprintf("pgstate: %s: %v: member %q is not live (its heartbeat lapsed, it left, or another process joined under its id); it must join again", e.op, state.ErrLeaseLost, e.member)
}

func (e *leaseLostError) Is(target error) bool { return target == state.ErrLeaseLost }

// failure says what to do about an error of the database.
type failure uint8

const (
	// answer: the database answered with an error about the statement.
	answer failure = iota
	// lost: fence refused the member.
	lost
	// again: a serialization failure or deadlock: run the call again.
	again
	// dropped: the session ended before the statement ran (the server
	// shutting down, a connection that could not be made or used): run
	// it again on a fresh connection.
	dropped
	// unknown: the connection failed while the statement may have run:
	// the call's outcome is unknown.
	unknown
)

func classify(err error) failure {
	var (
		pgErr   *pgconn.PgError
		bad     *corruptError
		scanErr pgx.ScanArgError
		lapsed  *leaseLostError
	)
	if errors.As(err, &bad) || errors.As(err, &scanErr) || errors.Is(err, ErrSchemaNewer) {
		return answer
	}
	if errors.As(err, &lapsed) {
		return lost // a statement's own fence
	}
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == leaseLostCode:
			return lost
		case code == "40001" || code == "40P01":
			return again
		case strings.HasPrefix(code, "08"), code == "57P01", code == "57P02", code == "57P03", code == "53300":
			// Connection exceptions, administrator or crash shutdown,
			// the server starting, too many connections: the session
			// ended, and its transaction with it.
			return dropped
		}
		return answer
	}
	if pgconn.SafeToRetry(err) {
		return dropped
	}
	return unknown
}

// pingIdle: a connection idle for longer is pinged before use, whatever
// its socket shows (see shouldPing).
const pingIdle = 100 * time.Millisecond

// shouldPing decides, for every connection the pool hands out (so for
// every call of the State), whether to ping it first. A session that
// ended while the connection sat in the pool (a server restarted, however
// quickly it came back; an administrator ending sessions) leaves it dead,
// and a statement sent on it fails without telling whether it ran: a
// write to a socket whose peer closed it succeeds, the read after it
// finds the end of the stream. Such a connection shows it before any
// byte is sent: its socket has the end of the stream, the server's FATAL
// message or a reset to read (quiet). It is pinged, the ping fails, and
// the pool drops it and hands out another connection, a fresh one once
// the dead are gone: the call runs on a live session and the server sees
// it once. A connection that is quiet is used as it is, without a round
// trip, unless it sat idle longer than pingIdle: a connection the
// network lost says nothing, and a ping finds it before a statement whose
// outcome would then be unknown.
func shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	return p.IdleDuration > pingIdle || !quiet(p.Conn.PgConn().Conn())
}

// maxTries bounds the tries of one call.
const maxTries = 3

// op describes one call to the database.
type op struct {
	// what the call does, for errors.
	what string
	// member the call is made for, for errors; empty when none.
	member string
	// rerun: running the call twice does what running it once does
	// (reads, upserts, deletes), so it is run again even when a broken
	// connection leaves unknown whether the first run took effect.
	rerun bool
}

// call runs fn, one statement or transaction, within the State's timeout.
// It runs it again when the database certainly did not run it (a
// serialization failure, a session the server ended, a connection that
// could not be used), or when o.rerun and a connection broke under it,
// and it resets the pool after connection trouble so that no broken
// connection is handed out again. Errors: the caller's context error when
// it ended; ErrStateUnavailable when the database did not answer (also
// after Close); ErrLeaseLost when fence refused the member.
func (s *State) call(ctx context.Context, o op, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return &unavailableError{op: o.what, cause: errors.New("the state is closed")}
	}
	deadline, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for try := 1; ; try++ {
		err := fn(deadline)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if deadline.Err() != nil {
			s.pool.Reset()
			return &unavailableError{op: o.what, cause: fmt.Errorf("no answer within %s", s.timeout)}
		}
		if s.closed.Load() {
			return &unavailableError{op: o.what, cause: errors.New("the state is closed")}
		}
		switch classify(err) {
		case answer:
			return fmt.Errorf("pgstate: %s: %w", o.what, err)
		case lost:
			return &leaseLostError{op: o.what, member: o.member}
		case again:
			if try < maxTries {
				continue
			}
			return fmt.Errorf("pgstate: %s: %w", o.what, err)
		case dropped:
			s.pool.Reset()
			if try < maxTries {
				continue
			}
			return &unavailableError{op: o.what, cause: err}
		default:
			s.pool.Reset()
			if o.rerun && try < maxTries {
				continue
			}
			s.log.Warn("PostgreSQL connection failed during a call; its outcome is unknown",
				slog.String("call", o.what), slog.String("err", err.Error()))
			return &unavailableError{op: o.what, cause: err}
		}
	}
}

// incarnation returns the incarnation under which member joined through
// this State, or 0 when it did not.
func (s *State) incarnation(member string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.incarnations[member]
}

// joined returns member's incarnation, or a lease-lost error when member
// never joined through this State: names and observations are shares of
// live members.
func (s *State) joined(o op) (uint64, error) {
	inc := s.incarnation(o.member)
	if inc == 0 {
		return 0, &leaseLostError{op: o.what, member: o.member}
	}
	return inc, nil
}

// micro truncates t to PostgreSQL's precision, microseconds; the zero
// time is NULL.
func micro(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.Truncate(time.Microsecond)
	return &t
}

// fromDB is a timestamptz read back: UTC, the zero time for NULL.
func fromDB(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
