package edgesecrets

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
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
		b.WriteString("edgesecrets.Data{")
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
