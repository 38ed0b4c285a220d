// Package jsonstrict decodes one JSON value of outside input strictly: a
// size limit, no unknown fields, nothing after the value, and errors that
// say where and which field, never what the input held (a body may carry a
// secret or a token).
package jsonstrict

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrTooLarge is matched by the error for input over the limit.
var ErrTooLarge = errors.New("input too large")

// Decode reads at most limit bytes from r and decodes them, as exactly one
// JSON value, into v, refusing unknown object fields. Its errors never
// quote the input.
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
		return Describe(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// Describe turns an encoding/json decoding error into one that names the
// position or the field and the expected type, never the input's content.
func Describe(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var b64 base64.CorruptInputError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("JSON syntax error at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("expected %s", typ.Type)
		}
		return fmt.Errorf("field %q: expected %s", typ.Field, typ.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("unexpected end of JSON")
	case errors.As(err, &b64):
		return errors.New("a base64 field is not valid base64")
	}
	// "json: unknown field \"name\"" quotes a field name, not a value.
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok && len(field) <= 66 {
		return fmt.Errorf("unknown field %s", field)
	}
	// Anything else (a bad time, an UnmarshalJSON error) may quote input.
	return errors.New("malformed JSON value")
}
