package ohsecret

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name, body string
		want       Details
		wantErr    string
	}{
		// hzn secretsmanager secret add sends both members
		// (open-horizon/anax cli/secrets_manager/secrets_manager.go, SecretAdd, lines 221-254).
		{"hzn's body", `{"key":"name","value":"World"}`, Details{Key: "name", Value: "World"}, ""},
		{"empty key", `{"key":"","value":"v"}`, Details{Value: "v"}, ""},
		{"escapes", `{"key":"k","value":"line\n\u00e9<"}`, Details{Key: "k", Value: "line\né<"}, ""},
		{"value missing", `{"key":"k"}`, Details{}, `member "value" missing`},
		{"both missing", `{}`, Details{}, `member "key" and "value" missing`},
		{"unknown member", `{"key":"k","value":"v","extra":1}`, Details{}, "extra"},
		{"value not a string", `{"key":"k","value":42}`, Details{}, "secret body"},
		{"array", `["k","v"]`, Details{}, "secret body"},
		{"trailing data", `{"key":"k","value":"v"} {}`, Details{}, "secret body"},
		{"empty", ``, Details{}, "secret body"},
		{"too large", `{"key":"k","value":"` + strings.Repeat("x", 100) + `"}`, Details{}, "secret body too large: more than 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(strings.NewReader(tt.body), 64)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), "42")
				assert.Equal(t, strings.HasPrefix(tt.name, "too large"), errors.Is(err, ErrTooLarge))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestFromData(t *testing.T) {
	tests := []struct {
		name    string
		data    edgesecrets.Data
		want    Details
		wantErr string
	}{
		{"written through the Open Horizon API", edgesecrets.Data{"key": []byte("name"), "value": []byte("World")}, Details{Key: "name", Value: "World"}, ""},
		{"value only", edgesecrets.Data{"value": []byte("s3cr3t")}, Details{Value: "s3cr3t"}, ""},
		{"one named entry", edgesecrets.Data{"password": []byte("pw")}, Details{Key: "password", Value: "pw"}, ""},
		{"several entries", edgesecrets.Data{"user": []byte("alice"), "password": []byte("p<w")}, Details{Value: `{"password":"p<w","user":"alice"}`}, ""},
		{"value and another key", edgesecrets.Data{"value": []byte("v"), "note": []byte("n")}, Details{Value: `{"note":"n","value":"v"}`}, ""},
		{"binary value", edgesecrets.Data{"cert": {0xff, 0xfe}}, Details{}, `the value of key "cert" is binary`},
		{"binary among several", edgesecrets.Data{"a": []byte("x"), "b": {0xff}}, Details{}, `key "b"`},
		{"no data", edgesecrets.Data{}, Details{}, "no data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromData(tt.data)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestFromFile(t *testing.T) {
	tests := []struct {
		name, content string
		want          Details
		wantErr       string
	}{
		// open-horizon/examples edge/services/helloSecretWorld/horizon/hw_who
		// (commit 9141653480a81789e654f5387ad02c07ac2ad7f8): the file anax
		// mounts holds the key/value object.
		{"anax's file", "{\n    \"key\": \"name\",\n    \"value\": \"World\"\n}", Details{Key: "name", Value: "World"}, ""},
		{"agentapi's JSON file, one entry", `{"password":"pw"}`, Details{Key: "password", Value: "pw"}, ""},
		{"agentapi's JSON file, several entries", `{"password":"pw","user":"alice"}`, Details{Value: `{"password":"pw","user":"alice"}`}, ""},
		{"binary value in a JSON file", `{"cert":{"base64":"//4="}}`, Details{Value: `{"cert":{"base64":"//4="}}`}, ""},
		{"raw text", "-----BEGIN CERT-----", Details{Value: "-----BEGIN CERT-----"}, ""},
		{"empty object", `{}`, Details{Value: `{}`}, ""},
		{"JSON string", `"quoted"`, Details{Value: `"quoted"`}, ""},
		{"binary raw", "\xff\xfe", Details{}, "binary content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromFile([]byte(tt.content))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDetailsNeverPrintsTheValue(t *testing.T) {
	d := Details{Key: "name", Value: "canary-value"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "secret", d)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "secret", d)
	for _, s := range []string{fmt.Sprint(d), fmt.Sprintf("%v %+v %#v %s %q %x", d, d, d, d, d, d), d.String(), d.GoString(), logs.String()} {
		assert.NotContains(t, s, "canary-value")
		assert.Contains(t, s, "name")
	}
	assert.JSONEq(t, `{"key":"name","value":"canary-value"}`, string(d.Marshal()), "the wire body carries it")
	assert.Equal(t, edgesecrets.Data{"key": []byte("name"), "value": []byte("canary-value")}, d.Data())
}

// FuzzDecode: a body decodes to the two members it holds, or fails without
// quoting it.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"key":"k","value":"v"}`, `{"key":"","value":""}`, `{"value":"v"}`, `{"key":1}`, `[]`, `null`, `{"key":"k","value":"v","x":0}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		d, err := Decode(strings.NewReader(body), 1<<10)
		if err != nil {
			return
		}
		var back map[string]string
		require.NoError(t, json.Unmarshal(d.Marshal(), &back))
		assert.Len(t, back, 2)
		// encoding/json matches member names case-insensitively, as in anax.
		var orig map[string]string
		require.NoError(t, json.Unmarshal([]byte(body), &orig))
		lower := map[string]string{}
		for k, v := range orig {
			lower[strings.ToLower(k)] = v
		}
		if utf8.ValidString(body) && len(lower) == 2 {
			assert.Equal(t, lower, back)
		}
	})
}

// FuzzFromFile: any file content either maps onto a body whose JSON form
// decodes back to it, or is refused as binary.
func FuzzFromFile(f *testing.F) {
	for _, s := range []string{`{"key":"k","value":"v"}`, `{"a":"1","b":"2"}`, `{"a":{"base64":"AA=="}}`, "raw", "\xff", `{}`, `null`, `{"a":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		d, err := FromFile(content)
		if err != nil {
			assert.False(t, utf8.Valid(content) && !json.Valid(content), "valid UTF-8 text is always served")
			return
		}
		var back Details
		require.NoError(t, json.Unmarshal(d.Marshal(), &back))
		if utf8.ValidString(d.Key) && utf8.ValidString(d.Value) {
			assert.Equal(t, d, back)
		}
	})
}
