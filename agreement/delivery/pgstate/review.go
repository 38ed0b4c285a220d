package pgstate

import (
	"context"
	"fmt"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

var _ state.SharedReview = (*State)(nil)

// ReviewNext implements state.SharedReview with one cursor row for all
// the members: each claim moves it past the next limit records, so the
// members' claims are consecutive ranges of one pass, and the statement
// that moves it reads the range's records. A claim needs no membership:
// it changes no record. A claim whose outcome is unknown (the connection
// broke) is not run again: at worst its range waits for the next pass.
// fn is called once the statement is done, so never for a claim that
// failed.
func (s *State) ReviewNext(ctx context.Context, member string, limit int, fn func(state.Record) bool) (from, through string, err error) {
	if limit <= 0 {
		return "", "", fmt.Errorf("pgstate: ReviewNext limit %d is not positive", limit)
	}
	// Sized for the claim at once (bounded, as a limit may be large): the
	// records are large, and growing the slice by appending copied them
	// about twice over; and reused by the next claim, as made afresh it
	// was a tenth of what an idle interval allocates (BENCHMARKS.md).
	buf, _ := s.reviewBufs.Get().(*[]state.Record)
	if buf == nil {
		buf = new([]state.Record)
	}
	slice := (*buf)[:0]
	if cap(slice) < min(limit, 4096) {
		slice = make([]state.Record, 0, min(limit, 4096))
	}
	defer func() {
		clear(slice) // the records themselves go
		*buf = slice[:0]
		s.reviewBufs.Put(buf)
	}()
	err = s.call(ctx, op{what: "claiming a slice of the review", member: member}, func(ctx context.Context) error {
		slice = slice[:0]
		rows, err := s.pool.Query(ctx, s.q.reviewNext, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, ok, err := s.scanClaimed(rows, sharedServices, &from, &through)
			if err != nil {
				return err
			}
			if ok {
				slice = append(slice, r)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return "", "", err
	}
	for _, r := range slice {
		if !fn(r) {
			break
		}
	}
	return from, through, nil
}
