package agentapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/secretstore"
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
		raw, err := renderSecret("s", agreement.SecretDetails{Format: agreement.FormatRaw, Data: secretstore.Data{key: value}})
		require.NoError(t, err)
		assert.True(t, bytes.Equal(value, raw))

		content, err := renderSecret("s", agreement.SecretDetails{Data: secretstore.Data{key: value}})
		if !utf8.ValidString(key) {
			require.ErrorIs(t, err, secretstore.ErrInvalid)
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
