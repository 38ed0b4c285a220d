package delivery

import "context"

// TriggerCycle makes Run start a watcher cycle now, for benchmarks that
// run in real time.
func (e *Engine) TriggerCycle() {
	select {
	case e.cycleNow <- struct{}{}:
	default:
	}
}

// Cycle runs one watcher cycle now, in the caller's goroutine, for
// benchmarks of a cycle's cost.
func (e *Engine) Cycle(ctx context.Context) { e.cycle(ctx) }
