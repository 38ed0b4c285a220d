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
	"time"
)

// Directories under a tree, and the status file names.
const (
	dirInstances = "instances"
	dirStatus    = "status"
	dirMeta      = "meta"
	dirTmp       = "tmp"

	// statusProvided is created in an instance's status directory once its
	// secrets have been written for the first time.
	statusProvided = "SECRETS_PROVIDED"
	// statusUpdated exists in an instance's status directory while the
	// instance has updated secrets it has not acknowledged; it is rewritten
	// (one updated name per line) on every update that changed a file, so a
	// file watcher sees each update.
	statusUpdated = "SECRETS_UPDATED"
)

// noGroup leaves a file's group (or owner) as created.
const noGroup = -1

// writeFile replaces rel (a slash-separated path in t) with content: the
// bytes go to a new staging file in t's tmp/ that gets its final mode and
// group and is fsynced before it is renamed over rel, relative to the
// tree's descriptors (natefinch/atomic's ReplaceFile does the same rename,
// but by path, which would follow a symlinked directory). A reader of rel
// sees the old content or the new, never a mix; on failure the staging
// file is wiped and rel is untouched.
func (s *Store) writeFile(t *dirTree, rel string, content []byte, mode fs.FileMode, uid, gid int) (err error) {
	staging := path.Join(dirTmp, rand.Text())
	f, err := t.open(staging, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating staging file for %s: %w", rel, err)
	}
	defer func() {
		if err != nil {
			// The staging file is discarded (and may be closed already):
			// err is what the caller needs.
			_ = f.Close()
			if werr := s.wipe(t, staging); werr != nil {
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
	if uid != noGroup || gid != noGroup {
		// On the descriptor: the staging file, never a link.
		if err := f.Chown(uid, gid); err != nil {
			return fmt.Errorf("setting the owner of %s: %w", rel, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", rel, err)
	}
	if err := t.rename(staging, rel); err != nil {
		return fmt.Errorf("moving %s into place: %w", rel, err)
	}
	return nil
}

// writeSecretFile is writeFile for a secret's file: the content it
// replaces is overwritten before its inode is freed, as removal does, so a
// descriptor held on the old file (a container that kept it open, a backup
// tool) reads random bytes afterwards, not the old value. The old file is
// first hard-linked into tmp/, the new file renamed into place, and the
// link wiped replacedGrace later (see wipeReplaced), so a reader that
// opened the old file just before the rename still reads it whole. A crash
// meanwhile leaves the link in tmp/, which Open wipes. s.mu is held.
func (s *Store) writeSecretFile(t *dirTree, rel string, content []byte, mode fs.FileMode, uid, gid int) error {
	replaced := ""
	if m, err := t.lstat(rel); err == nil && m.IsRegular() {
		replaced = path.Join(dirTmp, rand.Text())
		if err := t.link(rel, replaced); err != nil {
			return fmt.Errorf("keeping the replaced %s to wipe: %w", rel, err)
		}
	}
	err := s.writeFile(t, rel, content, mode, uid, gid)
	switch {
	case replaced == "":
	case err != nil:
		// rel still names the old file: only the link goes.
		if werr := s.wipe(t, replaced); werr != nil {
			s.log.Warn("could not remove a link to a secret file", "file", replaced, "err", werr)
		}
	default:
		s.replaced = append(s.replaced, replacedFile{t: t, rel: replaced, at: time.Now()})
		if s.wipeTimer == nil {
			s.wipeTimer = time.AfterFunc(replacedGrace, s.wipeReplaced)
		}
	}
	return err
}

// replacedGrace is how long the content a rotation replaced stays readable
// through a descriptor opened before the rename, before it is overwritten.
const replacedGrace = 2 * time.Second

// replacedFile is the old content of a rotated file, linked in tmp/.
type replacedFile struct {
	t   *dirTree
	rel string
	at  time.Time
}

// wipeReplaced wipes the replaced files whose grace has passed and sets the
// timer for the rest.
func (s *Store) wipeReplaced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wipeTimer = nil
	if s.closed {
		return
	}
	s.wipeReplacedBefore(time.Now().Add(-replacedGrace))
	if len(s.replaced) > 0 {
		s.wipeTimer = time.AfterFunc(time.Until(s.replaced[0].at.Add(replacedGrace)), s.wipeReplaced)
	}
}

// wipeReplacedBefore wipes the replaced files linked at or before t (a
// timer that fires exactly on time must find its file due, or it would set
// itself again for now, forever). s.mu is held.
func (s *Store) wipeReplacedBefore(t time.Time) {
	i := 0
	for ; i < len(s.replaced) && !s.replaced[i].at.After(t); i++ {
		r := s.replaced[i]
		if err := s.wipe(r.t, r.rel); err != nil {
			// Open wipes tmp/ in any case.
			s.log.Warn("could not wipe the content a rotation replaced", "file", r.rel, "err", err)
		}
	}
	s.replaced = s.replaced[i:]
}

// wipe overwrites the regular file rel in place with random bytes of the
// same length, fsyncs it and unlinks it. A file with other hard links
// (the old side of a rotation before its rename, interrupted by a crash)
// is only unlinked: its content lives on under the other name. Anything
// else (a symlink, a FIFO) is unlinked without being followed; a directory
// is wiped recursively. A missing rel is not an error.
func (s *Store) wipe(t *dirTree, rel string) error {
	mode, err := t.lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case mode.IsDir():
		return s.wipeDir(t, rel)
	case !mode.IsRegular():
		return t.remove(rel, false)
	}
	if mode.Perm()&0o200 == 0 {
		// 0400 files: the owner needs write permission to overwrite them.
		if err := t.chmod(rel, 0o600); err != nil {
			return fmt.Errorf("wiping %s: %w", rel, err)
		}
	}
	if err := s.overwrite(t, rel); err != nil {
		return fmt.Errorf("wiping %s: %w", rel, err)
	}
	if err := t.remove(rel, false); err != nil {
		return fmt.Errorf("wiping %s: unlinking: %w", rel, err)
	}
	return nil
}

// overwrite fills the regular file rel, unless it has other links, with
// random bytes and syncs it. Readers of the store's API wait meanwhile
// (see Store.reading), so they never read the random bytes.
func (s *Store) overwrite(t *dirTree, rel string) error {
	f, st, err := openRegular(t, rel, os.O_WRONLY)
	if err != nil {
		return err
	}
	// Close's error is returned below once the file was written; the other
	// paths wrote nothing or return their own error.
	defer func() { _ = f.Close() }()
	if links(st) > 1 {
		return nil
	}
	s.reading.Lock()
	defer s.reading.Unlock()
	if _, err := io.CopyN(f, s.rand, st.Size()); err != nil {
		return fmt.Errorf("overwriting: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing: %w", err)
	}
	return f.Close()
}

// errNotRegular: the agent writes only regular files; anything else in its
// directories is not one of its secrets.
var errNotRegular = errors.New("not a regular file")

// openRegular opens rel only if it is a regular file, never through a
// symlink in any element (see dirTree).
func openRegular(t *dirTree, rel string, flag int) (*os.File, fs.FileInfo, error) {
	// O_NONBLOCK: a FIFO in the file's place must not block the open.
	f, err := t.open(rel, flag|nonBlock, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w", rel, errNotRegular)
	}
	if err != nil {
		_ = f.Close() // nothing was written through f
		return nil, nil, err
	}
	return f, fi, nil
}

// wipeDir wipes every entry of the directory rel, then removes it.
func (s *Store) wipeDir(t *dirTree, rel string) error {
	entries, err := readDir(t, rel)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, s.wipe(t, path.Join(rel, e.Name())))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := t.remove(rel, true); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", rel, err)
	}
	return nil
}

// readDir lists the directory rel of t; a missing directory is empty.
func readDir(t *dirTree, rel string) ([]fs.DirEntry, error) {
	entries, err := t.readDir(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", rel, err)
	}
	return entries, nil
}

// syncDir fsyncs the directory rel of t so that renames and unlinks in it
// are durable.
func syncDir(t *dirTree, rel string) error {
	d, err := t.open(rel, os.O_RDONLY|dirOnly, 0)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // read-only; Sync reports the error that matters
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", rel, err)
	}
	return nil
}

// makeDir creates the directory rel of t with mode and group, or, if it
// exists, gives it that mode and group.
func makeDir(t *dirTree, rel string, mode fs.FileMode, gid int) error {
	if err := t.mkdir(rel, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating %s: %w", rel, err)
	}
	m, err := t.lstat(rel)
	if err != nil {
		return err
	}
	if !m.IsDir() {
		return fmt.Errorf("%s exists and is not a directory (a symlink is never followed)", rel)
	}
	// Mkdir's mode is filtered by the umask; set it exactly.
	if err := t.chmod(rel, mode); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", rel, err)
	}
	if gid != noGroup {
		if err := t.chgrp(rel, gid); err != nil {
			return fmt.Errorf("setting the group of %s: %w", rel, err)
		}
	}
	return nil
}

// abs returns the absolute path of rel in t.
func (t *dirTree) abs(rel string) string { return filepath.Join(t.path, filepath.FromSlash(rel)) }
