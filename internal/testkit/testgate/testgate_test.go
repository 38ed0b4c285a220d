package testgate_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit/testgate"
)

func TestGate(t *testing.T) {
	var g testgate.Gate
	require.NoError(t, g.Wait(context.Background()), "the zero gate is open")

	g.Hold()
	g.Hold() // idempotent
	passed := make(chan error, 1)
	go func() { passed <- g.Wait(context.Background()) }()
	select {
	case <-passed:
		t.Fatal("Wait returned while the gate is held")
	case <-time.After(20 * time.Millisecond):
	}
	g.Release()
	select {
	case err := <-passed:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Release did not let the waiter through")
	}
	g.Release() // idempotent

	g.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, g.Wait(ctx), context.Canceled)
}
