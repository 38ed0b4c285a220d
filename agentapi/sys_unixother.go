//go:build unix && !linux

package agentapi

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// openat2Beneath: only Linux has openat2; the per-element walk serves.
func openat2Beneath(int, string, int, uint32) (int, error) { return -1, unix.ENOSYS }

// checkMemoryBacked: the check is implemented for Linux only.
func (t *dirTree) checkMemoryBacked() error {
	return fmt.Errorf("%s: the memory-backed mode is supported on Linux only", t.path)
}
