package agentapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTemplateErrorsKeepOnlyThePosition(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{errors.New(`template: app:1:3: executing "app" at <f .v>: error calling f: bad "CANARY"`), "template app:1:3 failed"},
		{errors.New(`template: app:12: unexpected "CANARY"`), "template app:12 failed"},
		{errors.New(`CANARY`), "template failed"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, sanitizeTemplateError(tt.err))
	}
}

// envQuote's output is one line, quoted, whatever a value holds.
func FuzzEnvQuote(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b", "$HOME", "`x`", "a\\", "line\nbreak\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := envQuote(s)
		if strings.IndexByte(s, 0) >= 0 {
			if err == nil {
				t.Fatal("a NUL was quoted")
			}
			return
		}
		if err != nil || len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' || strings.ContainsAny(q, "\n\r") {
			t.Fatalf("envQuote(%q) = %q, %v", s, q, err)
		}
		inner := q[1 : len(q)-1]
		for i := 0; i < len(inner); i++ {
			switch inner[i] {
			case '\\':
				i++ // the escaped byte
			case '"', '$', '`':
				t.Fatalf("envQuote(%q) = %q: %q unescaped", s, q, inner[i])
			}
		}
	})
}
