package edgesecrets

import (
	"fmt"
	"log/slog"
	"strconv"
)

// Sensitive is a string that never prints: a token, a password, a secret
// id, an attestation document. Every fmt verb, String, slog and
// encoding/json show [Redacted] (an empty value shows empty, so "not set"
// stays visible); string(s) gives the value to the code that must use it.
//
// It is the one way the module's option and request types carry such a
// string, so that they encode safely with encoding/json and slog's JSON
// handler. A struct holding one still needs a String or Format method of
// its own, as the module's do: fmt prints a pointer to a struct that it
// meets inside another value with %s or %q through its error path, which
// calls no method of any field. A struct whose JSON is read back (a
// config) decodes into a Sensitive as into a string; what it encodes does
// not read back.
type Sensitive string

// String returns [Redacted], or "" for an empty value.
func (s Sensitive) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// Format implements fmt.Formatter: the String form for every verb, quoted
// for %#v as a Go string would be.
func (s Sensitive) Format(f fmt.State, verb rune) {
	out := s.String()
	if verb == 'v' && f.Flag('#') {
		out = strconv.Quote(out)
	}
	_, _ = f.Write([]byte(out)) // fmt.State buffers in memory; Format has no error to return
}

// LogValue implements slog.LogValuer: the String form.
func (s Sensitive) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON implements json.Marshaler: the String form, as a JSON string.
func (s Sensitive) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.String())), nil }
