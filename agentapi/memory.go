package agentapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// In memory mode (Options.MemoryDir) an instance's files exist only on the
// memory-backed filesystem; their durable copy is one envelope sealed to the
// agent's own keys and signed by them (the agreement package's envelope),
// kept in the instance's metadata so that it is written atomically with the
// metadata it belongs to.

// sealedFilesType is the envelope message type of a sealed copy.
const sealedFilesType agreement.MessageType = "instance-files"

// sealedFiles is the plaintext of a sealed copy.
type sealedFiles struct {
	Files map[string][]byte `json:"files"`
}

// sealFiles reads every written file of m from memory and seals them.
func (s *Store) sealFiles(m *metadata) ([]byte, error) {
	files := sealedFiles{Files: make(map[string][]byte, len(m.Files))}
	defer func() {
		for _, b := range files.Files {
			clear(b)
		}
	}()
	for name, sum := range m.Files {
		if sum == "" {
			continue // never written (a failed apply)
		}
		b, err := s.readSecretFile(m, name)
		if err != nil {
			return nil, fmt.Errorf("sealing the files of instance %s: %w", quoteName(m.ID), err)
		}
		files.Files[name] = b
	}
	plain, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	sealed, err := agreement.Seal(s.sealKeys, s.sealKeys.Public(), plain, agreement.Header{Type: sealedFilesType, AgreementID: m.AgreementID, Sequence: 1}, agreement.Options{MaxSize: maxMetadataBytes})
	if err != nil {
		return nil, fmt.Errorf("sealing the files of instance %s: %w", quoteName(m.ID), err)
	}
	return sealed, nil
}

// unsealFiles opens m's sealed copy.
func (s *Store) unsealFiles(m *metadata) (map[string][]byte, error) {
	if len(m.Sealed) == 0 {
		return nil, fmt.Errorf("%w: no sealed copy", edgesecrets.ErrNotFound)
	}
	h, plain, err := agreement.Open[[]byte](context.Background(), s.sealKeys, s.sealKeys.Public(), m.Sealed,
		agreement.NewMemoryReplayGuard(), agreement.Options{MaxSize: maxMetadataBytes})
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	if h.Type != sealedFilesType || h.AgreementID != m.AgreementID {
		return nil, fmt.Errorf("%w: the sealed copy is a %s of agreement %s", edgesecrets.ErrInvalid, h.Type, quoteName(h.AgreementID))
	}
	var files sealedFiles
	if err := json.Unmarshal(plain, &files); err != nil {
		return nil, fmt.Errorf("%w: the sealed copy does not decode", edgesecrets.ErrInvalid)
	}
	return files.Files, nil
}

// restore brings an instance's files in memory back from its sealed copy
// (after a node reboot emptied the memory, or after a restart) and takes
// their digests from it. What cannot be restored is logged and left
// missing: the instance stays, so a resent proposal writes it again. It
// runs during Open.
func (s *Store) restore(m *metadata) {
	files, err := s.unsealFiles(m)
	if err != nil && len(m.Files) > 0 {
		s.log.Error("could not restore an instance's files from their sealed copy; they need to be delivered again",
			"instance", m.ID, "agreement", m.AgreementID, "err", err)
	}
	defer func() {
		for _, b := range files {
			clear(b)
		}
	}()
	if err := makeDir(s.data, m.dir(), m.dirMode(), m.gid()); err != nil {
		s.log.Error("could not restore an instance's directory", "instance", m.ID, "err", err)
		return
	}
	restored := 0
	for name := range m.Files {
		content, ok := files[name]
		if !ok {
			m.Files[name] = ""
			continue
		}
		sum := sha256.Sum256(content)
		m.Files[name] = hex.EncodeToString(sum[:])
		rel := m.file(name)
		if current, err := s.data.readRegular(rel); err == nil && bytes.Equal(current, content) {
			continue
		}
		if err := s.writeSecretFile(s.data, rel, content, m.fileModeOf(name), m.uidOf(name), m.gidOf(name)); err != nil {
			s.log.Error("could not restore a secret file", "instance", m.ID, "secret", name, "err", err)
			m.Files[name] = ""
			continue
		}
		restored++
	}
	if err := s.writeStatus(m, true, len(m.Updated) > 0); err != nil {
		s.log.Warn("could not restore an instance's status files", "instance", m.ID, "err", err)
	}
	if restored > 0 {
		s.log.Info("restored an instance's files from their sealed copy", "instance", m.ID, "files", restored)
	}
}

// checkMode refuses metadata written in the other mode: a store used with
// MemoryDir keeps sealed copies, one used without keeps digests and its
// files under the root.
func (s *Store) checkMode(m *metadata) error {
	digests := false
	for _, sum := range m.Files {
		digests = digests || sum != ""
	}
	switch {
	case !s.memory() && len(m.Sealed) > 0:
		return fmt.Errorf("%w: instance %s was stored with Options.MemoryDir; open the store with it", edgesecrets.ErrInvalid, quoteName(m.ID))
	case s.memory() && len(m.Sealed) == 0 && digests:
		return fmt.Errorf("%w: instance %s was stored without Options.MemoryDir, its files under %s; open the store without it", edgesecrets.ErrInvalid, quoteName(m.ID), path.Join(dirInstances, m.ID))
	}
	return nil
}
