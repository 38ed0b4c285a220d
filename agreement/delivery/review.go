package delivery

import (
	"context"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// reviewSlice reads the review's next slice of at most limit records:
// after the engine's own cursor, or, on a SharedReview State, the range
// this member claims. It returns the records and the id the slice starts
// after; toEnd says the slice reaches the last record (otherwise it
// covers the ids up to its last record's), and passEnd that the engine's
// pass ends with this cycle: on a shared State, when its claim ends the
// shared pass, or when another member's ended it since its previous
// claim (this slice is then counted with the pass that ended: the counts
// of a member are of its share, give or take a slice).
func (e *Engine) reviewSlice(ctx context.Context, limit int) (slice []state.Record, from string, toEnd, passEnd bool, err error) {
	from, through := e.review.after, ""
	slice = e.review.buf[:0]
	if cap(slice) < min(limit, 4096) {
		slice = make([]state.Record, 0, min(limit, 4096))
	}
	add := func(r state.Record) bool { slice = append(slice, r); return true }
	shared, isShared := e.state.(state.SharedReview)
	if isShared {
		from, through, err = shared.ReviewNext(ctx, e.cfg.Member, limit, add)
	} else {
		err = e.state.RecordsAfter(ctx, from, limit, add)
	}
	if err != nil {
		return nil, "", false, false, err
	}
	if !isShared {
		toEnd = len(slice) < limit
		return slice, from, toEnd, toEnd, nil
	}
	v := &e.review
	wrapped := v.claimed != nil && from <= *v.claimed
	if through == "" {
		v.claimed = nil // the next claim starts a pass
	} else {
		v.claimed = &from
	}
	return slice, from, through == "", through == "" || wrapped, nil
}
