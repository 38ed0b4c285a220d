package agbotsecrets

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/natefinch/atomic"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// changeFileVersion is the layout of the change file.
const changeFileVersion = 1

// maxChangeFileSize bounds the change file Login reads.
const maxChangeFileSize = 64 << 20

// clockKeySize is the size of the HMAC key of the change file.
const clockKeySize = 32

// errClock marks the change clock's own failures (its file).
var errClock = errors.New("agbotsecrets: change clock")

// clockEntry is what the clock keeps of one secret: the MAC of the content
// tag last reported ("" after the secret was seen missing) and the times
// reported with it, unix seconds.
type clockEntry struct {
	Tag     string `json:"tag"`
	Updated int64  `json:"updated"`
	Created int64  `json:"created,omitempty"`
}

// changeFile is the change file's JSON.
type changeFile struct {
	Version int                   `json:"version"`
	Key     string                `json:"key"`
	Secrets map[string]clockEntry `json:"secrets"`
}

// changeClock gives each revision of a secret an UpdateTime that moves
// whenever the content does (see the package documentation). It is safe
// for concurrent use.
type changeClock struct {
	mu      sync.Mutex
	path    string // "" keeps the clock in memory
	key     []byte
	entries map[string]clockEntry
	loaded  bool
	dirty   bool // a change the file does not hold yet
}

// load reads the change file, or starts a new clock (and file) when there
// is none. A clock already loaded is kept.
func (c *changeClock) load() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded {
		return nil
	}
	if c.path == "" {
		c.key, c.entries, c.loaded = newClockKey(), map[string]clockEntry{}, true
		return nil
	}
	data, err := readBounded(c.path, maxChangeFileSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.key, c.entries = newClockKey(), map[string]clockEntry{}
		if err := c.saveLocked(); err != nil {
			return err
		}
		c.loaded = true
		return nil
	case err != nil:
		return fmt.Errorf("%w: reading %s: %w", errClock, c.path, err)
	}
	key, entries, err := decodeChangeFile(data)
	if err != nil {
		return fmt.Errorf("%w: %s is corrupt (%w); it is not reset, since the times it holds keep rotations visible: restore it, or remove it knowing that a rotation made in the same second as the last report may then be missed", errClock, c.path, err)
	}
	c.key, c.entries, c.loaded = key, entries, true
	return nil
}

// readBounded reads at most limit bytes of a file.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: a failed close loses nothing
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	var b bytes.Buffer
	_, err = b.ReadFrom(f)
	return b.Bytes(), err
}

// decodeChangeFile decodes and checks a change file. Errors never quote
// the file.
func decodeChangeFile(data []byte) ([]byte, map[string]clockEntry, error) {
	var f changeFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, nil, errors.New("not the change clock's JSON: " + describeJSONError(err))
	}
	if dec.More() {
		return nil, nil, errors.New("data after the JSON object")
	}
	if f.Version != changeFileVersion {
		return nil, nil, fmt.Errorf("version %d, want %d", f.Version, changeFileVersion)
	}
	key, err := base64.StdEncoding.DecodeString(f.Key)
	if err != nil || len(key) != clockKeySize {
		return nil, nil, fmt.Errorf("the key is not %d bytes of base64", clockKeySize)
	}
	if f.Secrets == nil {
		f.Secrets = map[string]clockEntry{}
	}
	for name, e := range f.Secrets {
		switch {
		case secretstore.ValidateName(name) != nil:
			return nil, nil, fmt.Errorf("secret name %q: %w", name, secretstore.ValidateName(name))
		case e.Tag != "" && !isMAC(e.Tag):
			return nil, nil, fmt.Errorf("the tag of %q is not a 64-digit hex MAC", name)
		case e.Updated < 0 || e.Updated > math.MaxInt32 || e.Created < 0 || e.Created > math.MaxInt32:
			return nil, nil, fmt.Errorf("the times of %q are outside 0..%d", name, math.MaxInt32)
		}
	}
	return key, f.Secrets, nil
}

// isMAC reports whether s is a hex HMAC-SHA256.
func isMAC(s string) bool {
	if len(s) != hex.EncodedLen(sha256.Size) {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// newClockKey returns a random HMAC key.
func newClockKey() []byte {
	k := make([]byte, clockKeySize)
	_, _ = rand.Read(k) // never fails
	return k
}

// saveLocked writes the clock to its file (atomically, mode 0600). c.mu
// is held.
func (c *changeClock) saveLocked() error {
	if c.path == "" {
		c.dirty = false
		return nil
	}
	b, err := json.Marshal(changeFile{Version: changeFileVersion, Key: base64.StdEncoding.EncodeToString(c.key), Secrets: c.entries})
	if err != nil {
		return fmt.Errorf("%w: encoding: %w", errClock, err)
	}
	if err := atomic.WriteFile(c.path, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("%w: writing %s: %w", errClock, c.path, err)
	}
	// atomic.WriteFile keeps an existing file's mode; a new one is the
	// temporary file's, 0600 on Unix. Set it in case a file was made
	// another way.
	if err := os.Chmod(c.path, 0o600); err != nil {
		return fmt.Errorf("%w: %s: %w", errClock, c.path, err)
	}
	c.dirty = false
	return nil
}

// mac returns the MAC of a revision: its content tag and the store's time
// of it, so that a secret written again from scratch (a KV v2 version
// number starts again at 1) is a new revision.
func (c *changeClock) mac(tag secretstore.ContentTag, at time.Time) string {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte(tag.Encode()))
	h.Write([]byte{0})
	if !at.IsZero() {
		h.Write([]byte(strconv.FormatInt(at.UnixNano(), 10)))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// errTooLate is the clock's answer past anax's 32-bit seconds.
var errTooLate = fmt.Errorf("%w: the update time is past %d, the largest anax's agbot database holds", errClock, math.MaxInt32)

// observe returns the creation and update times to report for a secret
// seen with tag, whose revision the store dates at (zero: the store keeps
// no time), now being the time of the observation. A save that failed is
// returned with the times, which stay right in memory, and tried again at
// the next observation.
func (c *changeClock) observe(name string, tag secretstore.ContentTag, at, now time.Time) (created, updated int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded {
		return 0, 0, fmt.Errorf("%w: not loaded (Login was not called)", errClock)
	}
	m := c.mac(tag, at)
	e, seen := c.entries[name]
	if seen && e.Tag == m {
		return e.Created, e.Updated, c.retrySaveLocked()
	}
	u := now.Unix()
	if !at.IsZero() {
		u = at.Unix()
	}
	if seen {
		u = max(u, e.Updated+1)
	}
	if u > math.MaxInt32 {
		return 0, 0, errTooLate
	}
	ne := clockEntry{Tag: m, Updated: u, Created: u}
	if seen && e.Tag != "" && e.Created != 0 {
		ne.Created = e.Created
	}
	c.entries[name] = ne
	c.dirty = true
	return ne.Created, ne.Updated, c.saveLocked()
}

// absent notes that a secret was seen missing at now: when it appears
// again, whatever its content, it is a new revision, dated after the time
// anax recorded for the absence (anax takes its own clock's time, which may
// already be the next second).
func (c *changeClock) absent(name string, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded {
		return fmt.Errorf("%w: not loaded (Login was not called)", errClock)
	}
	e, seen := c.entries[name]
	if seen && e.Tag == "" {
		return c.retrySaveLocked()
	}
	u := now.Unix() + 1
	if seen {
		u = max(u, e.Updated+1)
	}
	if u > math.MaxInt32 {
		return errTooLate
	}
	c.entries[name] = clockEntry{Updated: u}
	c.dirty = true
	return c.saveLocked()
}

// retrySaveLocked saves the clock when an earlier save failed.
func (c *changeClock) retrySaveLocked() error {
	if !c.dirty {
		return nil
	}
	return c.saveLocked()
}
