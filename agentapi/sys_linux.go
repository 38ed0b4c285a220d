//go:build linux

package agentapi

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// openat2Beneath opens rel below dirfd with openat2, the kernel refusing
// any symlink (RESOLVE_NO_SYMLINKS) and any escape from dirfd
// (RESOLVE_BENEATH) in every element. ENOSYS means the kernel has no
// openat2 (before 5.6).
func openat2Beneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	}
	return retryEINTR(func() (int, error) { return unix.Openat2(dirfd, rel, &how) })
}

// checkMemoryBacked refuses a directory that is not on a memory-backed
// filesystem (tmpfs or ramfs): the memory mode promises that no secret
// value reaches persistent storage.
func (t *dirTree) checkMemoryBacked() error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(t.fd, &st); err != nil {
		return err
	}
	switch uint32(st.Type) {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		return nil
	}
	return fmt.Errorf("%s is not on a memory-backed filesystem (tmpfs or ramfs; its filesystem type is %#x)", t.path, uint32(st.Type))
}
