//go:build unix

package agentapi_test

import (
	"io/fs"
	"syscall"
	"testing"
)

// statIDs returns the owner, group and link count of fi.
func statIDs(t *testing.T, fi fs.FileInfo) (uid, gid int, nlink uint64) {
	t.Helper()
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), uint64(st.Nlink)
}
