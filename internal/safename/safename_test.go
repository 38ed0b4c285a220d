package safename

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		name    string
		wantErr string
	}{
		{"db_password", ""},
		{"tls.crt", ""},
		{".env", ""},
		{"ключ", ""},
		{strings.Repeat("a", MaxLen), ""},
		{"", "is empty"},
		{strings.Repeat("a", MaxLen+1), "longer than 255"},
		{"a\xffb", "not valid UTF-8"},
		{".", `is "."`},
		{"..", `is ".."`},
		{"a/b", "slash"},
		{`a\b`, "slash"},
		{"a\x00b", "control"},
		{"a\nb", "control"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.name)
			if c.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, c.wantErr)
		})
	}
}

// CheckPath is the one rule of a secret name: secretstore.ValidateName
// is it, and Check's single elements follow it.
func TestCheckPath(t *testing.T) {
	cases := []struct {
		name    string
		wantErr string
	}{
		{"db/password", ""},
		{"q?x=1", ""},
		{"pct%2Fenc", ""},
		{strings.Repeat("a", MaxPathLen), ""},
		{"", "name is empty"},
		{strings.Repeat("a", MaxPathLen+1), "longer than 512 bytes"},
		{"a//b", "empty path segment"},
		{"/a", "empty path segment"},
		{"a/", "empty path segment"},
		{"a/../b", `".." path segment`},
		{"./a", `"." path segment`},
		{"a\\b", "backslash"},
		{"a\x7fb", "control character"},
		{"a\xffb", "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckPath(c.name)
			if c.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, c.wantErr)
		})
	}
}
