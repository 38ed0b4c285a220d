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
	// about twice over (BENCHMARKS.md).
	slice := make([]state.Record, 0, min(limit, 4096))
	err = s.call(ctx, op{what: "claiming a slice of the review", member: member}, func(ctx context.Context) error {
		slice = slice[:0]
		rows, err := s.pool.Query(ctx, s.q.reviewNext, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, ok, err := s.scanClaimed(rows, &from, &through)
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
