// Package jsonproblem describes JSON decoding errors without quoting the
// input, so a decoder of outside input can report what was wrong without
// echoing a value that may be secret, and decodes one JSON value strictly.
package jsonproblem

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Describe returns a description of err, a JSON decoding error, that names
// byte offsets, field names and JSON types but never input text.
// (encoding/json itself quotes number literals and ",string" values in some
// of its messages; those are cut out here.) An error that encoding/json did
// not make itself, one returned by a type's UnmarshalJSON, is passed through:
// the decoders of this module write theirs without values. Decode, for
// arbitrary types, is stricter.
func Describe(err error) string {
	if msg, ok := describeKnown(err); ok {
		return msg
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// describeKnown describes the errors encoding/json makes itself.
func describeKnown(err error) (string, bool) {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var b64 base64.CorruptInputError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset), true
	case errors.As(err, &te):
		// Value is a JSON kind, or "number <literal>" for a number that
		// does not fit: keep the kind only.
		kind, _, _ := strings.Cut(te.Value, " ")
		if te.Field != "" {
			return fmt.Sprintf("field %q: expected %s, got JSON %s", te.Field, te.Type, kind), true
		}
		return fmt.Sprintf("expected %s, got JSON %s", te.Type, kind), true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected end of input", true
	case errors.As(err, &b64):
		return "a base64 field is not valid base64", true
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "invalid use of ,string struct tag") {
		return "invalid use of ,string struct tag", true // the rest quotes the value
	}
	// Unknown-field errors name the field only; a very long one is cut.
	if field, ok := strings.CutPrefix(msg, "unknown field "); ok {
		if len(field) > 66 {
			return "unknown field", true
		}
		return msg, true
	}
	return "", false
}

// ErrTooLarge is matched by Decode's error for input over the limit.
var ErrTooLarge = errors.New("input too large")

// Decode reads at most limit bytes from r and decodes them, as exactly one
// JSON value, into v, refusing unknown object fields and trailing data. Its
// errors never quote the input, not even through a field type's
// UnmarshalJSON (time.Time's error, for one, quotes the value): such errors
// become "malformed JSON value".
func Decode(r io.Reader, limit int, v any) error {
	body, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	if len(body) > limit {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if msg, ok := describeKnown(err); ok {
			return errors.New(msg)
		}
		return errors.New("malformed JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
