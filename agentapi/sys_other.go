//go:build !unix

package agentapi

import (
	"errors"
	"io/fs"
	"os"
)

// openNoFollow is not available: openRegular checks with Lstat instead.
const openNoFollow = 0

// fileOwner is not available on this platform: ownership is not checked.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

func currentUID() int { return -1 }

// errNoRawRead: readRegular falls back to openRegular.
var errNoRawRead = errors.New("no raw read on this platform")

func readRegularFile(*os.File, string) ([]byte, error) { return nil, errNoRawRead }
