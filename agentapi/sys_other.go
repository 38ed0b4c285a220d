//go:build !unix

package agentapi

import "io/fs"

// No such open flags here.
const (
	nonBlock = 0
	dirOnly  = 0
)

// fileOwner is not available on this platform: ownership is not checked.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

// links is not available on this platform.
func links(fs.FileInfo) uint64 { return 1 }

func currentUID() int { return -1 }
