// The state.Backend the engine calls: the embedder's, each call's outcome
// recorded for Health.

package delivery

import (
	"context"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// notedState is the engine's state.Backend: each method calls the
// embedder's Backend and then the engine's noteState with the error, so
// that Health (LastStateSuccess, StateProblem) and a lost lease are kept in
// one place and a new call cannot leave them out. It spells out every
// method rather than embedding state.Backend, so that a method added to
// the contract does not compile until it is noted here too.
// state.Membership is not forwarded: New finds it on the unwrapped
// Backend, and keepMembership reports its failures itself
// (member.Problem).
type notedState struct {
	inner state.Backend
	e     *Engine
}

// notedReview is a notedState over a Backend that also implements
// state.SharedReview: the engine finds the review by asserting e.state,
// so the wrapper has the method exactly when the wrapped Backend has it.
type notedReview struct {
	*notedState
	review state.SharedReview
}

// The wrappers implement what the engine asserts.
var (
	_ state.Backend      = (*notedState)(nil)
	_ state.SharedReview = notedReview{}
)

// newNotedState wraps s so that its calls are noted by e.
func newNotedState(s state.Backend, e *Engine) state.Backend {
	n := &notedState{inner: s, e: e}
	if r, ok := s.(state.SharedReview); ok {
		return notedReview{notedState: n, review: r}
	}
	return n
}

// Create implements state.Backend.
func (s *notedState) Create(ctx context.Context, rec *state.Record) error {
	err := s.inner.Create(ctx, rec)
	s.e.noteState(err)
	return err
}

// Get implements state.Backend.
func (s *notedState) Get(ctx context.Context, id string) (state.Record, error) {
	r, err := s.inner.Get(ctx, id)
	s.e.noteState(err)
	return r, err
}

// Update implements state.Backend.
func (s *notedState) Update(ctx context.Context, member string, recs ...*state.Record) error {
	err := s.inner.Update(ctx, member, recs...)
	s.e.noteState(err)
	return err
}

// Rebind implements state.Backend.
func (s *notedState) Rebind(ctx context.Context, member string, rec *state.Record) error {
	err := s.inner.Rebind(ctx, member, rec)
	s.e.noteState(err)
	return err
}

// Delete implements state.Backend.
func (s *notedState) Delete(ctx context.Context, ids ...string) error {
	err := s.inner.Delete(ctx, ids...)
	s.e.noteState(err)
	return err
}

// Records implements state.Backend.
func (s *notedState) Records(ctx context.Context, fn func(state.Record) bool) error {
	err := s.inner.Records(ctx, fn)
	s.e.noteState(err)
	return err
}

// RecordsAfter implements state.Backend.
func (s *notedState) RecordsAfter(ctx context.Context, after string, limit int, fn func(state.Record) bool) error {
	err := s.inner.RecordsAfter(ctx, after, limit, fn)
	s.e.noteState(err)
	return err
}

// RecordsBound implements state.Backend.
func (s *notedState) RecordsBound(ctx context.Context, names []string, fn func(state.Record) bool) error {
	err := s.inner.RecordsBound(ctx, names, fn)
	s.e.noteState(err)
	return err
}

// Names implements state.Backend.
func (s *notedState) Names(ctx context.Context, member string) ([]string, error) {
	names, err := s.inner.Names(ctx, member)
	s.e.noteState(err)
	return names, err
}

// MarkDue implements state.Backend.
func (s *notedState) MarkDue(ctx context.Context, sel state.Selector, at time.Time, resetAttempts bool) (int, error) {
	n, err := s.inner.MarkDue(ctx, sel, at, resetAttempts)
	s.e.noteState(err)
	return n, err
}

// Due implements state.Backend.
func (s *notedState) Due(ctx context.Context, member string, now time.Time, lease time.Duration, limit int) ([]state.Record, error) {
	recs, err := s.inner.Due(ctx, member, now, lease, limit)
	s.e.noteState(err)
	return recs, err
}

// Observations implements state.Backend.
func (s *notedState) Observations(ctx context.Context, names []string) (map[string]state.Observation, error) {
	obs, err := s.inner.Observations(ctx, names)
	s.e.noteState(err)
	return obs, err
}

// PutObservations implements state.Backend.
func (s *notedState) PutObservations(ctx context.Context, member string, obs ...state.Observation) error {
	err := s.inner.PutObservations(ctx, member, obs...)
	s.e.noteState(err)
	return err
}

// PutWait implements state.Backend.
func (s *notedState) PutWait(ctx context.Context, w state.Wait) error {
	err := s.inner.PutWait(ctx, w)
	s.e.noteState(err)
	return err
}

// Waits implements state.Backend.
func (s *notedState) Waits(ctx context.Context) ([]state.Wait, error) {
	waits, err := s.inner.Waits(ctx)
	s.e.noteState(err)
	return waits, err
}

// DeleteWait implements state.Backend.
func (s *notedState) DeleteWait(ctx context.Context, id string) error {
	err := s.inner.DeleteWait(ctx, id)
	s.e.noteState(err)
	return err
}

// NewEpoch implements state.Backend.
func (s *notedState) NewEpoch(ctx context.Context) (uint64, error) {
	epoch, err := s.inner.NewEpoch(ctx)
	s.e.noteState(err)
	return epoch, err
}

// Close implements State. It is not noted: the embedder owns the State and
// closes it; the engine never calls it.
func (s *notedState) Close() error { return s.inner.Close() }

// ReviewNext implements SharedReview.
func (s notedReview) ReviewNext(ctx context.Context, member string, limit int, fn func(state.Record) bool) (from, through string, err error) {
	from, through, err = s.review.ReviewNext(ctx, member, limit, fn)
	s.e.noteState(err)
	return from, through, err
}
