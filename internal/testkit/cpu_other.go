//go:build !unix

package testkit

import (
	"testing"
	"time"
)

// ProcessCPU is not measured on this platform: it returns 0, and
// benchmarks report no CPU time.
func ProcessCPU(testing.TB) time.Duration { return 0 }
