package agentapi

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/natefinch/atomic"
)

// Directories under the root, and the status file names.
const (
	dirInstances = "instances"
	dirStatus    = "status"
	dirMeta      = "meta"
	dirTmp       = "tmp"

	// StatusProvided is created in an instance's status directory once its
	// secrets have been written for the first time.
	StatusProvided = "SECRETS_PROVIDED"
	// StatusUpdated exists in an instance's status directory while the
	// instance has updated secrets it has not acknowledged; it is rewritten
	// (one updated name per line) on every update that changed a file, so a
	// file watcher sees each update.
	StatusUpdated = "SECRETS_UPDATED"
)

// noGroup leaves a file's group as created.
const noGroup = -1

// writeFile replaces rel (a path relative to the root, slash-separated) with
// content: the bytes go to a new staging file in tmp/ that gets its final
// mode and group and is fsynced before natefinch/atomic moves it over rel.
// A reader of rel sees the old content or the new, never a mix; on failure
// the staging file is wiped and rel is untouched.
func (s *Store) writeFile(rel string, content []byte, mode fs.FileMode, gid int) (err error) {
	staging := path.Join(dirTmp, rand.Text())
	f, err := s.root.OpenFile(staging, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating staging file for %s: %w", rel, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			if werr := s.wipe(staging); werr != nil {
				s.log.Warn("could not wipe staging file", "file", staging, "err", werr)
			}
		}
	}()
	if _, err := f.Write(content); err != nil {
		return fmt.Errorf("writing %s: %w", rel, err)
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", rel, err)
	}
	if gid != noGroup {
		if err := f.Chown(-1, gid); err != nil {
			return fmt.Errorf("setting the group of %s: %w", rel, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", rel, err)
	}
	if err := atomic.ReplaceFile(s.abs(staging), s.abs(rel)); err != nil {
		return fmt.Errorf("moving %s into place: %w", rel, err)
	}
	return nil
}

// wipe overwrites the regular file rel in place with random bytes of the
// same length, fsyncs it and unlinks it. Anything else (a symlink, a
// directory's entry that is not a file) is unlinked without being followed;
// a directory is wiped recursively. A missing rel is not an error.
func (s *Store) wipe(rel string) error {
	fi, err := s.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return s.wipeDir(rel)
	case !fi.Mode().IsRegular():
		return s.root.Remove(rel)
	}
	if fi.Mode().Perm()&0o200 == 0 {
		// 0400 files: the owner needs write permission to overwrite them.
		if err := s.root.Chmod(rel, 0o600); err != nil {
			return fmt.Errorf("wiping %s: %w", rel, err)
		}
	}
	f, st, err := s.openRegular(rel, os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("wiping %s: %w", rel, err)
	}
	defer f.Close()
	if _, err := io.CopyN(f, s.rand, st.Size()); err != nil {
		return fmt.Errorf("wiping %s: overwriting: %w", rel, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wiping %s: syncing: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("wiping %s: %w", rel, err)
	}
	if err := s.root.Remove(rel); err != nil {
		return fmt.Errorf("wiping %s: unlinking: %w", rel, err)
	}
	return nil
}

// errNotRegular: the agent writes only regular files; anything else in its
// directories is not one of its secrets.
var errNotRegular = errors.New("not a regular file")

// openRegular opens rel only if it is a regular file, never through a
// symlink: os.Root follows links that stay inside the root, so a link
// planted in one instance's directory could reach another's file.
//
// On unix, one open by absolute path with O_NOFOLLOW, then fstat: the
// directories above the file are the store's own, under the root-only root
// Open checked.
func (s *Store) openRegular(rel string, flag int) (*os.File, fs.FileInfo, error) {
	if openNoFollow != 0 {
		f, err := os.OpenFile(s.abs(rel), flag|openNoFollow, 0)
		if err != nil {
			return nil, nil, err
		}
		fi, err := f.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("%s: %w", rel, errNotRegular)
		}
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return f, fi, nil
	}
	// Elsewhere: the opened file must be the very file Lstat saw; an update
	// renaming a new file over rel in between makes it look again.
	for range 8 {
		before, err := s.root.Lstat(rel)
		if err != nil {
			return nil, nil, err
		}
		if !before.Mode().IsRegular() {
			return nil, nil, fmt.Errorf("%s: %w", rel, errNotRegular)
		}
		f, err := s.root.OpenFile(rel, flag, 0)
		if err != nil {
			return nil, nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		if os.SameFile(before, fi) {
			return f, fi, nil
		}
		f.Close()
	}
	return nil, nil, fmt.Errorf("%s: %w: it keeps being replaced while opened", rel, errNotRegular)
}

// wipeDir wipes every entry of the directory rel, then removes it.
func (s *Store) wipeDir(rel string) error {
	entries, err := s.readDir(rel)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, s.wipe(path.Join(rel, e.Name())))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := s.root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", rel, err)
	}
	return nil
}

// readDir lists the directory rel; a missing directory is empty.
func (s *Store) readDir(rel string) ([]fs.DirEntry, error) {
	entries, err := fs.ReadDir(s.root.FS(), rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", rel, err)
	}
	return entries, nil
}

// syncDir fsyncs the directory rel so that renames and unlinks in it are durable.
func (s *Store) syncDir(rel string) error {
	d, err := s.root.Open(rel)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", rel, err)
	}
	return nil
}

// makeDir creates the directory rel with mode and group, or, if it exists,
// gives it that mode and group.
func (s *Store) makeDir(rel string, mode fs.FileMode, gid int) error {
	if err := s.root.Mkdir(rel, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating %s: %w", rel, err)
	}
	fi, err := s.root.Lstat(rel)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", rel)
	}
	// Mkdir's mode is filtered by the umask; set it exactly.
	if err := s.root.Chmod(rel, mode); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", rel, err)
	}
	if gid != noGroup {
		if err := s.root.Lchown(rel, -1, gid); err != nil {
			return fmt.Errorf("setting the group of %s: %w", rel, err)
		}
	}
	return nil
}

// abs returns the absolute path of rel.
func (s *Store) abs(rel string) string { return filepath.Join(s.path, filepath.FromSlash(rel)) }
