package boltstate

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/internal/recordcodec"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// Values are a format byte followed by the compact binary form of
// package recordcodec. A new format gets a new byte, and the decoder keeps
// reading the old ones.
const (
	// recordFormat 2 adds Record.Unanswered at the end; format 1 records
	// (which lost it) read with it zero.
	recordFormat      byte = 2
	recordFormat1     byte = 1
	observationFormat byte = 1
	waitFormat        byte = 1
)

// errCorrupt marks a stored value that does not decode: the file was
// damaged or written by something else.
var errCorrupt = recordcodec.ErrCorrupt

// zeroUnix is the Unix time of the zero time.Time, so the zero time
// encodes as (0, 0).
const zeroUnix = recordcodec.ZeroUnix

// A stored record is: its format byte, its revision, its services (an
// recordcodec.EncodeServices value, length-prefixed, written by Create and copied by
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
func encodeTail(r *state.Record) []byte {
	e := recordcodec.Encoder{B: make([]byte, 0, 256)}
	e.Str(r.Node)
	e.Time(r.NextAttempt)
	e.AppendBody(r)
	return e.B
}

// assemble makes a stored record of its parts.
func assemble(revision uint64, services, tail []byte) []byte {
	e := recordcodec.Encoder{B: make([]byte, 0, 1+binary.MaxVarintLen64*2+len(services)+len(tail))}
	e.Byte(recordFormat)
	e.Uvarint(revision)
	e.Uvarint(uint64(len(services)))
	e.B = append(e.B, services...)
	e.B = append(e.B, tail...)
	return e.B
}

// encodeRecord encodes r whole, with the given revision.
func encodeRecord(r *state.Record, revision uint64) []byte {
	return assemble(revision, recordcodec.EncodeServices(r.Services), encodeTail(r))
}

func decodeHead(d *recordcodec.Decoder) head {
	f := d.Byte()
	if d.Err == nil && f != recordFormat && f != recordFormat1 {
		d.Err = fmt.Errorf("%w: record format %d is not known to this version of edgesecrets", errCorrupt, f)
	}
	return head{format: f, revision: d.Uvarint(), services: d.Raw(d.Count()), node: d.Str(), next: d.Time()}
}

// readHead decodes the head of a stored record.
func readHead(v []byte) (head, error) {
	d := recordcodec.Decoder{B: v}
	h := decodeHead(&d)
	return h, d.Err
}

// decodeRecord decodes a stored record, and returns its head too.
func decodeRecord(id string, v []byte) (state.Record, head, error) {
	d := recordcodec.Decoder{B: v}
	h := decodeHead(&d)
	if d.Err != nil {
		return state.Record{}, head{}, d.Err
	}
	services, err := recordcodec.DecodeServices(h.services)
	if err != nil {
		return state.Record{}, head{}, fmt.Errorf("services: %w", err)
	}
	r := state.Record{ID: id, Node: h.node, NextAttempt: h.next, Revision: h.revision, Services: services}
	if err := d.Body(&r, h.format == recordFormat1); err != nil {
		return state.Record{}, head{}, err
	}
	return r, h, nil
}

func encodeObservation(o state.Observation) []byte {
	e := recordcodec.Encoder{B: make([]byte, 0, 64)}
	e.Byte(observationFormat)
	e.Byte(byte(o.State))
	e.Tag(o.Tag)
	e.Time(o.Since)
	e.Time(o.CheckedAt)
	return e.B
}

func decodeObservation(name string, v []byte) (state.Observation, error) {
	d := recordcodec.Decoder{B: v}
	if f := d.Byte(); d.Err == nil && f != observationFormat {
		return state.Observation{}, fmt.Errorf("%w: observation format %d is not known to this version of edgesecrets", errCorrupt, f)
	}
	o := state.Observation{Name: name, State: state.ObservedState(d.Byte()), Tag: d.Tag(), Since: d.Time(), CheckedAt: d.Time()}
	return o, d.Done()
}

func encodeWait(w state.Wait) []byte {
	e := recordcodec.Encoder{B: make([]byte, 0, 64)}
	e.Byte(waitFormat)
	e.Strs(w.StoreNames)
	e.Time(w.CreatedAt)
	return e.B
}

func decodeWait(id string, v []byte) (state.Wait, error) {
	d := recordcodec.Decoder{B: v}
	if f := d.Byte(); d.Err == nil && f != waitFormat {
		return state.Wait{}, fmt.Errorf("%w: wait format %d is not known to this version of edgesecrets", errCorrupt, f)
	}
	w := state.Wait{ID: id, StoreNames: d.Strs(), CreatedAt: d.Time()}
	return w, d.Done()
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
