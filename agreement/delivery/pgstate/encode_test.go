package pgstate

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/internal/recordcodec"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

var contentTagType = reflect.TypeFor[secretstore.ContentTag]()

// fill sets every field reachable from v to a random non-zero value, so
// that a field the stored form forgets shows in a round trip.
func fill(t testing.TB, rng *rand.Rand, v reflect.Value) {
	switch {
	case v.Type() == contentTagType:
		tag := (&secretstore.Secret{Data: edgesecrets.Data{"v": fmt.Appendf(nil, "%d", rng.Int())}}).ContentTag()
		if rng.IntN(2) == 0 {
			var err error
			tag, err = secretstore.ParseContentTag(fmt.Sprintf("version:%d/ü", rng.Int()))
			require.NoError(t, err)
		}
		v.Set(reflect.ValueOf(tag))
		return
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s-%d-ä/€", rng.Int()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1 + rng.Int64N(100))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1 + rng.Uint64N(1<<(v.Type().Bits()-1)))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, rng, v.Elem())
	case reflect.Slice:
		n := 1 + rng.IntN(3)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(t, rng, v.Index(i))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 1 + rng.IntN(3) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, rng, k)
			fill(t, rng, e)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			require.True(t, v.Type().Field(i).IsExported(), "%s.%s: a field the stored form cannot reach", v.Type(), v.Type().Field(i).Name)
			fill(t, rng, v.Field(i))
		}
	default:
		t.Fatalf("fill: %s of kind %s", v.Type(), v.Kind())
	}
}

// roundTrip stores r's body (JSON, or binary) and services as the State
// does and reads them back, with the columns copied.
func roundTrip(t *testing.T, r *state.Record, binary bool) state.Record {
	t.Helper()
	services, _, err := encodeServices(r.ID, r.Services)
	require.NoError(t, err)
	got := state.Record{ID: r.ID, Node: r.Node, Revision: r.Revision, NextAttempt: r.NextAttempt, Attempts: r.Attempts}
	if binary {
		require.NoError(t, decodeBodyBin(&got, encodeBodyBin(r)))
		got.Attempts = r.Attempts // a column: the body's copy is not read
	} else {
		data, err := encodeBody(r)
		require.NoError(t, err)
		require.NoError(t, decodeBody(&got, data))
	}
	got.Services, err = decodeServices(services)
	require.NoError(t, err)
	return got
}

// TestEveryRecordFieldRoundTrips fills every field of state.Record,
// recursively, and requires it back from either body: a field added to
// the record model and not to a stored form fails here.
func TestEveryRecordFieldRoundTrips(t *testing.T) {
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary=%v", binary), func(t *testing.T) {
			for seed := range uint64(50) {
				rng := rand.New(rand.NewPCG(seed, 2))
				var r state.Record
				fill(t, rng, reflect.ValueOf(&r).Elem())
				require.Equal(t, r, roundTrip(t, &r, binary), "seed %d", seed)
			}
		})
	}
}

func TestFreeTextIsMadeStorable(t *testing.T) {
	r := &state.Record{
		ID: "agr-1", LastError: "agent said \xff\xfe", Rejection: "nul\x00inside",
		Cancel: &state.Cancellation{Reason: "bad \xc3"},
	}
	got := roundTrip(t, r, false)
	assert.Equal(t, "agent said \uFFFD", got.LastError, "invalid UTF-8 in a diagnostic becomes U+FFFD")
	assert.Equal(t, "nul\uFFFDinside", got.Rejection, "a NUL byte in a diagnostic becomes U+FFFD")
	assert.Equal(t, "bad \uFFFD", got.Cancel.Reason)
}

func TestNamesMustBeText(t *testing.T) {
	tag, err := secretstore.ParseContentTag("version:1")
	require.NoError(t, err)
	for name, r := range map[string]*state.Record{
		"slot name":     {ID: "agr-1", Slots: []state.Slot{{Name: "a\x00b"}}},
		"desired store": {ID: "agr-1", Slots: []state.Slot{{Name: "a", Desired: state.Content{StoreName: "org/\xff", Tag: tag}}}},
		"agent key":     {ID: "agr-1", AgentKey: "key\x00"},
		"in-flight":     {ID: "agr-1", InFlight: &state.Sent{Contents: map[int]state.Content{0: {StoreName: "\xfe"}}}},
	} {
		_, err := encodeBody(r)
		require.ErrorIs(t, err, errBadInput, name)
		assert.Contains(t, err.Error(), `record "agr-1"`, name)
	}
}

// FuzzDecodeBody: a stored body is outside input (the database may hold
// anything): decoding never panics, and what decodes stores back the same.
func FuzzDecodeBody(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3 {
		var r state.Record
		fill(f, rng, reflect.ValueOf(&r).Elem())
		data, err := encodeBody(&r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"slots":[{"desired":{"tag":"nonsense"}}]}`))
	f.Add([]byte(`{"inFlight":{"contents":{"x":{}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r state.Record
		if err := decodeBody(&r, data); err != nil {
			return
		}
		again, err := encodeBody(&r)
		if err != nil {
			require.ErrorIs(t, err, errBadInput)
			return
		}
		var back state.Record
		require.NoError(t, decodeBody(&back, again))
		require.Equal(t, r, back)
	})
}

// FuzzDecodeBodyBin: the binary body is outside input too: a damaged one,
// or one of a format this version does not know, is an error naming it,
// never a panic; what decodes stores back the same.
func FuzzDecodeBodyBin(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	var r state.Record
	fill(f, rng, reflect.ValueOf(&r).Elem())
	f.Add(encodeBodyBin(&r))
	f.Add(encodeBodyBin(&state.Record{}))
	f.Add([]byte{bodyBinFormat + 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var got state.Record
		if err := decodeBodyBin(&got, data); err != nil {
			require.ErrorIs(t, err, recordcodec.ErrCorrupt)
			if len(data) > 0 && data[0] != bodyBinFormat {
				require.ErrorContains(t, err, "binary body format")
			}
			return
		}
		var back state.Record
		require.NoError(t, decodeBodyBin(&back, encodeBodyBin(&got)))
		require.Equal(t, got, back)
	})
}

// FuzzDecodeServices: the same for the stored services.
func FuzzDecodeServices(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	var r state.Record
	fill(f, rng, reflect.ValueOf(&r).Elem())
	data, _, err := encodeServices(r.ID, r.Services)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`[{"secrets":{"a":{"storeNames":null}}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		services, err := decodeServices(data)
		if err != nil {
			return
		}
		again, _, err := encodeServices("fuzz", services)
		if err != nil {
			require.ErrorIs(t, err, errBadInput)
			return
		}
		back, err := decodeServices(again)
		require.NoError(t, err)
		require.Equal(t, services, back)
		require.False(t, strings.Contains(string(again), "\x00"))
	})
}

// A stored time decodes the same whether written as MarshalJSON writes it
// or with JSON escapes (an operator's edit, another writer); what is not
// a time is refused.
func TestStampDecodes(t *testing.T) {
	want := time.Date(2026, 11, 28, 12, 0, 0, 123456789, time.UTC)
	for _, c := range []struct {
		name, in string
		ok       bool
	}{
		{"as written", `"2026-11-28T12:00:00.123456789Z"`, true},
		{"escaped", `"\u0032026-11-28T12:00:00.123456789Z"`, true},
		{"another zone", `"2026-11-28T13:00:00.123456789+01:00"`, true},
		{"not a time", `"yesterday"`, false},
		{"not a string", `20261128`, false},
		{"an escaped quote", `"2026-11-28T12:00:00Z\""`, false},
		{"unterminated", `"2026-11-28T12:00:00Z`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s stamp
			err := s.UnmarshalJSON([]byte(c.in))
			if !c.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.True(t, want.Equal(s.Time), "%v", s.Time)
			assert.Equal(t, time.UTC, s.Location())
		})
	}
}

// The services cache hands every caller a copy of its own: changing one
// record's services changes neither the cache nor another record's; a
// caller that only reads may share the cache's own instead; a
// stored form that does not decode is refused every time, not cached;
// past its bound it starts again and still decodes.
func TestServicesCacheCopies(t *testing.T) {
	data, _, err := encodeServices("agr-1", newServices("org/a", "org/b"))
	require.NoError(t, err)
	var c servicesCache
	first, err := c.decode(data, ownServices)
	require.NoError(t, err)
	first[0].Secrets["s0"].StoreNames[0] = "changed"
	first[0].Secrets["new"] = first[0].Secrets["s0"]
	first[0].Service.URL = "changed"
	second, err := c.decode(data, ownServices)
	require.NoError(t, err)
	want, err := decodeServices(data)
	require.NoError(t, err)
	assert.Equal(t, want, second, "a caller's change reaches neither the cache nor the next caller")

	// A reader that only reads (the review) shares the cache's own.
	shared, err := c.decode(data, sharedServices)
	require.NoError(t, err)
	again, err := c.decode(data, sharedServices)
	require.NoError(t, err)
	assert.Equal(t, want, shared)
	assert.Same(t, &shared[0], &again[0], "one decoded value for every reader")
	assert.NotSame(t, &shared[0], &second[0], "an own copy is not the shared one")

	for range 2 {
		_, err := c.decode([]byte(`[{"org": 1}]`), ownServices)
		assert.Error(t, err)
	}
	for i := range maxCachedServices + 10 {
		other, _, err := encodeServices("agr-1", newServices(fmt.Sprintf("org/%d", i)))
		require.NoError(t, err)
		got, err := c.decode(other, ownServices)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("org/%d", i), got[0].Secrets["s0"].StoreNames[0])
	}
	assert.LessOrEqual(t, len(c.m), maxCachedServices)
	again, err = c.decode(data, ownServices)
	require.NoError(t, err)
	assert.Equal(t, want, again)
}

// newServices is one service binding each name to a secret of its own,
// s0, s1, ...
func newServices(names ...string) []binding.ServiceBinding {
	secrets := map[string]binding.BoundSecret{}
	for i, n := range names {
		secrets[fmt.Sprintf("s%d", i)] = binding.BoundSecret{StoreNames: []string{n}, Format: "json"}
	}
	return []binding.ServiceBinding{{Service: agreement.ServiceRef{Org: "org", URL: "svc"}, Secrets: secrets}}
}
