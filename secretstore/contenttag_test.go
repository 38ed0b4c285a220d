package secretstore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

func TestSecretContentTag(t *testing.T) {
	data := edgesecrets.Data{"password": []byte("hunter2")}
	cases := []struct {
		name    string
		secret  *secretstore.Secret
		version string
		encoded string
	}{
		{"versioned: the version", &secretstore.Secret{Name: "a", Data: data, Version: "7"}, "7", "version:7"},
		{"no version: the data's checksum", &secretstore.Secret{Name: "a", Data: data}, "", "sha256:" + canonicalSum(data)},
		{"no version, no data: still a tag", &secretstore.Secret{Name: "a"}, "", "sha256:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tag := c.secret.ContentTag()
			assert.NotEqual(t, secretstore.ContentTag{}, tag)
			if c.version != "" {
				assert.Equal(t, "version:"+c.version, tag.Encode())
			}
			assert.True(t, strings.HasPrefix(tag.Encode(), c.encoded))
			back, err := secretstore.ParseContentTag(tag.Encode())
			require.NoError(t, err)
			assert.Equal(t, tag, back, "Encode and ParseContentTag round-trip")
		})
	}

	same := &secretstore.Secret{Name: "b", Data: data.Clone()}
	other := &secretstore.Secret{Name: "a", Data: edgesecrets.Data{"password": []byte("hunter3")}}
	assert.Equal(t, cases[1].secret.ContentTag(), same.ContentTag(), "equal data, equal tags")
	assert.NotEqual(t, cases[1].secret.ContentTag(), other.ContentTag())
	assert.NotEqual(t, cases[0].secret.ContentTag(), (&secretstore.Secret{Data: data, Version: "8"}).ContentTag())
	assert.Equal(t, "none", secretstore.ContentTag{}.String())
	assert.Empty(t, secretstore.ContentTag{}.Encode())
}

func TestParseContentTagErrors(t *testing.T) {
	cases := []struct {
		in   string
		want string
	}{
		{"version:", "empty version"},
		{"sha256:abc", "checksum has 3 characters, want 64 hex digits"},
		{"sha256:" + strings.Repeat("zz", 32), "checksum is not hexadecimal"},
		{"sha256:" + edgesecrets.Redacted, "want 64 hex digits"},
		{"sha256:" + strings.Repeat("00", 32), "all zeros"},
		{"7", `"7" does not start with "version:" or "sha256:"`},
		{"md5:0123456789abcdef0123456789abcdef", `"md5:0123456789ab..." does not start with`},
		{"version:" + strings.Repeat("x", 2000), "longer than 1024 bytes"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			tag, err := secretstore.ParseContentTag(c.in)
			require.Error(t, err)
			assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.ErrorContains(t, err, c.want)
			assert.Equal(t, secretstore.ContentTag{}, tag)
		})
	}
	zero, err := secretstore.ParseContentTag("")
	require.NoError(t, err)
	assert.Equal(t, secretstore.ContentTag{}, zero)
}

// TestContentTagPrintsNoChecksum: a checksum tag is printed, logged and
// JSON-encoded as "sha256:[redacted]", also inside structs; versions show.
func TestContentTagPrintsNoChecksum(t *testing.T) {
	sumTag := (&secretstore.Secret{Data: edgesecrets.Data{"password": []byte("hunter2")}}).ContentTag()
	digits := strings.TrimPrefix(sumTag.Encode(), "sha256:")
	require.Len(t, digits, 64)
	type holder struct {
		Name string
		Sent secretstore.ContentTag
	}
	h := holder{Name: "db", Sent: sumTag}

	var logged bytes.Buffer
	jsonLog := slog.New(slog.NewJSONHandler(&logged, nil))
	textLog := slog.New(slog.NewTextHandler(&logged, nil))
	jsonLog.Info("tag", "sent", sumTag, "holder", h)
	textLog.Info("tag", "sent", sumTag, "holder", h)
	encoded, err := json.Marshal(h)
	require.NoError(t, err)
	forms := []string{
		fmt.Sprint(sumTag), fmt.Sprintf("%v %+v %#v %s %q %x %X %d", sumTag, sumTag, sumTag, sumTag, sumTag, sumTag, sumTag, sumTag),
		fmt.Sprintf("%v %+v %#v", h, h, h), sumTag.String(), fmt.Sprintf("%#v", sumTag),
		fmt.Sprint(fmt.Errorf("wrapped: %v", sumTag)), logged.String(), string(encoded),
	}
	for _, form := range forms {
		assert.NotContains(t, form, digits[:16])
		assert.NotContains(t, strings.ToLower(form), digits[:16])
	}
	assert.Contains(t, logged.String(), `"sent":"sha256:[redacted]"`)
	assert.Contains(t, string(encoded), `"Sent":"sha256:[redacted]"`)
	assert.Equal(t, `secretstore.ContentTag("sha256:[redacted]")`, fmt.Sprintf("%#v", sumTag))
	_, err = secretstore.ParseContentTag("sha256:[redacted]")
	assert.Error(t, err, "a printed checksum tag cannot pass for a stored one")

	versionTag := (&secretstore.Secret{Version: "42"}).ContentTag()
	assert.Equal(t, "version:42", fmt.Sprint(versionTag))
	assert.Equal(t, "none", fmt.Sprint(secretstore.ContentTag{}))
	assert.Equal(t, "sha256:[redacted]", fmt.Sprint(sumTag))
}

func FuzzParseContentTag(f *testing.F) {
	for _, seed := range []string{"", "version:1", "version:", "sha256:" + canonicalSum(edgesecrets.Data{"k": []byte("v")}), "sha256:", "sha256:[redacted]", "none", "version:\x00\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tag, err := secretstore.ParseContentTag(s)
		if err != nil {
			if !errors.Is(err, edgesecrets.ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			if tag != (secretstore.ContentTag{}) {
				t.Fatalf("a failed parse returned %v", tag)
			}
			return
		}
		back, err := secretstore.ParseContentTag(tag.Encode())
		if err != nil || back != tag {
			t.Fatalf("%q: parsed %v, re-encoded %q, parsed again %v, %v", s, tag, tag.Encode(), back, err)
		}
		if strings.HasPrefix(tag.Encode(), "sha256:") && strings.Contains(tag.String(), tag.Encode()[len("sha256:"):]) {
			t.Fatalf("checksum printed: %s", tag)
		}
	})
}

// canonicalSum is the hex SHA-256 of d's canonical encoding, computed
// here independently: keys in sorted order, each key and value prefixed
// by its length as a big-endian uint64.
func canonicalSum(d edgesecrets.Data) string {
	h := sha256.New()
	for _, k := range d.Keys() {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(k))))
		h.Write([]byte(k))
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(d[k]))))
		h.Write(d[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}
