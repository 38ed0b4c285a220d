package state_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// A record goes in and out of a Backend by value; an Update from a stale
// copy is refused, so two writers never overwrite each other.
func ExampleNewMemory() {
	ctx := context.Background()
	st := state.NewMemory()
	defer st.Close()

	rec := &state.Record{ID: "agr-1", Node: "node-1", Phase: state.PhaseActive, NextAttempt: time.Now()}
	if err := st.Create(ctx, rec); err != nil {
		fmt.Println(err)
		return
	}
	stale, _ := st.Get(ctx, "agr-1")

	rec.Attempts = 1
	fmt.Println(st.Update(ctx, "", rec), rec.Revision)

	stale.Attempts = 2
	err := st.Update(ctx, "", &stale)
	var conflict *state.ConflictError
	fmt.Println(errors.Is(err, state.ErrConflict), errors.As(err, &conflict) && conflict.IDs[0] == "agr-1")

	due, _ := st.Due(ctx, "", time.Now(), time.Minute, 10)
	fmt.Println(len(due), due[0].ID, due[0].Phase)
	// Output:
	// <nil> 2
	// true true
	// 1 agr-1 active
}
