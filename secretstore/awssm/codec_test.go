package awssm

import (
	"testing"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeDataRejects(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"not JSON", "s3cr3t", "not a JSON object"},
		{"array", `["s3cr3t"]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"binary list not a list", `{"k":"v","edgesecrets:base64":"k"}`, "is not a list of key names"},
		{"listed key missing", `{"k":"v","edgesecrets:base64":["x"]}`, `lists "x" as base64 but has no such member`},
		{"listed key not base64", `{"k":"s3cr3t!","edgesecrets:base64":["k"]}`, `member "k" is listed as base64 but is not`},
		{"listed key not a string", `{"k":5,"edgesecrets:base64":["k"]}`, "is not a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeData(c.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "s3cr3t", "errors never quote values")
		})
	}
}

func TestEncodeDataKeepsTextReadable(t *testing.T) {
	s, err := encodeData(edgesecrets.Data{"a": []byte("<&>"), "b": []byte("ü\x00")})
	require.NoError(t, err)
	assert.Equal(t, `{"a":"<&>","b":"ü\u0000"}`, s)
	s, err = encodeData(edgesecrets.Data{})
	require.NoError(t, err)
	assert.Equal(t, `{}`, s)
}

// FuzzDecodeData feeds arbitrary SecretStrings (outside input: anyone with
// write access to the secret controls it) to the decoder. It must not panic,
// and whatever it accepts must survive an encode/decode round trip.
func FuzzDecodeData(f *testing.F) {
	for _, seed := range []string{
		`{"user":"alice","pass":"x"}`,
		`{"k":"/wD+eA==","edgesecrets:base64":["k"]}`,
		`{"port":5432,"tls":true,"opts":{"a":[1,2]},"n":null}`,
		`{"k":"v","edgesecrets:base64":["k"]}`,
		`{"edgesecrets:base64":[]}`,
		`"plain"`, `{`, `{"a":"\ud800"}`, ``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := decodeData(in)
		if err != nil {
			return
		}
		out, err := encodeData(d)
		if err != nil {
			return // over the size limit after re-encoding, or the reserved key
		}
		again, err := decodeData(out)
		if err != nil {
			t.Fatalf("re-encoded data does not decode: %v", err)
		}
		if !again.Equal(d) {
			t.Fatalf("round trip changed the data: keys %v vs %v", d.Keys(), again.Keys())
		}
	})
}

// FuzzEncodeData round-trips arbitrary keys and values.
func FuzzEncodeData(f *testing.F) {
	f.Add("k", []byte("v"), "bin", []byte{0xff, 0})
	f.Add("", []byte{}, "edgesecrets:base64", []byte("x"))
	f.Fuzz(func(t *testing.T, k1 string, v1 []byte, k2 string, v2 []byte) {
		d := edgesecrets.Data{k1: v1, k2: v2}
		s, err := encodeData(d)
		if err != nil {
			badKey := k1 == binaryKeysField || k2 == binaryKeysField || !utf8.ValidString(k1) || !utf8.ValidString(k2)
			if !badKey && len(k1)+len(k2)+len(v1)+len(v2) < maxSecretStringBytes/4 {
				t.Fatalf("small data rejected: %v", err)
			}
			return
		}
		got, err := decodeData(s)
		if err != nil {
			t.Fatalf("encoded data does not decode: %v", err)
		}
		if !got.Equal(d) {
			t.Fatalf("round trip changed the data")
		}
	})
}

func TestFromTagsLeavesOutAWSTags(t *testing.T) {
	tags := toTags(map[string]string{"team": "edge", "aws:cloudformation:stack-name": "s", "AWS:Other": "x"})
	assert.Equal(t, map[string]string{"team": "edge"}, fromTags(tags))
	assert.Nil(t, fromTags(toTags(map[string]string{"aws:x": "1"})), "no labels")
}
