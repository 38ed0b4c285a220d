package delivery

import "context"

// SharedReview is implemented by a State that several engines share
// (delivery/pgstate) to split the anti-entropy review among its members:
// the pass through the agreements is one for all of them, and each cycle a
// member claims the next range of it, so that the agreements are reviewed
// once per ResyncPeriod in total rather than once per member. An engine
// whose State lacks it reviews every agreement itself.
type SharedReview interface {
	// ReviewNext claims for member the next range of the shared pass, of
	// at most limit records (limit must be positive), and calls fn with
	// each record of the range, in id order, until fn returns false: the
	// records whose id sorts after from, up to and including through. An
	// empty through means to the last record: the claim ends the pass,
	// and the next claim starts it again from the first record. Ranges
	// claimed by concurrent calls do not overlap. fn is not called when
	// the claim fails.
	ReviewNext(ctx context.Context, member string, limit int, fn func(Record) bool) (from, through string, err error)
}

// reviewSlice reads the review's next slice of at most limit records:
// after the engine's own cursor, or, on a SharedReview State, the range
// this member claims. It returns the records and the id the slice starts
// after; toEnd says the slice reaches the last record (otherwise it
// covers the ids up to its last record's), and passEnd that the engine's
// pass ends with this cycle: on a shared State, when its claim ends the
// shared pass, or when another member's ended it since its previous
// claim (this slice is then counted with the pass that ended: the counts
// of a member are of its share, give or take a slice).
func (e *Engine) reviewSlice(ctx context.Context, limit int) (slice []Record, from string, toEnd, passEnd bool, err error) {
	from, through := e.review.after, ""
	slice = make([]Record, 0, min(limit, 4096))
	add := func(r Record) bool { slice = append(slice, r); return true }
	shared, isShared := e.state.(SharedReview)
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
