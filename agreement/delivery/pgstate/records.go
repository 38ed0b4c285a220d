package pgstate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// scanClaimed scans a row of pre's columns and a record's whose record
// columns are all null when the statement had no record to give (the row
// of a LEFT JOIN that carries pre alone): ok is false then, and only pre
// is scanned. services says whose the record's Services are, as for
// scanRecord.
func (s *State) scanClaimed(rows pgx.Rows, services servicesUse, pre ...any) (r state.Record, ok bool, err error) {
	if rows.RawValues()[len(pre)] == nil {
		return r, false, rows.Scan(append(pre, make([]any, recordColumnCount)...)...)
	}
	r, err = s.scanRecord(rows, services, pre...)
	return r, err == nil, err
}

// scanRecord reads a row of recordColumns, after any columns in pre.
func (s *State) scanRecord(row pgx.Row, services servicesUse, pre ...any) (state.Record, error) {
	// The columns are scanned into one value (Scan's pointers make it
	// escape) rather than into the record: a record escaping each row was
	// a sixth of what an idle interval's review allocates.
	var (
		r    state.Record
		cols struct {
			id, node           string
			revision, attempts int64
			next               *time.Time
			// The encoded columns are decoded into values of their own
			// (the decoders copy what they keep) before the next row is
			// read, so a Rows lends its buffer (pgtype.DriverBytes)
			// instead of a copy of each; a QueryRow's Scan closes it
			// before returning, so it gets copies.
			services, bin, data pgtype.DriverBytes
		}
	)
	raw := []any{&cols.services, &cols.bin, &cols.data}
	if _, ok := row.(pgx.Rows); !ok {
		raw = []any{(*[]byte)(&cols.services), (*[]byte)(&cols.bin), (*[]byte)(&cols.data)}
	}
	if err := row.Scan(append(pre, &cols.id, &cols.node, &cols.revision, &cols.next, &cols.attempts, raw[0], raw[1], raw[2])...); err != nil {
		return r, err
	}
	r.ID, r.Node = cols.id, cols.node
	var err error
	if cols.bin != nil {
		err = decodeBodyBin(&r, cols.bin)
	} else {
		err = decodeBody(&r, cols.data)
	}
	if err != nil {
		return r, corrupt(r.ID, "body", err)
	}
	// The columns, after the body: MarkDue changes them alone.
	r.Revision, r.NextAttempt, r.Attempts = uint64(cols.revision), fromDB(cols.next), int(cols.attempts)
	if r.Services, err = s.services.decode(cols.services, services); err != nil {
		return r, corrupt(r.ID, "services", err)
	}
	return r, nil
}

// corruptError is a stored record that does not decode: written by
// something else, or changed by hand.
type corruptError struct {
	id, part string
	err      error
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("pgstate: the stored %s of record %q does not decode: %v", e.part, e.id, e.err)
}

func corrupt(id, part string, err error) error { return &corruptError{id: id, part: part, err: err} }

// encodeRecord checks the record's text fields and encodes its services,
// the store names they bind and its body (JSON and binary), for Create and
// Rebind.
func encodeRecord(rec *state.Record) (services []byte, names []string, data, bin []byte, err error) {
	c := &checker{what: "record " + quote(rec.ID)}
	c.check("id", rec.ID)
	c.check("node", rec.Node)
	if c.err != nil {
		return nil, nil, nil, nil, c.err
	}
	if services, names, err = encodeServices(rec.ID, rec.Services); err != nil {
		return nil, nil, nil, nil, err
	}
	if data, err = encodeBody(rec); err != nil {
		return nil, nil, nil, nil, err
	}
	return services, names, data, encodeBodyBin(rec), nil
}

// Create implements state.Backend.
func (s *State) Create(ctx context.Context, rec *state.Record) error {
	services, names, data, bin, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	var created int
	err = s.call(ctx, op{what: "creating record " + quote(rec.ID)}, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.q.create, rec.ID, rec.Node, micro(rec.NextAttempt), int64(rec.Attempts), services, data, names, bin).Scan(&created)
	})
	if err != nil {
		return err
	}
	if created == 0 {
		return state.ErrExists
	}
	rec.Revision = 1
	return nil
}

func quote(id string) string { return fmt.Sprintf("%q", id) }

// Get implements state.Backend.
func (s *State) Get(ctx context.Context, id string) (state.Record, error) {
	var r state.Record
	var missing bool
	err := s.call(ctx, op{what: "reading record " + quote(id), rerun: true}, func(ctx context.Context) error {
		var err error
		r, err = s.scanRecord(s.pool.QueryRow(ctx, s.q.get, id), ownServices)
		missing = errors.Is(err, pgx.ErrNoRows)
		if missing {
			return nil
		}
		return err
	})
	if err == nil && missing {
		err = state.ErrNotFound
	}
	return r, err
}

// Update implements state.Backend. The records are stored in one
// statement; a record is stored when its Revision is the stored one and
// the member may write it: nobody else holds a valid claim on it, and the
// member does not write under a claim of its own that lapsed. Storing a
// record releases the member's claim. A member that joined and is no
// longer live stores nothing (state.ErrLeaseLost).
func (s *State) Update(ctx context.Context, member string, recs ...*state.Record) error {
	if len(recs) == 0 {
		return ctx.Err()
	}
	n := len(recs)
	var (
		ids       = make([]string, 0, n)
		revisions = make([]int64, 0, n)
		nodes     = make([]string, 0, n)
		nexts     = make([]*time.Time, 0, n)
		attempts  = make([]int64, 0, n)
		bodies    = make([]string, 0, n)
		bins      = make([][]byte, 0, n)
		byID      = make(map[string]*state.Record, n)
		conflicts []string
	)
	for _, r := range recs {
		if _, twice := byID[r.ID]; twice {
			// The first copy is stored; the second one is of a revision
			// that is then no longer the stored one.
			conflicts = append(conflicts, r.ID)
			continue
		}
		c := &checker{what: "record " + quote(r.ID)}
		c.check("id", r.ID)
		c.check("node", r.Node)
		if c.err != nil {
			return c.err
		}
		data, err := encodeBody(r)
		if err != nil {
			return err
		}
		byID[r.ID] = r
		ids = append(ids, r.ID)
		revisions = append(revisions, int64(r.Revision))
		nodes = append(nodes, r.Node)
		nexts = append(nexts, micro(r.NextAttempt))
		attempts = append(attempts, int64(r.Attempts))
		bodies = append(bodies, string(data))
		bins = append(bins, encodeBodyBin(r))
	}
	o := op{what: "updating " + countOf(len(ids), "record"), member: member}
	stored, err := s.fencedStrings(ctx, o, s.incarnation(member), s.q.update, ids, revisions, nodes, nexts, attempts, bodies, member, bins)
	if err != nil {
		return err
	}
	for _, id := range stored {
		byID[id].Revision++
	}
	if conflicts = append(conflicts, missing(ids, stored)...); len(conflicts) > 0 {
		return &state.ConflictError{IDs: conflicts}
	}
	return nil
}

// Rebind implements state.Backend: Update of one record that also
// stores its services and replaces the store names it binds, in one
// statement behind the same fence and lease rule.
func (s *State) Rebind(ctx context.Context, member string, rec *state.Record) error {
	services, names, data, bin, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	o := op{what: "rebinding record " + quote(rec.ID), member: member}
	stored, err := s.fencedStrings(ctx, o, s.incarnation(member), s.q.rebind,
		rec.ID, int64(rec.Revision), rec.Node, micro(rec.NextAttempt), int64(rec.Attempts), string(services), string(data), names, member, bin)
	if err != nil {
		return err
	}
	if len(stored) == 0 {
		return &state.ConflictError{IDs: []string{rec.ID}}
	}
	rec.Revision++
	return nil
}

// fenced runs the statements queue adds in one transaction, after fence
// when member joined through this State (inc > 0), so that nothing is
// written once its membership lapsed. queue is called again for a retry.
func (s *State) fenced(ctx context.Context, o op, inc uint64, queue func(*pgx.Batch)) error {
	return s.call(ctx, o, func(ctx context.Context) error {
		b := &pgx.Batch{}
		if inc != 0 {
			b.Queue(s.q.fence, o.member, int64(inc))
		}
		queue(b)
		return s.pool.SendBatch(ctx, b).Close()
	})
}

// fencedStrings runs query, which returns one text column, behind fence
// and returns its rows.
func (s *State) fencedStrings(ctx context.Context, o op, inc uint64, query string, args ...any) ([]string, error) {
	var out []string
	err := s.fenced(ctx, o, inc, func(b *pgx.Batch) {
		out = out[:0]
		b.Queue(query, args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					return err
				}
				out = append(out, v)
			}
			return rows.Err()
		})
	})
	return out, err
}

// missing returns the keys that are not in got, in order.
func missing(keys, got []string) []string {
	in := make(map[string]bool, len(got))
	for _, k := range got {
		in[k] = true
	}
	var out []string
	for _, k := range keys {
		if !in[k] {
			out = append(out, k)
		}
	}
	return out
}

func countOf(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Delete implements state.Backend.
func (s *State) Delete(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return ctx.Err()
	}
	return s.call(ctx, op{what: "deleting " + countOf(len(ids), "record"), rerun: true}, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.delete, ids)
		return err
	})
}

// recordsPage is how many records Records reads at a time; slicePage,
// how many RecordsAfter reads at a time, so that a slice of the review
// (334 records a cycle at 100,000 agreements) is one query.
const (
	recordsPage = 256
	slicePage   = 1024
)

// Records implements state.Backend. It reads the records a page at a
// time, in id order, and calls fn outside any transaction, so fn may use
// the State.
func (s *State) Records(ctx context.Context, fn func(state.Record) bool) error {
	return s.records(ctx, "", -1, fn)
}

// RecordsAfter implements state.Backend, as Records does from after.
func (s *State) RecordsAfter(ctx context.Context, after string, limit int, fn func(state.Record) bool) error {
	if limit <= 0 {
		return fmt.Errorf("pgstate: RecordsAfter limit %d is not positive", limit)
	}
	return s.records(ctx, after, limit, fn)
}

// records calls fn with up to limit records (every one with a negative
// limit) whose id sorts after after, a page per query.
func (s *State) records(ctx context.Context, after string, limit int, fn func(state.Record) bool) error {
	for limit != 0 {
		size := recordsPage
		if limit > 0 {
			size = min(slicePage, limit)
		}
		page, err := s.query(ctx, "listing records", s.q.page, after, size)
		if err != nil {
			return err
		}
		for _, r := range page {
			if !fn(r) {
				return nil
			}
		}
		if len(page) < size {
			return nil
		}
		if limit > 0 {
			limit -= len(page)
		}
		after = page[len(page)-1].ID
	}
	return nil
}

// RecordsBound implements state.Backend through the bindings table.
func (s *State) RecordsBound(ctx context.Context, names []string, fn func(state.Record) bool) error {
	recs, err := s.query(ctx, "listing the records bound to names", s.q.bound, nonNil(names))
	if err != nil {
		return err
	}
	for _, r := range recs {
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// query runs a query returning records, again when the connection breaks.
func (s *State) query(ctx context.Context, what, query string, args ...any) ([]state.Record, error) {
	var out []state.Record
	err := s.call(ctx, op{what: what, rerun: true}, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := s.scanRecord(rows, ownServices)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

// MarkDue implements state.Backend.
func (s *State) MarkDue(ctx context.Context, sel state.Selector, at time.Time, resetAttempts bool) (int, error) {
	if len(sel.IDs)+len(sel.Nodes)+len(sel.StoreNames) == 0 {
		return 0, ctx.Err()
	}
	var changed int64
	err := s.call(ctx, op{what: "marking records due", rerun: true}, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, s.q.markDue, nonNil(sel.IDs), nonNil(sel.Nodes), nonNil(sel.StoreNames), micro(at), resetAttempts)
		changed = tag.RowsAffected()
		return err
	})
	return int(changed), err
}

// nonNil gives an empty array for nil: ANY(NULL) selects nothing, but
// says so less plainly.
func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// Due implements state.Backend. It claims the records for member: each
// gets a lease until the database's now() + lease, and its NextAttempt
// moves to now+lease on the caller's clock. A record is claimable when it
// is due by the caller's clock, or its previous claim is void (expired, or
// its holder's membership lapsed, judged by the database's clock), and no
// other member holds a valid claim on it. A member that joined and is no
// longer live claims nothing (state.ErrLeaseLost).
func (s *State) Due(ctx context.Context, member string, now time.Time, lease time.Duration, limit int) ([]state.Record, error) {
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	type claimed struct {
		was time.Time
		rec state.Record
	}
	var out []claimed
	o := op{what: "claiming due records", member: member}
	err := s.call(ctx, o, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.q.due, lim, micro(now), micro(now.Add(lease)), lease.Microseconds(), member, int64(s.incarnation(member)))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				live bool
				was  *time.Time
			)
			r, ok, err := s.scanClaimed(rows, ownServices, &live, &was)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, claimed{was: fromDB(was), rec: r})
			}
			if !live {
				return &leaseLostError{op: o.what, member: member}
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b claimed) int {
		return cmp.Or(a.was.Compare(b.was), strings.Compare(a.rec.ID, b.rec.ID))
	})
	recs := make([]state.Record, len(out))
	for i, c := range out {
		recs[i] = c.rec
	}
	return recs, nil
}
