package agentapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// MountTarget is where a service container finds its secrets: the embedder
// bind-mounts the instance's InstanceInfo.MountSource read-only here.
const MountTarget = "/open-horizon-secrets"

// Options configures a Store.
type Options struct {
	// Root is the directory that holds every instance's secrets. Open
	// creates it (mode 0700) when missing and refuses it when it is a
	// symlink, not a directory, not owned by the agent's user, or
	// accessible to group or others. Required.
	Root string
	// StatusFiles enables the SECRETS_PROVIDED and SECRETS_UPDATED status
	// files in each instance's status directory (InstanceInfo.StatusDir).
	StatusFiles bool
	// Tokens, when set, is the token table the instances' services
	// authenticate with (its Authenticate method is the handler's
	// HandlerOptions.Authenticate): removing an instance
	// deletes its token, so its credentials stop working at once.
	Tokens *TokenTable
	// MemoryDir, when set, keeps every secret's plaintext off persistent
	// storage: the instances' files and status files live under this
	// directory, which must be on a memory-backed filesystem (tmpfs or
	// ramfs; Linux only) and pass the same checks as Root, while Root keeps
	// only metadata and a copy of each instance's files sealed to SealKeys.
	// After an agent restart or a node reboot (which empties the memory),
	// Open restores the files from that copy. See the package
	// documentation, "Plaintext never on disk".
	MemoryDir string
	// SealKeys are the agent's own agreement keys: the durable copy of the
	// files is sealed to them (and signed by them), so only this agent can
	// restore it. Required with MemoryDir.
	SealKeys *agreement.PrivateKeys
	// Logger receives instance ids, agreement ids, secret names and counts,
	// never values. Default: discard.
	Logger *slog.Logger
	// Rand supplies the bytes that overwrite files on removal and
	// rotation. Default: crypto/rand.Reader.
	Rand io.Reader
}

// Store keeps the secrets of the node's service instances in files under a
// root-only directory. See the package documentation for the layout. A Store
// is safe for concurrent use; changes are serialised, reads never wait for
// disk writes. Only one Store (one process) may use a root at a time.
type Store struct {
	path string // absolute root path
	// meta is the storage root: meta/, tmp/ and the agreements' state.
	meta *dirTree
	// data holds instances/, status/ and tmp/: the root itself, or the
	// memory-backed Options.MemoryDir.
	data *dirTree
	// sealKeys, in memory mode, seal each instance's files into its
	// metadata (metadata.Sealed).
	sealKeys    *agreement.PrivateKeys
	tokens      *TokenTable
	log         *slog.Logger
	rand        io.Reader
	statusFiles bool

	// mu serialises changes (on disk and in memory) and guards the fields
	// below it.
	mu sync.Mutex
	// replaced are the old contents of rotated files, oldest first, to be
	// wiped once their grace has passed (writeSecretFile).
	replaced  []replacedFile
	wipeTimer *time.Timer
	closed    bool
	// reading is held shared by API reads of a secret file and exclusively
	// while a replaced or removed file is overwritten, so the API never
	// serves the random bytes.
	reading sync.RWMutex
	// view guards instances and agreements. Each *metadata in instances is
	// a published snapshot and is never modified; changes replace it.
	view       sync.RWMutex
	instances  map[string]*metadata
	agreements map[string]agreementState
	// since is when the replay state began (set by Open); zero when it is
	// older than this record.
	since time.Time
}

// memory reports whether the store keeps its secret files in memory.
func (s *Store) memory() bool { return s.sealKeys != nil }

// Open opens (creating if needed) the storage under opts.Root and reloads
// the instances recorded there, so an agent restart keeps every instance's
// files, updated/acknowledged names and the agreements' replay state. It
// wipes what a crash may have left behind: staging files, instance
// directories without metadata, files no instance's metadata lists. In
// memory mode it restores every instance's files from their sealed copy.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Root == "" {
		return nil, fmt.Errorf("agentapi: open: %w: Options.Root is empty", edgesecrets.ErrInvalid)
	}
	if (opts.MemoryDir == "") != (opts.SealKeys == nil) {
		return nil, fmt.Errorf("agentapi: open: %w: Options.MemoryDir and Options.SealKeys go together", edgesecrets.ErrInvalid)
	}
	s := &Store{
		sealKeys:    opts.SealKeys,
		tokens:      opts.Tokens,
		log:         opts.Logger,
		rand:        opts.Rand,
		statusFiles: opts.StatusFiles,
		instances:   make(map[string]*metadata),
		agreements:  make(map[string]agreementState),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	var err error
	if s.meta, err = openPrivateDir(opts.Root); err != nil {
		return nil, fmt.Errorf("agentapi: open %s: %w", opts.Root, err)
	}
	s.path, s.data = s.meta.path, s.meta
	if opts.MemoryDir != "" {
		if s.data, err = openPrivateDir(opts.MemoryDir); err == nil {
			if err = s.data.checkMemoryBacked(); err != nil {
				_ = s.data.Close() // a directory descriptor, only read; err is returned
				err = fmt.Errorf("%w: %w", edgesecrets.ErrInvalid, err)
			}
		}
		if err != nil {
			_ = s.meta.Close() // a directory descriptor, only read; err is returned
			return nil, fmt.Errorf("agentapi: open memory directory %s: %w", opts.MemoryDir, err)
		}
	}
	if err := s.load(ctx); err != nil {
		// Close only releases the directory descriptors (and logs what it
		// could not wipe): the load error is what the caller needs.
		_ = s.Close()
		return nil, fmt.Errorf("agentapi: open %s: %w", s.path, err)
	}
	return s, nil
}

// openPrivateDir prepares the directory at path (see prepareRoot) and opens
// it as a tree.
func openPrivateDir(dir string) (*dirTree, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := prepareRoot(abs); err != nil {
		return nil, err
	}
	return openTree(abs)
}

// prepareRoot creates the root directory if needed and checks it is private
// to the agent's user.
func prepareRoot(abs string) error {
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return err
		}
		// MkdirAll's mode is filtered by the umask; make it exact.
		if err := os.Chmod(abs, 0o700); err != nil {
			return err
		}
		fi, err = os.Lstat(abs)
	}
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: the storage root is a symlink; give the real directory", edgesecrets.ErrInvalid)
	case !fi.IsDir():
		return fmt.Errorf("%w: the storage root is not a directory", edgesecrets.ErrInvalid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%w: the storage root is accessible to group or others (mode %04o); it must be 0700", edgesecrets.ErrInvalid, fi.Mode().Perm())
	}
	if uid, _, ok := fileOwner(fi); ok && uid != currentUID() {
		return fmt.Errorf("%w: the storage root is owned by uid %d, not by the agent's uid %d", edgesecrets.ErrInvalid, uid, currentUID())
	}
	return nil
}

// load creates the fixed directories, wipes crash leftovers, reads every
// instance's metadata and the agreements' state, and in memory mode
// restores the instances' files.
func (s *Store) load(ctx context.Context) error {
	for _, d := range s.fixedDirs() {
		if err := makeDir(d.t, d.rel, 0o700, noGroup); err != nil {
			return err
		}
	}
	// Staging files of writes a crash interrupted hold (partial) secrets.
	for _, t := range s.trees() {
		if err := wipeEntries[struct{}](s, t, dirTmp, nil); err != nil {
			return err
		}
	}
	entries, err := readDir(s.meta, dirMeta)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := s.readMetadata(e.Name())
		if err != nil {
			return err
		}
		if err := s.checkMode(m); err != nil {
			return err
		}
		s.instances[m.ID] = m
	}
	for id, m := range s.instances {
		_, err := s.data.lstat(m.dir())
		missing := errors.Is(err, fs.ErrNotExist)
		if m.Removing || missing && !s.memory() {
			// A crash interrupted Remove (in memory mode, once it had
			// marked the metadata).
			if err := s.finishRemoval(m); err != nil {
				return err
			}
			delete(s.instances, id)
			s.log.Info("finished an interrupted removal", "instance", id, "agreement", m.AgreementID)
			continue
		}
		if !missing {
			if err := wipeEntries(s, s.data, m.dir(), m.Files); err != nil {
				return err
			}
		}
		if s.memory() {
			s.restore(m)
		}
	}
	for _, d := range []string{dirInstances, dirStatus} {
		if err := wipeEntries(s, s.data, d, s.instances); err != nil {
			return err
		}
	}
	if err := s.loadAgreements(); err != nil {
		return err
	}
	s.log.Info("secret storage opened", "root", s.path, "memory", s.memory(), "instances", len(s.instances))
	return nil
}

// treeDir is a directory of one of the store's trees.
type treeDir struct {
	t   *dirTree
	rel string
}

// fixedDirs are the directories Open creates.
func (s *Store) fixedDirs() []treeDir {
	dirs := []treeDir{{s.data, dirInstances}, {s.data, dirStatus}, {s.data, dirTmp}, {s.meta, dirMeta}}
	if s.memory() {
		dirs = append(dirs, treeDir{s.meta, dirTmp})
	}
	return dirs
}

// trees are the store's trees, each once.
func (s *Store) trees() []*dirTree {
	if s.memory() {
		return []*dirTree{s.meta, s.data}
	}
	return []*dirTree{s.meta}
}

// wipeEntries wipes every entry of the directory rel of t whose name is not
// a key of keep.
func wipeEntries[V any](s *Store, t *dirTree, rel string, keep map[string]V) error {
	entries, err := readDir(t, rel)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := keep[e.Name()]; ok {
			continue
		}
		s.log.Warn("wiping an entry no instance owns", "entry", path.Join(rel, e.Name()))
		if err := s.wipe(t, path.Join(rel, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the store. Files stay on disk (or in memory) for the
// next Open.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.wipeTimer != nil {
		s.wipeTimer.Stop()
		s.wipeTimer = nil
	}
	// What rotations replaced is wiped now, its grace cut short.
	s.wipeReplacedBefore(time.Now().Add(time.Hour))
	s.closed = true
	s.mu.Unlock()
	err := s.meta.Close()
	if s.data != s.meta {
		err = errors.Join(err, s.data.Close())
	}
	return err
}

// InstanceInfo describes one stored instance. It holds names, never values.
type InstanceInfo struct {
	// ID is the instance id.
	ID string
	// AgreementID is the agreement whose proposal created the instance.
	AgreementID string
	// Service is the service (container) of the agreement it serves.
	Service agreement.ServiceRef
	// Secrets are the instance's service secret names, sorted.
	Secrets []string
	// Updated are the names updated since the service started and not yet
	// acknowledged, sorted: what GET /secrets returns.
	Updated []string
	// Acknowledged are the names the service acknowledged since their last
	// update, sorted.
	Acknowledged []string
	// GroupReadable and Group are the instance's group settings.
	GroupReadable bool
	Group         int
	// MountSource is the instance's directory (absolute), to bind-mount
	// read-only at MountTarget in the instance's container.
	MountSource string
	// StatusDir is the instance's status directory (absolute), which holds
	// the files SECRETS_PROVIDED and SECRETS_UPDATED when
	// Options.StatusFiles is set. The embedder may bind-mount it read-only
	// for the container's probes.
	StatusDir string
}

// Instance returns what the store knows about an instance, where its files
// are included, and false for an unknown one.
func (s *Store) Instance(instanceID string) (InstanceInfo, bool) {
	s.view.RLock()
	m := s.instances[instanceID]
	s.view.RUnlock()
	if m == nil {
		return InstanceInfo{}, false
	}
	info := m.info()
	info.MountSource, info.StatusDir = s.data.abs(m.dir()), s.data.abs(m.statusDir())
	return info, true
}

// InstanceIDs returns the ids of all stored instances, sorted.
func (s *Store) InstanceIDs() []string {
	s.view.RLock()
	defer s.view.RUnlock()
	return slices.Sorted(maps.Keys(s.instances))
}

// lookup returns the published metadata of an instance.
func (s *Store) lookup(instanceID string) (*metadata, error) {
	s.view.RLock()
	m := s.instances[instanceID]
	s.view.RUnlock()
	if m == nil {
		return nil, fmt.Errorf("agentapi: instance %s: %w", quoteName(instanceID), edgesecrets.ErrNotFound)
	}
	return m, nil
}

// publish makes m the current state of its instance (nil m: removed).
func (s *Store) publish(id string, m *metadata) {
	s.view.Lock()
	defer s.view.Unlock()
	if m == nil {
		delete(s.instances, id)
		return
	}
	s.instances[id] = m
}

// metadataVersion is the version of the metadata file format.
const metadataVersion = 1

// maxMetadataBytes bounds a metadata file read at Open: names and digests,
// and in memory mode the sealed files (a message holds at most 1 MiB).
const maxMetadataBytes = 4 << 20

// metadata is what the store records about one instance, in meta/<id>.
type metadata struct {
	Version       int                  `json:"version"`
	ID            string               `json:"id"`
	AgreementID   string               `json:"agreementId"`
	Service       agreement.ServiceRef `json:"service"`
	GroupReadable bool                 `json:"groupReadable,omitempty"`
	Group         int                  `json:"group,omitempty"`
	// Files maps each service secret name to the hex SHA-256 of the
	// content last written to its file; "" before the first write. In
	// memory mode the file only lists the names: the digests are taken
	// from the sealed copy at Open, so no fingerprint of a value is at
	// rest.
	Files map[string]string `json:"files"`
	// Keys maps each secret whose file holds one value (formats raw and
	// value_only) to the Open Horizon key delivered with it: the Open
	// Horizon profile answers GET /api/v1/secrets/{name} with this key and
	// the file's content as the value, as anax answers the key/value it
	// received whatever the file format. It is kept here, in the agent's
	// root-only metadata, never in the instance's directory beside the
	// value.
	Keys map[string]string `json:"keys,omitempty"`
	// Options are the file options of the instance's secrets
	// (Instance.Files), from its proposal.
	Options      map[string]FileOptions `json:"fileOptions,omitempty"`
	Updated      []string               `json:"updated"`
	Acknowledged []string               `json:"acknowledged"`
	// Sequence is the envelope sequence of the newest agreement message
	// applied to the instance: a floor for the agreement's replay guard
	// that is written with the files it protects (see loadAgreements).
	Sequence uint64 `json:"sequence,omitempty"`
	// Sealed is, in memory mode, the instance's files sealed to the
	// agent's own keys (see sealFiles).
	Sealed []byte `json:"sealed,omitempty"`
	// Removing marks an instance whose removal has begun (memory mode):
	// Open finishes it rather than restoring the files.
	Removing bool `json:"removing,omitempty"`
}

func (m *metadata) dir() string       { return path.Join(dirInstances, m.ID) }
func (m *metadata) statusDir() string { return path.Join(dirStatus, m.ID) }
func (m *metadata) file(name string) string {
	return path.Join(dirInstances, m.ID, name)
}

func (m *metadata) dirMode() fs.FileMode {
	mode := fs.FileMode(0o700)
	if m.GroupReadable {
		mode = 0o750
	}
	// Files of other owners: they search the directory to reach them
	// (o+x, never listing it); each file's own mode keeps others out.
	for _, o := range m.Options {
		if o.UID != nil || o.GID != nil && (!m.GroupReadable || *o.GID != m.Group) {
			return mode | 0o001
		}
	}
	return mode
}

// fileModeOf, uidOf and gidOf are the mode and owner of a secret's file:
// its FileOptions, else the instance's.
func (m *metadata) fileModeOf(name string) fs.FileMode {
	if o := m.Options[name]; o.Mode != 0 {
		return o.Mode
	}
	return m.fileMode()
}

func (m *metadata) uidOf(name string) int {
	if o := m.Options[name]; o.UID != nil {
		return *o.UID
	}
	return noGroup
}

func (m *metadata) gidOf(name string) int {
	if o := m.Options[name]; o.GID != nil {
		return *o.GID
	}
	return m.gid()
}

func (m *metadata) fileMode() fs.FileMode {
	if m.GroupReadable {
		return 0o440
	}
	return 0o400
}

func (m *metadata) gid() int {
	if m.GroupReadable {
		return m.Group
	}
	return noGroup
}

func (m *metadata) clone() *metadata {
	c := *m
	c.Files = maps.Clone(m.Files)
	c.Keys = maps.Clone(m.Keys)
	c.Options = maps.Clone(m.Options)
	c.Updated = slices.Clone(m.Updated)
	c.Acknowledged = slices.Clone(m.Acknowledged)
	return &c
}

func (m *metadata) info() InstanceInfo {
	return InstanceInfo{
		ID:            m.ID,
		AgreementID:   m.AgreementID,
		Service:       m.Service,
		Secrets:       slices.Sorted(maps.Keys(m.Files)),
		Updated:       slices.Clone(m.Updated),
		Acknowledged:  slices.Clone(m.Acknowledged),
		GroupReadable: m.GroupReadable,
		Group:         m.Group,
	}
}

// setKey records the Open Horizon key of f (metadata.Keys) and reports
// whether it changed.
func (m *metadata) setKey(f rendered) bool {
	old, had := m.Keys[f.name]
	if !f.single {
		delete(m.Keys, f.name)
		return had
	}
	if had && old == f.ohKey {
		return false
	}
	if m.Keys == nil {
		m.Keys = map[string]string{}
	}
	m.Keys[f.name] = f.ohKey
	return true
}

// ohKey returns the Open Horizon key of a secret whose file holds one value,
// and false for a secret whose file holds every key (or that predates
// metadata.Keys).
func (m *metadata) ohKey(name string) (string, bool) {
	k, ok := m.Keys[name]
	return k, ok
}

// markUpdated records that name's file changed: updated, not acknowledged.
func (m *metadata) markUpdated(name string) {
	m.Updated = addName(m.Updated, name)
	m.Acknowledged = removeName(m.Acknowledged, name)
}

// addName inserts name into the sorted set names.
func addName(names []string, name string) []string {
	i, found := slices.BinarySearch(names, name)
	if found {
		return names
	}
	return slices.Insert(names, i, name)
}

// removeName deletes name from the sorted set names.
func removeName(names []string, name string) []string {
	i, found := slices.BinarySearch(names, name)
	if !found {
		return names
	}
	return slices.Delete(names, i, i+1)
}

// saveMetadata persists m atomically.
func (s *Store) saveMetadata(m *metadata) error {
	onDisk := m
	if s.memory() {
		onDisk = m.clone()
		for name := range onDisk.Files {
			onDisk.Files[name] = ""
		}
	}
	b, err := json.Marshal(onDisk)
	if err != nil {
		return err
	}
	if err := s.writeFile(s.meta, path.Join(dirMeta, m.ID), b, 0o600, noGroup, noGroup); err != nil {
		return fmt.Errorf("saving the metadata of instance %s: %w", quoteName(m.ID), err)
	}
	return syncDir(s.meta, dirMeta)
}

// readMetadata reads and checks meta/<id>.
func (s *Store) readMetadata(id string) (*metadata, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("metadata of instance %s: %w: %s", quoteName(id), edgesecrets.ErrInvalid, fmt.Sprintf(format, args...))
	}
	f, _, err := openRegular(s.meta, path.Join(dirMeta, id), os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	b, err := io.ReadAll(io.LimitReader(f, maxMetadataBytes+1))
	if err != nil {
		return nil, fmt.Errorf("metadata of instance %s: %w", quoteName(id), err)
	}
	if len(b) > maxMetadataBytes {
		return nil, bad("larger than %d bytes", maxMetadataBytes)
	}
	var m metadata
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, bad("not valid JSON")
	}
	switch {
	case m.Version != metadataVersion:
		return nil, bad("version %d, want %d", m.Version, metadataVersion)
	case m.ID != id:
		return nil, bad("records instance id %s", quoteName(m.ID))
	}
	if err := checkInstanceID(m.ID); err != nil {
		return nil, err
	}
	for name := range m.Files {
		if err := checkSecretName(name); err != nil {
			return nil, bad("%v", err)
		}
	}
	for name := range m.Keys {
		if _, ok := m.Files[name]; !ok {
			return nil, bad("records a key for secret %s, which it does not list", quoteName(name))
		}
	}
	if m.Files == nil {
		m.Files = map[string]string{}
	}
	slices.Sort(m.Updated)
	slices.Sort(m.Acknowledged)
	return &m, nil
}
