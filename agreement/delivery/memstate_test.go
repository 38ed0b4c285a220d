package delivery_test

import (
	"context"
	"testing"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/statetest"
)

type memHarness struct{}

func (memHarness) MakeState(context.Context) (delivery.State, error) {
	return delivery.NewMemoryState(), nil
}

func (memHarness) Close() {}

func TestMemoryStateConformance(t *testing.T) {
	statetest.Run(t, func(context.Context, *testing.T) (statetest.Harness, error) { return memHarness{}, nil }, statetest.Options{})
}
