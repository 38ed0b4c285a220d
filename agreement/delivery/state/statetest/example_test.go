package statetest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state/statetest"
)

// memoryHarness runs the suite on state.NewMemory. A durable Backend's
// harness also implements statetest.DurableHarness: Reopen closes the
// Backend and opens its storage again, and StoredBytes returns the file (or
// a database dump) for the canary scan.
type memoryHarness struct{}

func (memoryHarness) MakeState(context.Context) (state.Backend, error) {
	return state.NewMemory(), nil
}

func (memoryHarness) Close() {}

func newHarness(context.Context, *testing.T) (statetest.Harness, error) { return memoryHarness{}, nil }

// A Backend's test file runs the suite with its harness and declares what
// the Backend is:
//
//	func TestConformance(t *testing.T) {
//		statetest.Run(t, newHarness, statetest.Options{Durable: true})
//	}
//
// Each case gets a fresh harness and a fresh Backend from it, as here.
func Example() {
	ctx := context.Background()
	h, _ := newHarness(ctx, nil)
	defer h.Close()
	st, _ := h.MakeState(ctx)
	defer st.Close()
	rec := &state.Record{ID: "agr-1", Node: "node-1"}
	_ = st.Create(ctx, rec)
	fmt.Println("created at revision", rec.Revision)
	// Output: created at revision 1
}
