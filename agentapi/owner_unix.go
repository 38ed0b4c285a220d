//go:build unix

package agentapi

import (
	"io/fs"
	"syscall"
)

// fileOwner returns the owner's user and group ids of fi.
func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// currentUID is the user id the agent runs as; the root must belong to it.
func currentUID() int { return syscall.Geteuid() }
