//go:build unix

package agreement

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the test process has used.
// Benchmarks report it per operation next to ns/op because on a shared,
// overloaded machine wall time measures the neighbours as much as the code.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
