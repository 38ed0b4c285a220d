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
func Describe(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("field %q: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("expected %s, got JSON %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected end of input"
	}
	// Unknown-field errors name the field only: `json: unknown field "x"`.
	return strings.TrimPrefix(err.Error(), "json: ")
}
