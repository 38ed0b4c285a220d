//go:build unix

package agentapi

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow makes opening a symlink fail instead of following it.
const openNoFollow = syscall.O_NOFOLLOW

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

// readRegularFile reads the regular file rel, relative to the directory
// dir, with four system calls (openat, fstat, read, close): the read path
// of GET /secrets/{name}. A symlink as the last element is not followed
// (O_NOFOLLOW), a FIFO does not block (O_NONBLOCK), and anything but a
// regular file is refused.
func readRegularFile(dir *os.File, rel string) (b []byte, err error) {
	conn, err := dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	// Control keeps dir's descriptor open while it runs.
	cerr := conn.Control(func(dirfd uintptr) { b, err = readRegularAt(int(dirfd), rel) })
	if cerr != nil {
		return nil, cerr
	}
	return b, err
}

func readRegularAt(dirfd int, rel string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Openat(dirfd, rel, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: rel, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fmt.Errorf("%s: %w", rel, errNotRegular)
	}
	// Files are replaced by rename and only overwritten in place with the
	// same length, so the size now is the size to read.
	b := make([]byte, st.Size)
	for n := 0; n < len(b); {
		m, err := syscall.Read(fd, b[n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: rel, Err: err}
		case m == 0:
			return nil, &fs.PathError{Op: "read", Path: rel, Err: io.ErrUnexpectedEOF}
		}
		n += m
	}
	return b, nil
}
