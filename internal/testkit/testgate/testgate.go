// Package testgate holds goroutines at a point until a test releases them:
// tests use it to stall a fake store or transport in the middle of a call.
package testgate

import (
	"context"
	"sync"
)

// Gate is open until Hold; the zero value is open. Safe for concurrent use.
type Gate struct {
	mu sync.Mutex
	ch chan struct{} // nil while open
}

// Hold closes the gate: later Wait calls block until Release.
func (g *Gate) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
}

// Release opens the gate, letting every waiting and later caller through.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}

// Wait returns at once while the gate is open; while it is held, it blocks
// until Release (returning nil) or until ctx ends (returning ctx.Err()).
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
