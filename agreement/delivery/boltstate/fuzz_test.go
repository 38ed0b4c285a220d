package boltstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

func seedRecord(t testing.TB) state.Record {
	version, err := secretstore.ParseContentTag("version:42")
	require.NoError(t, err)
	sum := (&secretstore.Secret{Data: edgesecrets.Data{"k": []byte("v")}}).ContentTag()
	at := time.Date(2031, 1, 2, 3, 4, 5, 6, time.UTC)
	return state.Record{
		ID: "agr-1", Node: "node-1", Phase: state.PhaseCancelling,
		Services: []binding.ServiceBinding{{Service: agreement.ServiceRef{Org: "o", URL: "u"}, Secrets: map[string]binding.BoundSecret{"db": {StoreNames: []string{"org/n/db", "org/db"}, Format: "json"}}}},
		Slots:    []state.Slot{{Name: "db", Desired: state.Content{StoreName: "org/db", Tag: version}, Acked: state.Content{StoreName: "org/db", Tag: sum}}},
		Cancel:   &state.Cancellation{Reason: "r", StoreName: "org/db", Kind: state.Missing, DecidedAt: at, Notified: true},
		Proposed: true, AgentKey: "k", Epoch: 3, Counter: 9,
		InFlight:      &state.Sent{Type: agreement.TypeProposal, Sequence: 3<<32 | 9, Contents: map[int]state.Content{0: {StoreName: "org/db", Tag: sum}}, At: at},
		ReplySequence: 5, Attempts: -1, Unanswered: at.Add(time.Second), LastError: "e", NextAttempt: at, CreatedAt: at, UpdatedAt: at, Revision: 7,
	}
}

// FuzzDecodeRecord: a damaged record value is an error, never a panic,
// and whatever decodes encodes back to the same record.
func FuzzDecodeRecord(f *testing.F) {
	r := seedRecord(f)
	f.Add(encodeRecord(&r, r.Revision))
	f.Add(encodeRecord(&state.Record{}, 1))
	f.Add([]byte{recordFormat})
	f.Add(formatOne(f, r))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		got, h, err := decodeRecord("id", v)
		if err != nil {
			require.ErrorIs(t, err, errCorrupt)
			return
		}
		again, _, err := decodeRecord("id", encodeRecord(&got, got.Revision))
		require.NoError(t, err)
		require.Equal(t, got, again)
		spliced, _, err := decodeRecord("id", assemble(h.revision, h.services, encodeTail(&got)))
		require.NoError(t, err)
		require.Equal(t, got, spliced)
		h2, err := readHead(v)
		require.NoError(t, err)
		require.Equal(t, h, h2)
	})
}

// FuzzDecodeSmallValues: observations, waits and identity records.
func FuzzDecodeSmallValues(f *testing.F) {
	sum := (&secretstore.Secret{Data: edgesecrets.Data{"k": []byte("v")}}).ContentTag()
	f.Add(encodeObservation(state.Observation{Name: "n", State: state.Present, Tag: sum, Since: time.Unix(5, 6)}))
	f.Add(encodeWait(state.Wait{ID: "w", StoreNames: []string{"a", "b"}, CreatedAt: time.Unix(5, 6)}))
	f.Fuzz(func(t *testing.T, v []byte) {
		if o, err := decodeObservation("n", v); err == nil {
			again, err := decodeObservation("n", encodeObservation(o))
			require.NoError(t, err)
			require.Equal(t, o, again)
		} else {
			require.ErrorIs(t, err, errCorrupt)
		}
		if w, err := decodeWait("w", v); err == nil {
			again, err := decodeWait("w", encodeWait(w))
			require.NoError(t, err)
			require.Equal(t, w, again)
		} else {
			require.ErrorIs(t, err, errCorrupt)
		}
		if _, err := decodeIdentity(v); err != nil {
			require.ErrorIs(t, err, errCorrupt)
		}
	})
}

func TestRecordEncodingRoundTrips(t *testing.T) {
	r := seedRecord(t)
	got, _, err := decodeRecord(r.ID, encodeRecord(&r, r.Revision))
	require.NoError(t, err)
	require.Equal(t, r, got, "every field, services included, times to the nanosecond")
}

// formatOne encodes r as the first record format did: without Unanswered.
func formatOne(t testing.TB, r state.Record) []byte {
	t.Helper()
	r.Unanswered = time.Time{}
	v := encodeRecord(&r, r.Revision)
	require.Equal(t, []byte{0, 0}, v[len(v)-2:], "a zero time is two zero varints")
	v = v[:len(v)-2]
	v[0] = recordFormat1
	return v
}

// A record of the first format (written before Record.Unanswered was
// kept) still reads, with Unanswered zero; a format this version does not
// know is corrupt, named.
func TestRecordOfTheFirstFormatReads(t *testing.T) {
	r := seedRecord(t)
	got, _, err := decodeRecord(r.ID, formatOne(t, r))
	require.NoError(t, err)
	r.Unanswered = time.Time{}
	require.Equal(t, r, got)

	v := encodeRecord(&r, r.Revision)
	v[0] = recordFormat + 1
	_, _, err = decodeRecord(r.ID, v)
	require.ErrorIs(t, err, errCorrupt)
	require.ErrorContains(t, err, "record format 3 is not known")
}
