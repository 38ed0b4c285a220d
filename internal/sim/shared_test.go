package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/statetest"
	"github.com/edgesecrets/edgesecrets/internal/sim"
)

// sharedHarness gives each conformance case a SharedState of its own,
// with the suite's member joined, as an engine joins before its first
// cycle.
type sharedHarness struct{}

func (sharedHarness) MakeState(ctx context.Context) (delivery.State, error) {
	h := sim.NewSharedState(time.Hour).Open()
	if _, err := h.Join(ctx, "member-1"); err != nil {
		return nil, err
	}
	return h, nil
}

func (sharedHarness) Close() {}

// The simulation's shared state keeps the State contract, shared leases
// included.
func TestSharedStateConformance(t *testing.T) {
	statetest.Run(t, func(context.Context, *testing.T) (statetest.Harness, error) { return sharedHarness{}, nil },
		statetest.Options{Shared: true})
}
