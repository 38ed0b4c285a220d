package pgstate

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// Join implements state.Membership: member becomes live for one
// LeasePeriod (the database's clock) under a new incarnation, which
// replaces an earlier one of the same id: that one's process is fenced
// off (its next Heartbeat and fenced call fail with ErrLeaseLost), and
// the claims it still held pass to the new incarnation, as they would to
// an agbot restarted under the same id.
func (s *State) Join(ctx context.Context, member string) (state.MemberLease, error) {
	c := &checker{what: "member"}
	if c.check("id", member); c.err != nil {
		return state.MemberLease{}, c.err
	}
	if member == "" {
		return state.MemberLease{}, errors.New("pgstate: Join: the member id is empty")
	}
	var (
		inc          int64
		previous     *int64
		previousLive *bool
		sentAt       time.Time
	)
	err := s.call(ctx, op{what: "joining as " + quote(member), member: member}, func(ctx context.Context) error {
		sentAt = time.Now()
		previous, previousLive = nil, nil
		b := &pgx.Batch{}
		b.Queue(s.q.previous, member).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&previous, &previousLive)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
		b.Queue(s.q.join, member, s.period.Microseconds()).QueryRow(func(row pgx.Row) error { return row.Scan(&inc) })
		b.Queue(s.q.prune)
		return s.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return state.MemberLease{}, err
	}
	// The names no record binds any more. A failure (a record bound to
	// one meanwhile) leaves them to the next Join; Names skips them.
	if err := s.call(ctx, op{what: "pruning the names no record binds", rerun: true}, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.pruneNames)
		return err
	}); err != nil {
		s.log.Info("could not prune the names no record binds; the next Join tries again", slog.String("err", err.Error()))
	}
	s.mu.Lock()
	mine := previous != nil && s.incarnations[member] == uint64(*previous)
	s.incarnations[member] = uint64(inc)
	s.mu.Unlock()
	if previous != nil && *previousLive && !mine {
		s.log.Warn("joined under the id of a live member: its incarnation ends (a restart, or two agbots configured with one id)",
			slog.String("member", member), slog.Int64("incarnation", inc), slog.Int64("replaced", *previous))
	} else {
		s.log.Info("joined", slog.String("member", member), slog.Int64("incarnation", inc))
	}
	return s.lease(member, uint64(inc), sentAt), nil
}

func (s *State) lease(member string, inc uint64, sentAt time.Time) state.MemberLease {
	return state.MemberLease{Member: member, Incarnation: inc, Period: s.period, Until: sentAt.Add(s.period)}
}

// Heartbeat implements state.Membership: it renews member's lease for
// one LeasePeriod from the database's now(). It fails with an error
// matching state.ErrLeaseLost when member did not join through this
// State, left, was replaced by a later Join of its id, or let its lease
// lapse: a lapsed lease is not renewed, since the other members may have
// taken over its records and names meanwhile.
func (s *State) Heartbeat(ctx context.Context, member string) (state.MemberLease, error) {
	o := op{what: "heartbeat", member: member, rerun: true}
	inc, err := s.joined(o)
	if err != nil {
		return state.MemberLease{}, err
	}
	var (
		renewed bool
		sentAt  time.Time
	)
	err = s.call(ctx, o, func(ctx context.Context) error {
		sentAt = time.Now()
		tag, err := s.pool.Exec(ctx, s.q.heartbeat, member, int64(inc), s.period.Microseconds())
		renewed = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return state.MemberLease{}, err
	}
	if !renewed {
		return state.MemberLease{}, &leaseLostError{op: o.what, member: member}
	}
	return s.lease(member, inc, sentAt), nil
}

// Leave implements state.Membership: member's membership expires now,
// and with it every claim it holds (claim_valid), so the other members
// take over its records and names at once.
func (s *State) Leave(ctx context.Context, member string) error {
	inc := s.incarnation(member)
	if inc == 0 {
		return nil
	}
	err := s.call(ctx, op{what: "leaving as " + quote(member), member: member, rerun: true}, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.leave, member, int64(inc))
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.incarnations[member] == inc {
		delete(s.incarnations, member)
	}
	s.mu.Unlock()
	s.log.Info("left", slog.String("member", member), slog.Uint64("incarnation", inc))
	return nil
}
