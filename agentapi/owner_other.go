//go:build !unix

package agentapi

import "io/fs"

// fileOwner is not available on this platform: ownership is not checked.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

func currentUID() int { return -1 }
