package pgstate

import (
	"context"
	"fmt"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
)

var _ delivery.SharedReview = (*state)(nil)

// ClaimReview implements delivery.SharedReview with one cursor row for
// all the members: each claim moves it past the next limit records, so
// the members' claims are consecutive ranges of one pass. A claim needs
// no membership: it changes no record. A claim whose outcome is unknown
// (the connection broke) is not run again: at worst its range waits for
// the next pass.
func (s *state) ClaimReview(ctx context.Context, member string, limit int) (from, through string, err error) {
	if limit <= 0 {
		return "", "", fmt.Errorf("pgstate: ClaimReview limit %d is not positive", limit)
	}
	err = s.call(ctx, op{what: "claiming a slice of the review", member: member}, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.q.claimReview, limit).Scan(&from, &through)
	})
	return from, through, err
}
