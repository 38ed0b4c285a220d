package redact_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/redact"
)

type withFormat struct {
	Name  string
	Token edgesecrets.Sensitive
	Data  edgesecrets.Data
}

func (w withFormat) Format(f fmt.State, _ rune) {
	type plain withFormat
	redact.Format(f, plain(w))
}

type withoutFormat struct {
	Name  string
	Token edgesecrets.Sensitive
	Data  edgesecrets.Data
}

// TestFormatKeepsFmtsErrorPathAway prints a pointer to each struct inside
// another value with every common verb: fmt's error path (%s and %q of a
// pointer) prints the fields of the struct without Format raw, and the
// struct with Format never.
func TestFormatKeepsFmtsErrorPathAway(t *testing.T) {
	const value = "canary-value-5e1d"
	with := &withFormat{Name: "n", Token: value, Data: edgesecrets.Data{"k": []byte(value)}}
	without := &withoutFormat{Name: "n", Token: value}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		for _, arg := range []any{with, *with, []any{with}, struct{ P *withFormat }{with}} {
			out := fmt.Sprintf(verb, arg)
			assert.NotContains(t, out, value, "%s of %T", verb, arg)
			assert.NotContains(t, out, "99 97 110 97 114 121", "%s of %T: the bytes of \"canary\" as fmt prints []byte", verb, arg)
		}
	}
	assert.Equal(t, "{Name:n Token:[redacted] Data:map[k:[redacted]]}", fmt.Sprintf("%+v", with))
	assert.Equal(t, "{n [redacted] map[k:[redacted]]}", fmt.Sprintf("%s", *with))
	assert.Contains(t, fmt.Sprintf("%s", []any{without}), value, "the hole Format closes is there without it")
}
