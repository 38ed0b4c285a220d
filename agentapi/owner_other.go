//go:build !unix

package agentapi

import "io/fs"

// openNoFollow: Lstat before opening is the only guard on this platform.
const openNoFollow = 0

// fileOwner is not available on this platform: ownership is not checked.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

func currentUID() int { return -1 }
