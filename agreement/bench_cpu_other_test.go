//go:build !unix

package agreement

import "time"

// processCPU is not measured on this platform; benchmarks report 0 cpu-ns/op.
func processCPU() time.Duration { return 0 }
