package boltstate

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
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Values are a format byte followed by a compact binary body: varints,
// length-prefixed strings (any bytes, kept exactly), times as seconds and
// nanoseconds since the zero time. A new format gets a new byte, and the
// decoder keeps reading the old ones.
const (
	// recordFormat 2 adds Record.Unanswered at the end; format 1 records
	// (which lost it) read with it zero.
	recordFormat      byte = 2
	recordFormat1     byte = 1
	servicesFormat    byte = 1
	observationFormat byte = 1
	waitFormat        byte = 1
)

// Content tag kinds in an encoded tag.
const (
	tagNone    byte = 0
	tagVersion byte = 1
	tagSum     byte = 2
)

// errCorrupt marks a stored value that does not decode: the file was
// damaged or written by something else.
var errCorrupt = errors.New("corrupt value")

// zeroUnix is the Unix time of the zero time.Time, so the zero time
// encodes as (0, 0).
var zeroUnix = time.Time{}.Unix()

type encoder struct{ b []byte }

func (e *encoder) byte(v byte)      { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bool(v bool)      { e.byte(boolByte(v)) }
func (e *encoder) strs(ss []string) {
	e.uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}
func (e *encoder) time(t time.Time)           { e.varint(t.Unix() - zeroUnix); e.uvarint(uint64(t.Nanosecond())) }
func (e *encoder) content(c delivery.Content) { e.str(c.StoreName); e.tag(c.Tag) }

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// tag writes a content tag in full: a checksum as its 32 bytes, never its
// printed (redacted) form.
func (e *encoder) tag(t secretstore.ContentTag) {
	switch enc := t.Encode(); {
	case t == (secretstore.ContentTag{}):
		e.byte(tagNone)
	case strings.HasPrefix(enc, "version:"):
		e.byte(tagVersion)
		e.str(enc[len("version:"):])
	default:
		sum, err := hex.DecodeString(enc[len("sha256:"):])
		if err != nil || len(sum) != 32 {
			panic("boltstate: ContentTag.Encode gave an unexpected checksum form") // the format of a package of this module
		}
		e.byte(tagSum)
		e.b = append(e.b, sum...)
	}
}

func (e *encoder) cancellation(c *delivery.Cancellation) {
	if c == nil {
		e.bool(false)
		return
	}
	e.bool(true)
	e.str(c.Reason)
	e.str(c.StoreName)
	e.byte(byte(c.Kind))
	e.time(c.DecidedAt)
	e.bool(c.Notified)
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s", errCorrupt, what)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length that must fit in what is left, each item taking at
// least one byte, so a damaged length cannot make a huge allocation.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("length")
		return 0
	}
	return int(n)
}

func (d *decoder) raw(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.fail("length")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.raw(d.count())) }

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("flag")
	return false
}

func (d *decoder) strs() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

func (d *decoder) time() time.Time {
	sec, nsec := d.varint(), d.uvarint()
	if d.err != nil || nsec >= 1e9 {
		d.fail("time")
		return time.Time{}
	}
	if sec == 0 && nsec == 0 {
		return time.Time{}
	}
	return time.Unix(sec+zeroUnix, int64(nsec)).UTC()
}

func (d *decoder) tag() secretstore.ContentTag {
	var text string
	switch d.byte() {
	case tagNone:
		return secretstore.ContentTag{}
	case tagVersion:
		text = "version:" + d.str()
	case tagSum:
		text = "sha256:" + hex.EncodeToString(d.raw(32))
	default:
		d.fail("content tag kind")
	}
	if d.err != nil {
		return secretstore.ContentTag{}
	}
	t, err := secretstore.ParseContentTag(text)
	if err != nil {
		d.fail("content tag")
	}
	return t
}

func (d *decoder) content() delivery.Content {
	return delivery.Content{StoreName: d.str(), Tag: d.tag()}
}

func (d *decoder) cancellation() *delivery.Cancellation {
	if !d.bool() {
		return nil
	}
	return &delivery.Cancellation{
		Reason:    d.str(),
		StoreName: d.str(),
		Kind:      secretstore.EventKind(d.byte()),
		DecidedAt: d.time(),
		Notified:  d.bool(),
	}
}

// done reports the first error, or trailing bytes.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("value: trailing bytes")
	}
	return d.err
}

// A stored record is: its format byte, its revision, its services (an
// encodeServices value, length-prefixed, written by Create and copied by
// every later write: services never change), its node and NextAttempt
// (what the indexes need), then the rest. Its id is the key.

// head is the part of a stored record read without decoding the rest.
type head struct {
	format   byte
	revision uint64
	services []byte
	node     string
	next     time.Time
}

// encodeTail encodes what a write of r decides: everything after the
// services.
func encodeTail(r *delivery.Record) []byte {
	e := encoder{b: make([]byte, 0, 256)}
	e.str(r.Node)
	e.time(r.NextAttempt)

	e.uvarint(uint64(len(r.Slots)))
	for _, s := range r.Slots {
		e.varint(int64(s.Service))
		e.str(s.Name)
		e.content(s.Desired)
		e.content(s.Acked)
	}
	e.byte(byte(r.Phase))
	e.cancellation(r.Cancel)
	e.cancellation(r.Held)
	e.bool(r.Proposed)
	e.str(string(r.AgentKey))
	e.uvarint(r.Epoch)
	e.uvarint(uint64(r.Counter))
	if f := r.InFlight; f == nil {
		e.bool(false)
	} else {
		e.bool(true)
		e.str(string(f.Type))
		e.str(f.Kind)
		e.uvarint(f.Sequence)
		e.uvarint(uint64(len(f.Contents)))
		for _, k := range slices.Sorted(maps.Keys(f.Contents)) {
			e.varint(int64(k))
			e.content(f.Contents[k])
		}
		e.str(string(f.AgentKey))
		e.time(f.At)
	}
	e.uvarint(r.ReplySequence)
	e.varint(int64(r.Attempts))
	e.str(r.LastError)
	e.str(r.Rejection)
	e.time(r.LastReply)
	e.time(r.CreatedAt)
	e.time(r.UpdatedAt)
	e.time(r.Unanswered)
	return e.b
}

// assemble makes a stored record of its parts.
func assemble(revision uint64, services, tail []byte) []byte {
	e := encoder{b: make([]byte, 0, 1+binary.MaxVarintLen64*2+len(services)+len(tail))}
	e.byte(recordFormat)
	e.uvarint(revision)
	e.uvarint(uint64(len(services)))
	e.b = append(e.b, services...)
	e.b = append(e.b, tail...)
	return e.b
}

// encodeRecord encodes r whole, with the given revision.
func encodeRecord(r *delivery.Record, revision uint64) []byte {
	return assemble(revision, encodeServices(r.Services), encodeTail(r))
}

func decodeHead(d *decoder) head {
	f := d.byte()
	if d.err == nil && f != recordFormat && f != recordFormat1 {
		d.err = fmt.Errorf("%w: record format %d is not known to this version of edgesecrets", errCorrupt, f)
	}
	return head{format: f, revision: d.uvarint(), services: d.raw(d.count()), node: d.str(), next: d.time()}
}

// readHead decodes the head of a stored record.
func readHead(v []byte) (head, error) {
	d := decoder{b: v}
	h := decodeHead(&d)
	return h, d.err
}

// decodeRecord decodes a stored record, and returns its head too.
func decodeRecord(id string, v []byte) (delivery.Record, head, error) {
	d := decoder{b: v}
	h := decodeHead(&d)
	if d.err != nil {
		return delivery.Record{}, head{}, d.err
	}
	services, err := decodeServices(h.services)
	if err != nil {
		return delivery.Record{}, head{}, fmt.Errorf("services: %w", err)
	}
	r := delivery.Record{ID: id, Node: h.node, NextAttempt: h.next, Revision: h.revision, Services: services}
	if n := d.count(); n > 0 {
		r.Slots = make([]delivery.Slot, n)
		for i := range r.Slots {
			r.Slots[i] = delivery.Slot{Service: int(d.varint()), Name: d.str(), Desired: d.content(), Acked: d.content()}
		}
	}
	r.Phase = delivery.Phase(d.byte())
	r.Cancel = d.cancellation()
	r.Held = d.cancellation()
	r.Proposed = d.bool()
	r.AgentKey = agreement.KeyID(d.str())
	r.Epoch = d.uvarint()
	counter := d.uvarint()
	if counter > 1<<32-1 {
		d.fail("counter")
	}
	r.Counter = uint32(counter)
	if d.bool() {
		f := &delivery.Sent{Type: agreement.MessageType(d.str()), Kind: d.str(), Sequence: d.uvarint()}
		if n := d.count(); n > 0 {
			f.Contents = make(map[int]delivery.Content, n)
			for range n {
				k := int(d.varint())
				f.Contents[k] = d.content()
			}
		}
		f.AgentKey = agreement.KeyID(d.str())
		f.At = d.time()
		r.InFlight = f
	}
	r.ReplySequence = d.uvarint()
	r.Attempts = int(d.varint())
	r.LastError = d.str()
	r.Rejection = d.str()
	r.LastReply = d.time()
	r.CreatedAt = d.time()
	r.UpdatedAt = d.time()
	if h.format >= recordFormat {
		r.Unanswered = d.time()
	}
	if err := d.done(); err != nil {
		return delivery.Record{}, head{}, err
	}
	return r, h, nil
}

// encodeServices encodes a record's services, secrets sorted by name so
// equal services encode equally.
func encodeServices(services []binding.ServiceBinding) []byte {
	e := encoder{b: make([]byte, 0, 128)}
	e.byte(servicesFormat)
	e.uvarint(uint64(len(services)))
	for _, sb := range services {
		s := sb.Service
		e.str(s.Org)
		e.str(s.URL)
		e.str(s.Arch)
		e.str(s.Version)
		e.str(s.Container)
		e.uvarint(uint64(len(sb.Secrets)))
		for _, name := range slices.Sorted(maps.Keys(sb.Secrets)) {
			b := sb.Secrets[name]
			e.str(name)
			e.strs(b.StoreNames)
			e.str(b.Format)
		}
	}
	return e.b
}

func decodeServices(v []byte) ([]binding.ServiceBinding, error) {
	d := decoder{b: v}
	if f := d.byte(); d.err == nil && f != servicesFormat {
		return nil, fmt.Errorf("%w: services format %d is not known to this version of edgesecrets", errCorrupt, f)
	}
	n := d.count()
	if n == 0 {
		return nil, d.done()
	}
	out := make([]binding.ServiceBinding, n)
	for i := range out {
		out[i].Service = agreement.ServiceRef{Org: d.str(), URL: d.str(), Arch: d.str(), Version: d.str(), Container: d.str()}
		m := d.count()
		out[i].Secrets = make(map[string]binding.BoundSecret, m)
		for range m {
			name := d.str()
			out[i].Secrets[name] = binding.BoundSecret{StoreNames: d.strs(), Format: d.str()}
		}
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return out, nil
}

func encodeObservation(o delivery.Observation) []byte {
	e := encoder{b: make([]byte, 0, 64)}
	e.byte(observationFormat)
	e.byte(byte(o.State))
	e.tag(o.Tag)
	e.time(o.Since)
	e.time(o.CheckedAt)
	return e.b
}

func decodeObservation(name string, v []byte) (delivery.Observation, error) {
	d := decoder{b: v}
	if f := d.byte(); d.err == nil && f != observationFormat {
		return delivery.Observation{}, fmt.Errorf("%w: observation format %d is not known to this version of edgesecrets", errCorrupt, f)
	}
	o := delivery.Observation{Name: name, State: delivery.ObservedState(d.byte()), Tag: d.tag(), Since: d.time(), CheckedAt: d.time()}
	return o, d.done()
}

func encodeWait(w delivery.Wait) []byte {
	e := encoder{b: make([]byte, 0, 64)}
	e.byte(waitFormat)
	e.strs(w.StoreNames)
	e.time(w.CreatedAt)
	return e.b
}

func decodeWait(id string, v []byte) (delivery.Wait, error) {
	d := decoder{b: v}
	if f := d.byte(); d.err == nil && f != waitFormat {
		return delivery.Wait{}, fmt.Errorf("%w: wait format %d is not known to this version of edgesecrets", errCorrupt, f)
	}
	w := delivery.Wait{ID: id, StoreNames: d.strs(), CreatedAt: d.time()}
	return w, d.done()
}

// dueKey is the key of a record in the due index: NextAttempt as
// big-endian seconds and nanoseconds since the zero time, so keys sort by
// time, then the id. Times before the zero time sort as the zero time.
func dueKey(next time.Time, id string) []byte {
	k := make([]byte, 12, 12+len(id))
	putDueTime(k, next)
	return append(k, id...)
}

func putDueTime(k []byte, t time.Time) {
	sec := max(t.Unix()-zeroUnix, 0)
	binary.BigEndian.PutUint64(k, uint64(sec))
	binary.BigEndian.PutUint32(k[8:], uint32(t.Nanosecond()))
}
