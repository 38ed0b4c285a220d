package secretstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
)

// Redacted is what every printed form of a secret value shows instead of the value.
const Redacted = "[redacted]"

// Data holds a secret's key/value pairs. Values are bytes so binary secrets
// (keys, certificates) survive unchanged.
//
// Data never prints its values: every fmt verb, slog and encoding/json show
// the key names with [Redacted] in place of each value. Read a value by
// indexing the map.
type Data map[string][]byte

// Format implements fmt.Formatter so that %v, %+v, %#v, %s, %q, %x and any
// other verb print key names only.
func (d Data) Format(f fmt.State, verb rune) {
	var b strings.Builder
	if verb == 'v' && f.Flag('#') {
		b.WriteString("secretstore.Data{")
		for i, k := range d.Keys() {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q:%s", k, Redacted)
		}
		b.WriteString("}")
	} else {
		b.WriteString("map[")
		for i, k := range d.Keys() {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(k + ":" + Redacted)
		}
		b.WriteString("]")
	}
	_, _ = io.WriteString(f, b.String())
}

// String returns the key names with redacted values.
func (d Data) String() string { return fmt.Sprint(d) }

// GoString returns the key names with redacted values.
func (d Data) GoString() string { return fmt.Sprintf("%#v", d) }

// LogValue implements slog.LogValuer: a group of key names, each [Redacted].
func (d Data) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(d))
	for _, k := range d.Keys() {
		attrs = append(attrs, slog.String(k, Redacted))
	}
	return slog.GroupValue(attrs...)
}

// MarshalJSON implements json.Marshaler with values redacted, so a Secret or
// Data encoded by accident (in a log line, an API error) leaks nothing.
// Code that must transport values encodes them explicitly.
func (d Data) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range d.Keys() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%q", k, Redacted)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Keys returns the key names in sorted order.
func (d Data) Keys() []string { return slices.Sorted(maps.Keys(d)) }

// Clone returns a deep copy. The copy of a nil Data is nil.
func (d Data) Clone() Data {
	if d == nil {
		return nil
	}
	c := make(Data, len(d))
	for k, v := range d {
		c[k] = bytes.Clone(v)
		if c[k] == nil {
			c[k] = []byte{}
		}
	}
	return c
}

// Wipe overwrites every value with zeros, in place: call it when a copy
// of a secret is no longer needed, so that it is not left for the garbage
// collector to free whenever it does. The keys stay.
func (d Data) Wipe() {
	for _, v := range d {
		clear(v)
	}
}

// Equal reports whether d and other hold the same keys with the same bytes.
// A nil and an empty Data are equal; so are a nil and an empty value.
func (d Data) Equal(other Data) bool {
	if len(d) != len(other) {
		return false
	}
	for k, v := range d {
		w, ok := other[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// sum256 returns the SHA-256 of the canonical encoding of d: keys in sorted
// order, each key and value prefixed by its length. Two Data values have the
// same sum exactly when they are Equal. Change detection keeps this sum
// instead of the plaintext.
func (d Data) sum256() [sha256.Size]byte {
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
	Data Data
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

// GoString returns the %#v form of s, without values.
func (s Secret) GoString() string { return fmt.Sprintf("%#v", s) }

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
