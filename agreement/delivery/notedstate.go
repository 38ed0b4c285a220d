// The State the engine calls: the embedder's, each call's outcome
// recorded for Health.

package delivery

import (
	"context"
	"time"
)

// notedState is the engine's State: each method calls the embedder's State
// and then the engine's noteState with the error, so that Health
// (LastStateSuccess, StateProblem) and a lost lease are kept in one place
// and a new call cannot leave them out. It spells out every method rather
// than embedding State, so that a method added to State does not compile
// until it is noted here too. Membership is not forwarded: New finds it
// on the unwrapped State, and keepMembership reports its failures itself
// (member.Problem).
type notedState struct {
	inner State
	e     *Engine
}

// notedReview is a notedState over a State that also implements
// SharedReview: the engine finds the review by asserting e.state, so the
// wrapper has the method exactly when the wrapped State has it.
type notedReview struct {
	*notedState
	review SharedReview
}

// The wrappers implement what the engine asserts.
var (
	_ State        = (*notedState)(nil)
	_ SharedReview = notedReview{}
)

// newNotedState wraps s so that its calls are noted by e.
func newNotedState(s State, e *Engine) State {
	n := &notedState{inner: s, e: e}
	if r, ok := s.(SharedReview); ok {
		return notedReview{notedState: n, review: r}
	}
	return n
}

// Create implements State.
func (s *notedState) Create(ctx context.Context, rec *Record) error {
	err := s.inner.Create(ctx, rec)
	s.e.noteState(err)
	return err
}

// Get implements State.
func (s *notedState) Get(ctx context.Context, id string) (Record, error) {
	r, err := s.inner.Get(ctx, id)
	s.e.noteState(err)
	return r, err
}

// Update implements State.
func (s *notedState) Update(ctx context.Context, member string, recs ...*Record) error {
	err := s.inner.Update(ctx, member, recs...)
	s.e.noteState(err)
	return err
}

// Rebind implements State.
func (s *notedState) Rebind(ctx context.Context, member string, rec *Record) error {
	err := s.inner.Rebind(ctx, member, rec)
	s.e.noteState(err)
	return err
}

// Delete implements State.
func (s *notedState) Delete(ctx context.Context, ids ...string) error {
	err := s.inner.Delete(ctx, ids...)
	s.e.noteState(err)
	return err
}

// Records implements State.
func (s *notedState) Records(ctx context.Context, fn func(Record) bool) error {
	err := s.inner.Records(ctx, fn)
	s.e.noteState(err)
	return err
}

// RecordsAfter implements State.
func (s *notedState) RecordsAfter(ctx context.Context, after string, limit int, fn func(Record) bool) error {
	err := s.inner.RecordsAfter(ctx, after, limit, fn)
	s.e.noteState(err)
	return err
}

// RecordsBound implements State.
func (s *notedState) RecordsBound(ctx context.Context, names []string, fn func(Record) bool) error {
	err := s.inner.RecordsBound(ctx, names, fn)
	s.e.noteState(err)
	return err
}

// Names implements State.
func (s *notedState) Names(ctx context.Context, member string) ([]string, error) {
	names, err := s.inner.Names(ctx, member)
	s.e.noteState(err)
	return names, err
}

// MarkDue implements State.
func (s *notedState) MarkDue(ctx context.Context, sel Selector, at time.Time, resetAttempts bool) (int, error) {
	n, err := s.inner.MarkDue(ctx, sel, at, resetAttempts)
	s.e.noteState(err)
	return n, err
}

// Due implements State.
func (s *notedState) Due(ctx context.Context, member string, now time.Time, lease time.Duration, limit int) ([]Record, error) {
	recs, err := s.inner.Due(ctx, member, now, lease, limit)
	s.e.noteState(err)
	return recs, err
}

// Observations implements State.
func (s *notedState) Observations(ctx context.Context, names []string) (map[string]Observation, error) {
	obs, err := s.inner.Observations(ctx, names)
	s.e.noteState(err)
	return obs, err
}

// PutObservations implements State.
func (s *notedState) PutObservations(ctx context.Context, member string, obs ...Observation) error {
	err := s.inner.PutObservations(ctx, member, obs...)
	s.e.noteState(err)
	return err
}

// PutWait implements State.
func (s *notedState) PutWait(ctx context.Context, w Wait) error {
	err := s.inner.PutWait(ctx, w)
	s.e.noteState(err)
	return err
}

// Waits implements State.
func (s *notedState) Waits(ctx context.Context) ([]Wait, error) {
	waits, err := s.inner.Waits(ctx)
	s.e.noteState(err)
	return waits, err
}

// DeleteWait implements State.
func (s *notedState) DeleteWait(ctx context.Context, id string) error {
	err := s.inner.DeleteWait(ctx, id)
	s.e.noteState(err)
	return err
}

// NewEpoch implements State.
func (s *notedState) NewEpoch(ctx context.Context) (uint64, error) {
	epoch, err := s.inner.NewEpoch(ctx)
	s.e.noteState(err)
	return epoch, err
}

// Close implements State. It is not noted: the embedder owns the State and
// closes it; the engine never calls it.
func (s *notedState) Close() error { return s.inner.Close() }

// ReviewNext implements SharedReview.
func (s notedReview) ReviewNext(ctx context.Context, member string, limit int, fn func(Record) bool) (from, through string, err error) {
	from, through, err = s.review.ReviewNext(ctx, member, limit, fn)
	s.e.noteState(err)
	return from, through, err
}
