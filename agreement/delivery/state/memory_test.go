package state_test

import (
	"context"
	"testing"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state/statetest"
)

type memHarness struct{}

func (memHarness) MakeState(context.Context) (state.Backend, error) {
	return state.NewMemory(), nil
}

func (memHarness) Close() {}

func TestMemoryConformance(t *testing.T) {
	statetest.Run(t, func(context.Context, *testing.T) (statetest.Harness, error) { return memHarness{}, nil }, statetest.Options{})
}
