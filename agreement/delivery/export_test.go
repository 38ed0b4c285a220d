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

// SetCondition records agreement id's condition as the engine's work
// would, for benchmarks of listing at scale.
func (e *Engine) SetCondition(id, node string, c Condition, reason ReasonCode) {
	e.conds.set(id, node, condKey{c: c, reason: reason})
}
