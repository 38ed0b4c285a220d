package binding

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// decodeError reports bad input. It names the document and the problem,
// never quotes the input, and matches edgesecrets.ErrInvalid.
type decodeError struct {
	what    string
	problem string
}

func (e *decodeError) Error() string { return "binding: " + e.what + ": " + e.problem }

func (e *decodeError) Unwrap() error { return edgesecrets.ErrInvalid }

func badInput(what, format string, args ...any) error {
	return &decodeError{what: what, problem: fmt.Sprintf(format, args...)}
}

// decodeLimited reads at most limit bytes of JSON from r into v.
func decodeLimited(r io.Reader, limit int64, what string, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("binding: reading %s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return badInput(what, "larger than %d bytes", limit)
	}
	return unmarshal(data, what, v)
}

// unmarshal decodes data into v; errors are *decodeError.
func unmarshal(data []byte, what string, v any) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var de *decodeError
	if errors.As(err, &de) {
		return err
	}
	return badInput(what, "%s", jsonproblem.Describe(err))
}
