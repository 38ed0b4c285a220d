//go:build unix

package agentapi

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// Open flags the portable code adds: a FIFO must not block an open, and a
// directory is opened as one.
const (
	nonBlock = unix.O_NONBLOCK
	dirOnly  = unix.O_DIRECTORY
)

// fileOwner returns the owner's user and group ids of fi.
func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// links returns the hard link count of fi (1 when unknown).
func links(fi fs.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 1
	}
	return uint64(st.Nlink)
}

// currentUID is the user id the agent runs as; the root must belong to it.
func currentUID() int { return syscall.Geteuid() }
