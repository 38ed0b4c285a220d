// Package jsonproblem describes JSON decoding errors without quoting the
// input, so a decoder of outside input can report what was wrong without
// echoing a value that may be secret.
package jsonproblem

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Describe returns a description of err, a JSON decoding error, that names
// byte offsets, field names and JSON types but never input text.
// (encoding/json itself quotes number literals and ",string" values in some
// of its messages; those are cut out here.)
func Describe(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		// Value is a JSON kind, or "number <literal>" for a number that
		// does not fit: keep the kind only.
		kind, _, _ := strings.Cut(te.Value, " ")
		if te.Field != "" {
			return fmt.Sprintf("field %q: expected %s, got JSON %s", te.Field, te.Type, kind)
		}
		return fmt.Sprintf("expected %s, got JSON %s", te.Type, kind)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected end of input"
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "invalid use of ,string struct tag") {
		return "invalid use of ,string struct tag" // the rest quotes the value
	}
	// Unknown-field errors name the field only: `unknown field "x"`.
	return msg
}
