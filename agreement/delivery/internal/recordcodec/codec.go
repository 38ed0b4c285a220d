// Package recordcodec is the compact binary form of the delivery
// engine's records that the embedded and PostgreSQL states store: varints,
// length-prefixed strings (any bytes, kept exactly), times as seconds and
// nanoseconds since the zero time, content tags in full (a checksum as its
// 32 bytes, never its printed, redacted form). Each state puts its own
// format byte in front of what it stores, and keeps reading its old ones.
package recordcodec

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// servicesFormat is the format byte of EncodeServices.
const servicesFormat byte = 1

// Content tag kinds in an encoded tag.
const (
	tagNone    byte = 0
	tagVersion byte = 1
	tagSum     byte = 2
)

// ErrCorrupt marks a stored value that does not decode: the file was
// damaged or written by something else.
var ErrCorrupt = errors.New("corrupt value")

// ZeroUnix is the Unix time of the zero time.Time, so the zero time
// encodes as (0, 0).
const ZeroUnix = -62135596800

// Encoder appends values to B.
type Encoder struct{ B []byte }

func (e *Encoder) Byte(v byte)      { e.B = append(e.B, v) }
func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }
func (e *Encoder) Varint(v int64)   { e.B = binary.AppendVarint(e.B, v) }
func (e *Encoder) Str(s string)     { e.Uvarint(uint64(len(s))); e.B = append(e.B, s...) }
func (e *Encoder) Bool(v bool)      { e.Byte(boolByte(v)) }
func (e *Encoder) Strs(ss []string) {
	e.Uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.Str(s)
	}
}
func (e *Encoder) Time(t time.Time)        { e.Varint(t.Unix() - ZeroUnix); e.Uvarint(uint64(t.Nanosecond())) }
func (e *Encoder) Content(c state.Content) { e.Str(c.StoreName); e.Tag(c.Tag) }

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// tag writes a content tag in full: a checksum as its 32 bytes, never its
// printed (redacted) form.
func (e *Encoder) Tag(t secretstore.ContentTag) {
	switch enc := t.Encode(); {
	case t == (secretstore.ContentTag{}):
		e.Byte(tagNone)
	case strings.HasPrefix(enc, "version:"):
		e.Byte(tagVersion)
		e.Str(enc[len("version:"):])
	default:
		sum, err := hex.DecodeString(enc[len("sha256:"):])
		if err != nil || len(sum) != 32 {
			panic("recordcodec: ContentTag.Encode gave an unexpected checksum form") // the format of a package of this module
		}
		e.Byte(tagSum)
		e.B = append(e.B, sum...)
	}
}

func (e *Encoder) Cancellation(c *state.Cancellation) {
	if c == nil {
		e.Bool(false)
		return
	}
	e.Bool(true)
	e.Str(c.Reason)
	e.Str(c.StoreName)
	e.Byte(byte(c.Kind)) // ObservedState's numbers (Missing 2, Forbidden 3) are the stored format
	e.Time(c.DecidedAt)
	e.Bool(c.Notified)
}

// Decoder reads values from B; the first problem is kept in Err and
// later reads return zero values.
type Decoder struct {
	B   []byte
	Err error
}

func (d *Decoder) Fail(what string) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: bad %s", ErrCorrupt, what)
	}
}

func (d *Decoder) Byte() byte {
	if d.Err != nil || len(d.B) == 0 {
		d.Fail("byte")
		return 0
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v
}

func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail("number")
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail("number")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// count reads a length that must fit in what is left, each item taking at
// least one byte, so a damaged length cannot make a huge allocation.
func (d *Decoder) Count() int {
	n := d.Uvarint()
	if n > uint64(len(d.B)) {
		d.Fail("length")
		return 0
	}
	return int(n)
}

func (d *Decoder) Raw(n int) []byte {
	if d.Err != nil || n > len(d.B) {
		d.Fail("length")
		return nil
	}
	v := d.B[:n]
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Str() string { return string(d.Raw(d.Count())) }

func (d *Decoder) Bool() bool {
	switch d.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.Fail("flag")
	return false
}

func (d *Decoder) Strs() []string {
	n := d.Count()
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.Str()
	}
	return out
}

func (d *Decoder) Time() time.Time {
	sec, nsec := d.Varint(), d.Uvarint()
	if d.Err != nil || nsec >= 1e9 {
		d.Fail("time")
		return time.Time{}
	}
	if sec == 0 && nsec == 0 {
		return time.Time{}
	}
	return time.Unix(sec+ZeroUnix, int64(nsec)).UTC()
}

func (d *Decoder) Tag() secretstore.ContentTag {
	var text string
	switch d.Byte() {
	case tagNone:
		return secretstore.ContentTag{}
	case tagVersion:
		text = "version:" + d.Str()
	case tagSum:
		text = "sha256:" + hex.EncodeToString(d.Raw(32))
	default:
		d.Fail("content tag kind")
	}
	if d.Err != nil {
		return secretstore.ContentTag{}
	}
	t, err := secretstore.ParseContentTag(text)
	if err != nil {
		d.Fail("content tag")
	}
	return t
}

func (d *Decoder) Content() state.Content {
	return state.Content{StoreName: d.Str(), Tag: d.Tag()}
}

func (d *Decoder) Cancellation() *state.Cancellation {
	if !d.Bool() {
		return nil
	}
	return &state.Cancellation{
		Reason:    d.Str(),
		StoreName: d.Str(),
		Kind:      state.ObservedState(d.Byte()),
		DecidedAt: d.Time(),
		Notified:  d.Bool(),
	}
}

// done reports the first error, or trailing bytes.
func (d *Decoder) Done() error {
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("value: trailing bytes")
	}
	return d.Err
}

// AppendBody encodes what a write of r decides beyond its id, revision,
// services, node and NextAttempt, which a state keeps apart (in its index
// keys or columns): slots, phase, cancellations, the agent's key,
// sequences, the message in flight, counters, diagnostics and times,
// Unanswered last.
func (e *Encoder) AppendBody(r *state.Record) {
	e.Uvarint(uint64(len(r.Slots)))
	for _, s := range r.Slots {
		e.Varint(int64(s.Service))
		e.Str(s.Name)
		e.Content(s.Desired)
		e.Content(s.Acked)
	}
	e.Byte(byte(r.Phase))
	e.Cancellation(r.Cancel)
	e.Cancellation(r.Held)
	e.Bool(r.Proposed)
	e.Str(string(r.AgentKey))
	e.Uvarint(r.Epoch)
	e.Uvarint(uint64(r.Counter))
	if f := r.InFlight; f == nil {
		e.Bool(false)
	} else {
		e.Bool(true)
		e.Str(string(f.Type))
		e.Str(f.Kind)
		e.Uvarint(f.Sequence)
		e.Uvarint(uint64(len(f.Contents)))
		for _, k := range slices.Sorted(maps.Keys(f.Contents)) {
			e.Varint(int64(k))
			e.Content(f.Contents[k])
		}
		e.Str(string(f.AgentKey))
		e.Time(f.At)
	}
	e.Uvarint(r.ReplySequence)
	e.Varint(int64(r.Attempts))
	e.Str(r.LastError)
	e.Str(r.Rejection)
	e.Time(r.LastReply)
	e.Time(r.CreatedAt)
	e.Time(r.UpdatedAt)
	e.Time(r.Unanswered)
}

// Body decodes what AppendBody encoded into r, to the end of B. Bodies
// written before Unanswered was kept end before it: withoutUnanswered
// reads one of those, leaving it zero.
func (d *Decoder) Body(r *state.Record, withoutUnanswered bool) error {
	r.Slots = nil
	if n := d.Count(); n > 0 {
		r.Slots = make([]state.Slot, n)
		for i := range r.Slots {
			r.Slots[i] = state.Slot{Service: int(d.Varint()), Name: d.Str(), Desired: d.Content(), Acked: d.Content()}
		}
	}
	r.Phase = state.Phase(d.Byte())
	r.Cancel = d.Cancellation()
	r.Held = d.Cancellation()
	r.Proposed = d.Bool()
	r.AgentKey = agreement.KeyID(d.Str())
	r.Epoch = d.Uvarint()
	counter := d.Uvarint()
	if counter > 1<<32-1 {
		d.Fail("counter")
	}
	r.Counter = uint32(counter)
	r.InFlight = nil
	if d.Bool() {
		f := &state.Sent{Type: agreement.MessageType(d.Str()), Kind: d.Str(), Sequence: d.Uvarint()}
		if n := d.Count(); n > 0 {
			f.Contents = make(map[int]state.Content, n)
			for range n {
				k := int(d.Varint())
				f.Contents[k] = d.Content()
			}
		}
		f.AgentKey = agreement.KeyID(d.Str())
		f.At = d.Time()
		r.InFlight = f
	}
	r.ReplySequence = d.Uvarint()
	r.Attempts = int(d.Varint())
	r.LastError = d.Str()
	r.Rejection = d.Str()
	r.LastReply = d.Time()
	r.CreatedAt = d.Time()
	r.UpdatedAt = d.Time()
	r.Unanswered = time.Time{}
	if !withoutUnanswered {
		r.Unanswered = d.Time()
	}
	return d.Done()
}

// EncodeServices encodes a record's services, secrets sorted by name so
// equal services encode equally.
func EncodeServices(services []binding.ServiceBinding) []byte {
	e := Encoder{B: make([]byte, 0, 128)}
	e.Byte(servicesFormat)
	e.Uvarint(uint64(len(services)))
	for _, sb := range services {
		s := sb.Service
		e.Str(s.Org)
		e.Str(s.URL)
		e.Str(s.Arch)
		e.Str(s.Version)
		e.Str(s.Container)
		e.Uvarint(uint64(len(sb.Secrets)))
		for _, name := range slices.Sorted(maps.Keys(sb.Secrets)) {
			b := sb.Secrets[name]
			e.Str(name)
			e.Strs(b.StoreNames)
			e.Str(b.Format)
		}
	}
	return e.B
}

func DecodeServices(v []byte) ([]binding.ServiceBinding, error) {
	d := Decoder{B: v}
	if f := d.Byte(); d.Err == nil && f != servicesFormat {
		return nil, fmt.Errorf("%w: services format %d is not known to this version of edgesecrets", ErrCorrupt, f)
	}
	n := d.Count()
	if n == 0 {
		return nil, d.Done()
	}
	out := make([]binding.ServiceBinding, n)
	for i := range out {
		out[i].Service = agreement.ServiceRef{Org: d.Str(), URL: d.Str(), Arch: d.Str(), Version: d.Str(), Container: d.Str()}
		m := d.Count()
		out[i].Secrets = make(map[string]binding.BoundSecret, m)
		for range m {
			name := d.Str()
			out[i].Secrets[name] = binding.BoundSecret{StoreNames: d.Strs(), Format: d.Str()}
		}
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	return out, nil
}
