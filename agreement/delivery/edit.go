// Editing stored records (retried on conflicts), and the text of them kept
// in records and logs.

package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// action is what edit does with a record after its change.
type action uint8

const (
	keep action = iota
	save
	remove
)

// maxEditTries bounds the retries of a record whose update conflicts.
const maxEditTries = 8

// edit applies change to each record and stores the results in one
// Update (and one Delete), then applies it again to a fresh copy of each
// record that changed meanwhile, until stored. change must decide from
// the record it is given alone. Records deleted meanwhile are skipped.
func (e *Engine) edit(ctx context.Context, recs []*state.Record, change func(*state.Record) action) error {
	defer e.changedNow()
	defer e.notify()
	for try := 1; len(recs) > 0; try++ {
		var saves []*state.Record
		var removes []string
		for _, r := range recs {
			switch change(r) {
			case save:
				r.UpdatedAt = time.Now()
				saves = append(saves, r)
			case remove:
				removes = append(removes, r.ID)
			}
		}
		if len(removes) > 0 {
			if err := e.state.Delete(ctx, removes...); err != nil {
				return err
			}
		}
		for _, id := range removes {
			e.conds.drop(id)
		}
		if len(saves) == 0 {
			return nil
		}
		err := e.state.Update(ctx, e.cfg.Member, saves...)
		var ce *state.ConflictError
		if err == nil {
			e.trackAll(saves, nil)
			return nil
		}
		if !errors.As(err, &ce) || try == maxEditTries {
			return err
		}
		e.trackAll(saves, ce.IDs)
		recs = recs[:0:0]
		for _, id := range ce.IDs {
			fresh, err := e.state.Get(ctx, id)
			if errors.Is(err, state.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			recs = append(recs, &fresh)
		}
	}
	return nil
}

// editIDs is edit for records named by id, read in batches. It returns
// how many of them exist.
func (e *Engine) editIDs(ctx context.Context, ids []string, change func(*state.Record) action) (int, error) {
	found := 0
	for start := 0; start < len(ids); start += e.cfg.batch {
		var recs []*state.Record
		for _, id := range ids[start:min(start+e.cfg.batch, len(ids))] {
			r, err := e.state.Get(ctx, id)
			if errors.Is(err, state.ErrNotFound) {
				continue
			}
			if err != nil {
				return found, err
			}
			recs = append(recs, &r)
		}
		found += len(recs)
		if err := e.edit(ctx, recs, change); err != nil {
			return found, err
		}
	}
	return found, nil
}

// maxReason bounds the rejection reasons and errors kept in a record.
const maxReason = 512

// slotNames names the service secrets of the slots in contents, for logs.
func slotNames(r *state.Record, contents map[int]state.Content) []string {
	var out []string
	for i := range r.Slots {
		if _, ok := contents[i]; ok {
			out = append(out, r.Services[r.Slots[i].Service].Service.URL+":"+r.Slots[i].Name)
		}
	}
	return out
}

// clip bounds a reason kept in a record.
func clip(s string) string {
	if len(s) <= maxReason {
		return s
	}
	return strings.ToValidUTF8(s[:maxReason], "") + "…"
}

// quoteNames quotes store names for messages: "a" or "a", "b".
func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
