package vault

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/binarykey"
)

// vaultJSON round-trips v through JSON the way vault/api decodes a
// response (numbers as json.Number).
func vaultJSON(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m))
	return m
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	data := edgesecrets.Data{
		"text":     []byte("plain ünïcode"),
		"empty":    {},
		"binary":   {0xff, 0x00, 0xfe},
		"marker":   []byte(`{"edgesecrets:base64":"AAEC"}`), // text that looks like the marker stays text
		"jsonlike": []byte(`{"a":1}`),
	}
	enc := encodeData(data)
	assert.Equal(t, "plain ünïcode", enc["text"], "UTF-8 is a plain JSON string")
	assert.Equal(t, map[string]any{binarykey.Marker: "/wD+"}, enc["binary"], "binary is the base64 marker object")
	got := decodeData(vaultJSON(t, enc))
	assert.True(t, data.Equal(got), "round trip: %v", got)
}

func TestDecodeValuesOtherToolsWrote(t *testing.T) {
	m := vaultJSON(t, map[string]any{
		"n": 42, "f": 1.5, "b": true, "null": nil,
		"obj": map[string]any{"x": "<y>"}, "arr": []any{1, "a"},
		"bad64":  map[string]any{binarykey.Marker: "not base64!"},
		"twokey": map[string]any{binarykey.Marker: "AA==", "other": 1},
	})
	got := decodeData(m)
	for k, want := range map[string]string{
		"n": "42", "f": "1.5", "b": "true", "null": "null",
		"obj": `{"x":"<y>"}`, "arr": `[1,"a"]`,
		"bad64":  `{"edgesecrets:base64":"not base64!"}`,
		"twokey": `{"edgesecrets:base64":"AA==","other":1}`,
	} {
		assert.Equal(t, want, string(got[k]), "key %q", k)
	}
}

func TestCheckLabels(t *testing.T) {
	many := map[string]string{}
	for i := range maxLabels + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"none", nil, ""},
		{"fine", map[string]string{"team": "edge", "rotation": "30 days"}, ""},
		{"empty value", map[string]string{"team": ""}, `label "team" has an empty value`},
		{"long key", map[string]string{strings.Repeat("k", 129): "v"}, "longer than 128 bytes"},
		{"long value", map[string]string{"k": strings.Repeat("v", 513)}, "value longer than 512 bytes"},
		{"control char", map[string]string{"k": "a\tb"}, "unprintable character in its value"},
		{"too many", many, "at most 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLabels(tc.labels)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			for _, v := range tc.labels {
				if len(v) > 3 {
					assert.NotContains(t, err.Error(), v, "label values are not echoed")
				}
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		md          map[string]any
		wantDeleted bool
	}{
		{"live", map[string]any{"version": 3, "created_time": "2026-01-01T00:00:00.123456789Z", "deletion_time": "", "destroyed": false}, false},
		{"soft-deleted", map[string]any{"version": 3, "deletion_time": "2026-01-02T00:00:00Z"}, true},
		{"deletion scheduled later", map[string]any{"version": 3, "deletion_time": "2026-02-01T00:00:00Z"}, false},
		{"destroyed", map[string]any{"version": 3, "destroyed": true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := parseVersion(vaultJSON(t, tc.md), 0, now)
			assert.Equal(t, 3, v.number)
			assert.Equal(t, tc.wantDeleted, v.deleted)
		})
	}
	v := parseVersion(vaultJSON(t, map[string]any{"created_time": "2026-01-01T00:00:00.5Z"}), 7, now)
	assert.Equal(t, 7, v.number, "the versions map's key supplies the number")
	assert.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 5e8, time.UTC), v.createdAt)
}

// FuzzDecodeData feeds arbitrary JSON objects, as a Vault response would
// carry them, to the data decoder: it must not panic, and re-encoding what
// it decoded must decode to the same bytes.
func FuzzDecodeData(f *testing.F) {
	f.Add(`{"a":"b"}`)
	f.Add(`{"bin":{"edgesecrets:base64":"AAEC/w=="},"n":1e400,"x":[null,{"y":true}]}`)
	f.Add(`{"bin":{"edgesecrets:base64":"%%%"}}`)
	f.Add(`{"s":"\ud800"}`)
	f.Fuzz(func(t *testing.T, js string) {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(js))
		dec.UseNumber()
		if dec.Decode(&m) != nil {
			return
		}
		got := decodeData(m)
		again := decodeData(vaultJSON(t, encodeData(got)))
		if !got.Equal(again) {
			t.Fatalf("re-encoding changed the data: %v vs %v", got.Keys(), again.Keys())
		}
		_ = decodeLabels(m)
	})
}
