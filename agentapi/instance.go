package agentapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/edgesecrets/edgesecrets"
)

// Remove deletes an instance: its token (Options.Tokens) stops working,
// every file in its directory is overwritten in place with random bytes of
// the same length, fsynced and unlinked; then its directories and metadata
// are removed. Other instances are not touched. Removing an unknown
// instance is not an error, so a teardown can be retried.
func (s *Store) Remove(ctx context.Context, instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(ctx, instanceID)
}

func (s *Store) remove(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := s.instances[id]
	if m == nil {
		return nil
	}
	// Readers and callers stop seeing the instance before its files go.
	s.publish(id, nil)
	if s.tokens != nil {
		s.tokens.Delete(id)
	}
	if s.memory() {
		// The sealed copy would bring the files back after a restart:
		// mark the removal first, so Open finishes it instead.
		marked := m.clone()
		marked.Removing = true
		if err := s.saveMetadata(marked); err != nil {
			s.publish(id, m)
			return fmt.Errorf("agentapi: removing instance %s: %w", quoteName(id), err)
		}
		m = marked
	}
	if err := s.finishRemoval(m); err != nil {
		s.publish(id, m)
		return fmt.Errorf("agentapi: removing instance %s: %w", quoteName(id), err)
	}
	s.log.Info("instance removed", "instance", id, "agreement", m.AgreementID, "secrets", len(m.Files))
	return nil
}

// finishRemoval wipes an instance's files and status directory, then
// removes its metadata. The metadata goes last: a crash before that leaves
// an instance that Open finishes removing.
func (s *Store) finishRemoval(m *metadata) error {
	if err := s.wipe(s.data, m.dir()); err != nil {
		return err
	}
	if err := syncDir(s.data, dirInstances); err != nil {
		s.log.Warn("could not sync the instances directory", "err", err)
	}
	if err := s.wipe(s.data, m.statusDir()); err != nil {
		return err
	}
	if err := s.meta.remove(path.Join(dirMeta, m.ID), false); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(s.meta, dirMeta)
}

// RemoveAgreement removes (as Remove does) every instance holding secrets
// of the agreement, for example when it is cancelled, and returns their
// ids. The agreement's replay state is kept, so none of its envelopes can
// bring the instances back.
func (s *Store) RemoveAgreement(ctx context.Context, agreementID string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids, err := s.removeAgreement(ctx, agreementID)
	if serr := s.endAgreement(agreementID); err == nil {
		err = serr
	}
	return ids, err
}

// removeAgreement removes the agreement's instances. s.mu is held.
func (s *Store) removeAgreement(ctx context.Context, agreementID string) ([]string, error) {
	var ids []string
	for id, m := range s.instances {
		if m.AgreementID == agreementID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for i, id := range ids {
		if err := s.remove(ctx, id); err != nil {
			return ids[:i], err
		}
	}
	return ids, nil
}

// ServiceRestarted tells the store that the instance's container
// restarted: its mount already holds the newest values, so the updated
// list is cleared and GET /secrets answers 404 until the next update. The
// error matches edgesecrets.ErrNotFound for an unknown instance.
func (s *Store) ServiceRestarted(ctx context.Context, instanceID string) error {
	return s.change(ctx, instanceID, func(m *metadata) bool {
		if len(m.Updated) == 0 {
			return false
		}
		m.Updated = nil
		return true
	})
}

// Acknowledge records that the instance received the named secret (POST
// /secrets/{name}?received=true): the name leaves the updated list, also
// when it was never fetched. The error matches edgesecrets.ErrNotFound when
// the instance has no such secret.
func (s *Store) Acknowledge(ctx context.Context, instanceID, name string) error {
	if err := checkSecretName(name); err != nil {
		return fmt.Errorf("agentapi: acknowledge: %w", err)
	}
	var missing bool
	err := s.change(ctx, instanceID, func(m *metadata) bool {
		if _, ok := m.Files[name]; !ok {
			missing = true
			return false
		}
		if _, found := slices.BinarySearch(m.Updated, name); !found {
			return false
		}
		m.Updated = removeName(m.Updated, name)
		m.Acknowledged = addName(m.Acknowledged, name)
		return true
	})
	if err == nil && missing {
		err = fmt.Errorf("agentapi: instance %s has no secret %s: %w", quoteName(instanceID), quoteName(name), edgesecrets.ErrNotFound)
	}
	if err == nil {
		s.log.Debug("secret acknowledged", "instance", instanceID, "secret", name)
	}
	return err
}

// change applies fn to a copy of the instance's metadata and, when fn
// reports a change, persists and publishes it and refreshes the status files.
func (s *Store) change(ctx context.Context, id string, fn func(*metadata) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.lookup(id)
	if err != nil {
		return err
	}
	m = m.clone()
	if !fn(m) {
		return nil
	}
	if err := s.saveMetadata(m); err != nil {
		return fmt.Errorf("agentapi: %w", err)
	}
	s.publish(id, m)
	if err := s.writeStatus(m, false, true); err != nil {
		return fmt.Errorf("agentapi: instance %s: %w", quoteName(id), err)
	}
	return nil
}

// ReadSecret returns the content of one of the instance's secret files: the
// bytes GET /secrets/{name} encodes. The error matches
// edgesecrets.ErrNotFound when the instance has no such secret, and
// edgesecrets.ErrInvalid for a name that is not a single path element.
func (s *Store) ReadSecret(ctx context.Context, instanceID, name string) ([]byte, error) {
	_, b, err := s.readSecret(ctx, instanceID, name)
	return b, err
}

// readSecret is ReadSecret, also returning the instance's metadata as of
// the read.
func (s *Store) readSecret(ctx context.Context, instanceID, name string) (*metadata, []byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := checkSecretName(name); err != nil {
		return nil, nil, fmt.Errorf("agentapi: read: %w", err)
	}
	m, err := s.lookup(instanceID)
	if err != nil {
		return nil, nil, err
	}
	if _, ok := m.Files[name]; !ok {
		return nil, nil, fmt.Errorf("agentapi: instance %s has no secret %s: %w", quoteName(instanceID), quoteName(name), edgesecrets.ErrNotFound)
	}
	b, err := s.readSecretFile(m, name)
	if errors.Is(err, fs.ErrNotExist) {
		// Removed while we looked.
		return nil, nil, fmt.Errorf("agentapi: instance %s has no secret %s: %w", quoteName(instanceID), quoteName(name), edgesecrets.ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("agentapi: reading secret %s of instance %s: %w", quoteName(name), quoteName(instanceID), err)
	}
	return m, b, nil
}

// readSecretFile reads the file of one of m's secrets, never through a
// symlink (see dirTree), and never while a replaced or removed file is
// being overwritten.
func (s *Store) readSecretFile(m *metadata, name string) ([]byte, error) {
	s.reading.RLock()
	defer s.reading.RUnlock()
	return s.data.readRegular(m.file(name))
}

// writeStatus brings the instance's status files up to date: provided
// (re)writes SECRETS_PROVIDED; SECRETS_UPDATED is removed when nothing is
// updated, and rewritten when updated is set.
func (s *Store) writeStatus(m *metadata, provided, updated bool) error {
	if !s.statusFiles {
		return nil
	}
	dir := m.statusDir()
	if err := makeDir(s.data, dir, m.dirMode(), m.gid()); err != nil {
		return err
	}
	if provided {
		if err := s.writeFile(s.data, path.Join(dir, statusProvided), nil, m.fileMode(), noGroup, m.gid()); err != nil {
			return err
		}
	}
	file := path.Join(dir, statusUpdated)
	switch {
	case len(m.Updated) == 0:
		if err := s.data.remove(file, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	case updated:
		content := strings.Join(m.Updated, "\n") + "\n"
		if err := s.writeFile(s.data, file, []byte(content), m.fileMode(), noGroup, m.gid()); err != nil {
			return err
		}
	}
	return syncDir(s.data, dir)
}
