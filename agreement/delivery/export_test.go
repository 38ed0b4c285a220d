package delivery

// TriggerCycle makes Run start a watcher cycle now, for benchmarks that
// run in real time.
func (e *Engine) TriggerCycle() {
	select {
	case e.cycleNow <- struct{}{}:
	default:
	}
}
