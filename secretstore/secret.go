package secretstore

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/edgesecrets/edgesecrets"
)

// sum256 returns the SHA-256 of the canonical encoding of d: keys in sorted
// order, each key and value prefixed by its length. Two Data values have the
// same sum exactly when they are Equal. Change detection keeps this sum
// instead of the plaintext.
func sum256(d edgesecrets.Data) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, k := range d.Keys() {
		binary.BigEndian.PutUint64(n[:], uint64(len(k)))
		h.Write(n[:])
		h.Write([]byte(k))
		binary.BigEndian.PutUint64(n[:], uint64(len(d[k])))
		h.Write(n[:])
		h.Write(d[k])
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// Secret is one named set of key/value pairs in a store, with its metadata.
//
// Printing a Secret (fmt, slog, encoding/json, inside an error) shows its
// name, key names, labels and version, never the values.
//
// The redaction works through methods, which fmt cannot call on a value held
// in an unexported struct field: printing such a struct with fmt (or slog's
// text handler) shows the raw bytes. Keep secrets in exported fields or
// variables, or give the enclosing type its own String method.
type Secret struct {
	// Name is the slash-separated path of the secret relative to the store's
	// scope, for example "db/password". See ValidateName.
	Name string
	// Data holds the values.
	Data edgesecrets.Data
	// Labels are non-secret key/value metadata: Vault KV v2 custom_metadata,
	// AWS tags.
	Labels map[string]string
	// Version identifies the stored revision. It is opaque, set by the store
	// and ignored by Put; empty when the backend keeps no versions.
	Version string
	// UpdatedAt is when the current version was written, set by the store.
	UpdatedAt time.Time
}

// Clone returns a deep copy of s.
func (s *Secret) Clone() *Secret {
	if s == nil {
		return nil
	}
	c := *s
	c.Data = s.Data.Clone()
	c.Labels = maps.Clone(s.Labels)
	return &c
}

// Format implements fmt.Formatter: every verb prints metadata and key names only.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = fmt.Fprintf(f, "secretstore.Secret{Name:%q, Data:%#v, Labels:%#v, Version:%q, UpdatedAt:%s}",
			s.Name, s.Data, s.Labels, s.Version, s.UpdatedAt.Format(time.RFC3339Nano))
		return
	}
	_, _ = fmt.Fprintf(f, "{Name:%s Data:%v Labels:%v Version:%s UpdatedAt:%s}",
		s.Name, s.Data, s.Labels, s.Version, s.UpdatedAt.Format(time.RFC3339Nano))
}

// String returns the printed form of s, without values.
func (s Secret) String() string { return fmt.Sprint(s) }

// LogValue implements slog.LogValuer: name, key names, labels and version.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", s.Name),
		slog.Any("data", s.Data),
		slog.Any("labels", s.Labels),
		slog.String("version", s.Version),
	)
}

// Metadata is what Stat returns: everything about a secret but its values.
// Its fields mean what Secret's do.
type Metadata struct {
	Name      string
	Version   string
	UpdatedAt time.Time
	Labels    map[string]string
}
