//go:build !unix

package agentapi

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// dirTree is a directory the store owns, opened once as an os.Root (see
// tree_unix.go for the unix version). os.Root keeps every path inside the
// directory; here each element is also checked with Lstat before use, so
// a symlink below the root is refused (a race with a concurrent change
// remains on these platforms).
type dirTree struct {
	path string
	root *os.Root
}

// errSymlink: a path element below a tree is a symlink.
var errSymlink = errors.New("a path element is a symlink, which the store never follows")

func openTree(abs string) (*dirTree, error) {
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	return &dirTree{path: abs, root: r}, nil
}

func (t *dirTree) Close() error { return t.root.Close() }

// noSymlinks refuses rel when any element is a symlink.
func (t *dirTree) noSymlinks(op, rel string) error {
	if rel == "." {
		return nil
	}
	elems := strings.Split(rel, "/")
	for i := range elems {
		fi, err := t.root.Lstat(path.Join(elems[:i+1]...))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return &fs.PathError{Op: op, Path: rel, Err: errSymlink}
		}
	}
	return nil
}

func (t *dirTree) open(rel string, flags int, perm fs.FileMode) (*os.File, error) {
	if err := t.noSymlinks("open", rel); err != nil {
		return nil, err
	}
	return t.root.OpenFile(rel, flags, perm)
}

func (t *dirTree) lstat(rel string) (fs.FileMode, error) {
	if err := t.noSymlinks("lstat", path.Dir(rel)); err != nil {
		return 0, err
	}
	fi, err := t.root.Lstat(rel)
	if err != nil {
		return 0, err
	}
	return fi.Mode(), nil
}

func (t *dirTree) mkdir(rel string, perm fs.FileMode) error {
	if err := t.noSymlinks("mkdir", path.Dir(rel)); err != nil {
		return err
	}
	return t.root.Mkdir(rel, perm)
}

func (t *dirTree) remove(rel string, _ bool) error {
	if err := t.noSymlinks("remove", path.Dir(rel)); err != nil {
		return err
	}
	return t.root.Remove(rel)
}

func (t *dirTree) rename(oldRel, newRel string) error {
	if err := errors.Join(t.noSymlinks("rename", oldRel), t.noSymlinks("rename", path.Dir(newRel))); err != nil {
		return err
	}
	return t.root.Rename(oldRel, newRel)
}

func (t *dirTree) link(oldRel, newRel string) error {
	if err := errors.Join(t.noSymlinks("link", oldRel), t.noSymlinks("link", path.Dir(newRel))); err != nil {
		return err
	}
	return t.root.Link(oldRel, newRel)
}

func (t *dirTree) chmod(rel string, perm fs.FileMode) error {
	if err := t.noSymlinks("chmod", rel); err != nil {
		return err
	}
	return t.root.Chmod(rel, perm)
}

func (t *dirTree) chgrp(rel string, gid int) error {
	if err := t.noSymlinks("chgrp", rel); err != nil {
		return err
	}
	return t.root.Lchown(rel, -1, gid)
}

func (t *dirTree) readDir(rel string) ([]fs.DirEntry, error) {
	if err := t.noSymlinks("readdir", rel); err != nil {
		return nil, err
	}
	return fs.ReadDir(t.root.FS(), rel)
}

func (t *dirTree) readRegular(rel string) ([]byte, error) {
	f, fi, err := openRegular(t, rel, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (t *dirTree) checkMemoryBacked() error {
	return fmt.Errorf("%s: the memory-backed mode is supported on Linux only", t.path)
}
