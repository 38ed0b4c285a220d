package agentapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// FuzzRenderSecret checks that a JSON-format file decodes back to exactly
// the delivered key and value (a string, or {"base64":...} for bytes that
// are not UTF-8), and that a raw file is the value's bytes.
func FuzzRenderSecret(f *testing.F) {
	f.Add("password", []byte("s3cr3t"))
	f.Add("k<&>", []byte("<\"\\\n>"))
	f.Add("bin", []byte{0xff, 0x00})
	f.Add("", []byte{})
	f.Add("\xff", []byte("x"))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		raw, err := renderSecret("s", agreement.SecretDetails{Format: agreement.FormatRaw, Data: edgesecrets.Data{key: value}})
		require.NoError(t, err)
		assert.True(t, bytes.Equal(value, raw))

		only, err := renderSecret("s", agreement.SecretDetails{Format: agreement.FormatValueOnly, Data: edgesecrets.Data{key: []byte("k"), "value": value}})
		require.NoError(t, err)
		assert.True(t, bytes.Equal(value, only), "value_only writes the value key's bytes")

		// Written the Open Horizon way, whatever the key says: raw writes the value.
		oh, err := renderSecret("s", agreement.SecretDetails{Format: agreement.FormatRaw, Data: edgesecrets.Data{"key": []byte(key), "value": value}})
		require.NoError(t, err)
		assert.True(t, bytes.Equal(value, oh), "raw writes an Open Horizon secret's value")
		key2, single := ohKeyOf(agreement.SecretDetails{Format: agreement.FormatRaw, Data: edgesecrets.Data{"key": []byte(key), "value": value}})
		assert.True(t, single)
		assert.Equal(t, key, key2, "the key delivered with it is kept")

		content, err := renderSecret("s", agreement.SecretDetails{Data: edgesecrets.Data{key: value}})
		if !utf8.ValidString(key) {
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			if len(value) >= 6 { // shorter values occur in any sentence by chance
				assert.NotContains(t, err.Error(), string(value))
			}
			return
		}
		require.NoError(t, err)
		var obj map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(content, &obj), "%q", content)
		require.Len(t, obj, 1)
		if utf8.Valid(value) {
			var s string
			require.NoError(t, json.Unmarshal(obj[key], &s))
			assert.Equal(t, string(value), s)
			return
		}
		var b binaryValue
		require.NoError(t, json.Unmarshal(obj[key], &b))
		got, err := base64.StdEncoding.DecodeString(b.Base64)
		require.NoError(t, err)
		assert.Equal(t, value, got)
	})
}

// TestRenderOpenHorizonSecret renders the secret helloSecretWorld's
// service reads (open-horizon/examples
// edge/services/helloSecretWorld/horizon/hw_who, {"key":"name","value":"World"})
// in each format. Open Horizon's agent writes the JSON form with
// json.Marshal of {"key","value"} and value_only as the value's bytes
// (anax resource/secrets_manager.go, WriteSecretContent).
func TestRenderOpenHorizonSecret(t *testing.T) {
	hwWho := edgesecrets.Data{"key": []byte("name"), "value": []byte("World")}
	cases := []struct {
		format  string
		data    edgesecrets.Data
		want    string
		wantErr string
	}{
		{format: "", data: hwWho, want: `{"key":"name","value":"World"}`},
		{format: agreement.FormatJSON, data: hwWho, want: `{"key":"name","value":"World"}`},
		{format: agreement.FormatValueOnly, data: hwWho, want: "World"},
		{format: agreement.FormatValueOnly, data: edgesecrets.Data{"value": {}}, want: ""},
		{format: agreement.FormatValueOnly, data: edgesecrets.Data{"password": []byte("s3cr3t-pw")}, wantErr: `format "value_only" needs a "value" key, has 1 other keys`},
		{format: agreement.FormatRaw, data: hwWho, want: "World"},
		{format: agreement.FormatRaw, data: edgesecrets.Data{"password": []byte("s3cr3t-pw")}, want: "s3cr3t-pw"},
		{format: agreement.FormatRaw, data: edgesecrets.Data{"user": []byte("World"), "password": []byte("s3cr3t-pw")}, wantErr: `format "raw" needs exactly one key, or Open Horizon's "key" and "value"; has 2 keys`},
		{format: "yaml", data: hwWho, wantErr: `unknown format "yaml"`},
	}
	for _, c := range cases {
		t.Run(c.format+"/"+c.want+c.wantErr, func(t *testing.T) {
			got, err := renderSecret("hw_who", agreement.SecretDetails{Format: c.format, Data: c.data})
			if c.wantErr != "" {
				require.ErrorIs(t, err, edgesecrets.ErrInvalid)
				assert.ErrorContains(t, err, c.wantErr)
				assert.NotContains(t, err.Error(), "s3cr3t-pw")
				assert.NotContains(t, err.Error(), "World")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, string(got))
		})
	}
}
