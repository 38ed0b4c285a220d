package statetest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/statetest"
)

// memoryHarness runs the suite on delivery.NewMemoryState. A durable State's
// harness also implements statetest.DurableHarness: Reopen closes the
// State and opens its storage again, and StoredBytes returns the file (or
// a database dump) for the canary scan.
type memoryHarness struct{}

func (memoryHarness) MakeState(context.Context) (delivery.State, error) {
	return delivery.NewMemoryState(), nil
}

func (memoryHarness) Close() {}

func newHarness(context.Context, *testing.T) (statetest.Harness, error) { return memoryHarness{}, nil }

// A State's test file runs the suite with its harness and declares what
// the State is:
//
//	func TestConformance(t *testing.T) {
//		statetest.Run(t, newHarness, statetest.Options{Durable: true})
//	}
//
// Each case gets a fresh harness and a fresh State from it, as here.
func Example() {
	ctx := context.Background()
	h, _ := newHarness(ctx, nil)
	defer h.Close()
	st, _ := h.MakeState(ctx)
	defer st.Close()
	rec := &delivery.Record{ID: "agr-1", Node: "node-1"}
	_ = st.Create(ctx, rec)
	fmt.Println("created at revision", rec.Revision)
	// Output: created at revision 1
}
