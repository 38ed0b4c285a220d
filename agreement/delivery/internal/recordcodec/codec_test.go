package recordcodec

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

func sample(t testing.TB) state.Record {
	version, err := secretstore.ParseContentTag("version:42")
	require.NoError(t, err)
	sum := (&secretstore.Secret{Data: edgesecrets.Data{"k": []byte("v")}}).ContentTag()
	at := time.Date(2031, 1, 2, 3, 4, 5, 6, time.UTC)
	return state.Record{
		Services: []binding.ServiceBinding{{Service: agreement.ServiceRef{Org: "o", URL: "u"}, Secrets: map[string]binding.BoundSecret{"db": {StoreNames: []string{"org/n/db", "org/db"}, Format: "json"}}}},
		Slots:    []state.Slot{{Name: "db", Desired: state.Content{StoreName: "org/db", Tag: version}, Acked: state.Content{StoreName: "org/db", Tag: sum}}},
		Phase:    state.PhaseCancelling,
		Cancel:   &state.Cancellation{Reason: "r", StoreName: "org/db", Kind: state.Missing, DecidedAt: at, Notified: true},
		Proposed: true, AgentKey: "k", Epoch: 3, Counter: 9,
		InFlight:      &state.Sent{Type: agreement.TypeProposal, Sequence: 3<<32 | 9, Contents: map[int]state.Content{0: {StoreName: "org/db", Tag: sum}}, At: at},
		ReplySequence: 5, Attempts: -1, Unanswered: at.Add(time.Second), LastError: "e", CreatedAt: at, UpdatedAt: at,
	}
}

func body(r *state.Record) []byte {
	e := Encoder{}
	e.AppendBody(r)
	return e.B
}

// A cancellation's kind is stored as its state.ObservedState number,
// the number the watcher's event kind had when records held that (Deleted
// 2, Forbidden 3): records written before read the same.
func TestCancellationKindNumbersAreTheStoredFormat(t *testing.T) {
	require.EqualValues(t, 2, state.Missing)
	require.EqualValues(t, 3, state.Forbidden)
}

func TestZeroUnixIsTheZeroTime(t *testing.T) {
	require.Equal(t, time.Time{}.Unix(), int64(ZeroUnix))
}

// FuzzDecodeBody: a damaged body is an error, never a panic, and whatever
// decodes encodes back to the same fields.
func FuzzDecodeBody(f *testing.F) {
	r := sample(f)
	f.Add(body(&r), false)
	f.Add(body(&state.Record{}), false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, v []byte, withoutUnanswered bool) {
		var got state.Record
		d := Decoder{B: v}
		if err := d.Body(&got, withoutUnanswered); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		var again state.Record
		d = Decoder{B: body(&got)}
		require.NoError(t, d.Body(&again, false))
		require.Equal(t, got, again)
	})
}

// FuzzDecodeServices: the same for services.
func FuzzDecodeServices(f *testing.F) {
	r := sample(f)
	f.Add(EncodeServices(r.Services))
	f.Add(EncodeServices(nil))
	f.Fuzz(func(t *testing.T, v []byte) {
		got, err := DecodeServices(v)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		again, err := DecodeServices(EncodeServices(got))
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}

func TestBodyRoundTrips(t *testing.T) {
	r := sample(t)
	var got state.Record
	got.Services = r.Services // kept apart
	d := Decoder{B: body(&r)}
	require.NoError(t, d.Body(&got, false))
	require.Equal(t, r, got, "every field a body holds, times to the nanosecond")
}
