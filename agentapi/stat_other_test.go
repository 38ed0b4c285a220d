//go:build !unix

package agentapi_test

import (
	"io/fs"
	"testing"
)

func statIDs(t *testing.T, _ fs.FileInfo) (uid, gid int, nlink uint64) {
	t.Helper()
	t.Skip("ownership and link counts are checked on unix only")
	return 0, 0, 0
}
