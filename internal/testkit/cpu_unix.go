//go:build unix

package testkit

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU returns the CPU time (user + system) the test process has used
// so far. Benchmarks report it next to ns/op because on a shared machine
// wall time measures the neighbours as much as the code.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("reading the process's CPU time: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
