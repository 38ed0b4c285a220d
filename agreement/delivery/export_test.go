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

// StartCycle waits until Run's watcher has taken the cycle asked for
// before (if any) and asks for one more: the cycles started this way run
// one after the other, for benchmarks that time many.
func (e *Engine) StartCycle(ctx context.Context) {
	select {
	case e.cycleNow <- struct{}{}:
	case <-ctx.Done():
	}
}

// SetCondition records agreement id's condition as the engine's work
// would, for benchmarks of listing at scale.
func (e *Engine) SetCondition(id, node string, c Condition, reason ReasonCode) {
	e.conds.set(id, node, condKey{c: c, reason: reason})
}
