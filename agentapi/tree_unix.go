//go:build unix

package agentapi

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// dirTree is a directory the store owns (the storage root, or the
// memory-backed directory), opened once. Every path below it is resolved
// relative to that descriptor without following a symlink in any element:
// openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it
// (Linux 5.6+), otherwise one openat with O_NOFOLLOW per element. So a
// symlink planted anywhere below the root (an instance directory, a fixed
// subdirectory, a file) is refused instead of followed, and renaming a
// directory above the root after Open changes nothing.
type dirTree struct {
	path string // absolute, for messages and mount paths
	fd   int
	// noOpenat2 is set once the kernel answered ENOSYS: walk instead.
	noOpenat2 atomic.Bool
}

// errSymlink: a path element below a tree is a symlink (or would lead out
// of the tree); the store never follows one.
var errSymlink = errors.New("a path element is a symlink, which the store never follows")

// openTree opens the directory abs, which must not be a symlink.
func openTree(abs string) (*dirTree, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, pathError("open", abs, err)
	}
	return &dirTree{path: abs, fd: fd}, nil
}

// Close closes the tree's descriptor.
func (t *dirTree) Close() error { return unix.Close(t.fd) }

// retryEINTR calls f again while it is interrupted.
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		fd, err := f()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// pathError wraps a system call error for rel, naming a refused symlink
// in words.
func pathError(op, rel string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		err = errSymlink
	}
	return &fs.PathError{Op: op, Path: rel, Err: err}
}

// checkRel refuses a path that is not a clean relative path of names.
func checkRel(rel string) error {
	if rel == "." {
		return nil
	}
	for e := range strings.SplitSeq(rel, "/") {
		if e == "" || e == "." || e == ".." {
			return fmt.Errorf("%w: path %q is not clean and relative", unix.EINVAL, rel)
		}
	}
	return nil
}

// openFD opens rel below the tree with flags (O_NOFOLLOW and O_CLOEXEC
// added) and returns the raw descriptor.
func (t *dirTree) openFD(rel string, flags int, perm fs.FileMode) (int, error) {
	if err := checkRel(rel); err != nil {
		return -1, pathError("open", rel, err)
	}
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	mode := uint32(0)
	if flags&unix.O_CREAT != 0 {
		mode = uint32(perm.Perm())
	}
	if !t.noOpenat2.Load() {
		fd, err := openat2Beneath(t.fd, rel, flags, mode)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS):
			t.noOpenat2.Store(true)
		case errors.Is(err, unix.EPERM):
			// Some seccomp filters answer EPERM for system calls they do
			// not know; the walk decides.
		default:
			return -1, pathError("open", rel, t.explain(rel, err))
		}
	}
	fd, err := t.walk(rel, flags, mode)
	if err != nil {
		return -1, pathError("open", rel, t.explain(rel, err))
	}
	return fd, nil
}

// explain turns ENOTDIR, which the kernel gives for a symlink where a
// directory was opened without following it, into errSymlink when an
// element of rel is one.
func (t *dirTree) explain(rel string, err error) error {
	if !errors.Is(err, unix.ENOTDIR) {
		return err
	}
	dirfd := t.fd
	elems := strings.Split(rel, "/")
	for i, e := range elems {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, e, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			break
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = errSymlink
			break
		}
		if i == len(elems)-1 || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			break
		}
		fd, oerr := unix.Openat(dirfd, e, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if dirfd != t.fd {
			_ = unix.Close(dirfd) // a directory, only read
		}
		if oerr != nil {
			return err
		}
		dirfd = fd
	}
	if dirfd != t.fd {
		_ = unix.Close(dirfd) // a directory, only read
	}
	return err
}

// walk opens rel one element at a time, each with O_NOFOLLOW, for kernels
// without openat2.
func (t *dirTree) walk(rel string, flags int, mode uint32) (int, error) {
	elems := strings.Split(rel, "/")
	cur := t.fd
	for i, e := range elems {
		f := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		var m uint32
		if i == len(elems)-1 {
			f, m = flags, mode
		}
		fd, err := retryEINTR(func() (int, error) { return unix.Openat(cur, e, f, m) })
		if cur != t.fd {
			_ = unix.Close(cur) // a directory, only read
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	if cur == t.fd {
		return retryEINTR(func() (int, error) { return unix.Openat(t.fd, ".", flags, mode) })
	}
	return cur, nil
}

// open opens rel below the tree as an *os.File.
func (t *dirTree) open(rel string, flags int, perm fs.FileMode) (*os.File, error) {
	fd, err := t.openFD(rel, flags, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path.Join(t.path, rel)), nil
}

// inParent runs f with the descriptor of rel's directory and rel's last
// element.
func (t *dirTree) inParent(op, rel string, f func(dirfd int, name string) error) error {
	if err := checkRel(rel); err != nil || rel == "." {
		return pathError(op, rel, unix.EINVAL)
	}
	dir, name := path.Split(rel)
	dirfd := t.fd
	if dir != "" {
		fd, err := t.openFD(strings.TrimSuffix(dir, "/"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer func() { _ = unix.Close(fd) }() // a directory, only read
		dirfd = fd
	}
	if err := f(dirfd, name); err != nil {
		return pathError(op, rel, err)
	}
	return nil
}

// lstat returns the type and permission bits of rel itself.
func (t *dirTree) lstat(rel string) (fs.FileMode, error) {
	var st unix.Stat_t
	err := t.inParent("lstat", rel, func(dirfd int, name string) error {
		return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		return 0, err
	}
	return fileMode(uint32(st.Mode)), nil
}

// fileMode converts a stat mode to an fs.FileMode (type and permissions).
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	return mode
}

// mkdir creates the directory rel.
func (t *dirTree) mkdir(rel string, perm fs.FileMode) error {
	return t.inParent("mkdir", rel, func(dirfd int, name string) error {
		return unix.Mkdirat(dirfd, name, uint32(perm.Perm()))
	})
}

// remove unlinks rel, a directory (empty) when dir is set; a symlink is
// removed itself.
func (t *dirTree) remove(rel string, dir bool) error {
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	return t.inParent("remove", rel, func(dirfd int, name string) error {
		return unix.Unlinkat(dirfd, name, flags)
	})
}

// rename moves oldRel to newRel, replacing what is there atomically.
func (t *dirTree) rename(oldRel, newRel string) error {
	return t.inParent("rename", oldRel, func(oldfd int, oldName string) error {
		return t.inParent("rename", newRel, func(newfd int, newName string) error {
			return unix.Renameat(oldfd, oldName, newfd, newName)
		})
	})
}

// link makes newRel a hard link to the file oldRel (a symlink is linked
// itself, never followed).
func (t *dirTree) link(oldRel, newRel string) error {
	return t.inParent("link", oldRel, func(oldfd int, oldName string) error {
		return t.inParent("link", newRel, func(newfd int, newName string) error {
			return unix.Linkat(oldfd, oldName, newfd, newName, 0)
		})
	})
}

// chmod sets the permissions of the file or directory rel (never through
// a symlink: rel is opened first).
func (t *dirTree) chmod(rel string, perm fs.FileMode) error {
	fd, err := t.openFD(rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }() // opened read-only; Fchmod reports the error that matters
	if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil {
		return pathError("chmod", rel, err)
	}
	return nil
}

// chgrp sets the group of rel itself.
func (t *dirTree) chgrp(rel string, gid int) error {
	return t.inParent("chgrp", rel, func(dirfd int, name string) error {
		return unix.Fchownat(dirfd, name, -1, gid, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// readDir lists the directory rel.
func (t *dirTree) readDir(rel string) ([]fs.DirEntry, error) {
	d, err := t.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }() // a directory, only read
	return d.ReadDir(-1)
}

// readRegular reads the regular file rel with four system calls (openat2,
// fstat, read, close): the read path of GET /secrets/{name}. No element
// is a symlink, a FIFO does not block (O_NONBLOCK), and anything but a
// regular file is refused.
func (t *dirTree) readRegular(rel string) ([]byte, error) {
	fd, err := t.openFD(rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }() // read-only
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, pathError("fstat", rel, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: %w", rel, errNotRegular)
	}
	// Files are replaced by rename and only overwritten in place with the
	// same length, so the size now is the size to read.
	b := make([]byte, st.Size)
	for n := 0; n < len(b); {
		m, err := unix.Read(fd, b[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, pathError("read", rel, err)
		case m == 0:
			return nil, pathError("read", rel, io.ErrUnexpectedEOF)
		}
		n += m
	}
	return b, nil
}
