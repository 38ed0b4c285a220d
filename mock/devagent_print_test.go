package mock_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/mock"
)

// printAll prints v every way a program might: fmt with common verbs (by
// value, by pointer, in a slice and a map, inside another struct), slog's
// text and JSON handlers (directly and inside another struct) and
// encoding/json (directly and inside another struct).
func printAll(t *testing.T, v any) string {
	t.Helper()
	var out bytes.Buffer
	nested := struct {
		Name  string
		Value any
	}{"x", v}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
		for _, arg := range []any{v, &v, []any{v}, map[string]any{"k": v}, nested, &nested} {
			fmt.Fprintf(&out, verb+"\n", arg)
		}
	}
	fmt.Fprintln(&out, fmt.Errorf("failed with %v", v))
	for _, h := range []slog.Handler{slog.NewTextHandler(&out, nil), slog.NewJSONHandler(&out, nil)} {
		slog.New(h).Info("direct", "v", v)
		slog.New(h).Info("nested", "v", nested)
	}
	for _, arg := range []any{v, nested} {
		b, err := json.Marshal(arg)
		require.NoError(t, err)
		out.Write(b)
	}
	return out.String()
}

// Printing a DevAgent or its options never shows the token, in any form,
// also where fmt reaches them through a pointer with a verb they do not
// take (it then prints the raw fields of what the pointer points to).
func TestDevAgentNeverPrintsToken(t *testing.T) {
	const token = "tok-CANARY-4f2a"
	dev, err := mock.NewDevAgent(t.Context(), mock.DevAgentOptions{Token: token, Dir: filepath.Join(t.TempDir(), "dev")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	opts := mock.DevAgentOptions{Token: token, InstanceID: "web"}
	for name, v := range map[string]any{
		"DevAgentOptions":         opts,
		"DevAgentOptions pointer": &opts,
		"DevAgent":                dev,
	} {
		t.Run(name, func(t *testing.T) {
			out := printAll(t, v)
			assert.NotContains(t, out, "CANARY")
			assert.NotContains(t, out, fmt.Sprintf("%x", token))
			assert.NotContains(t, out, fmt.Sprintf("%X", token))
			assert.Contains(t, out, edgesecrets.Redacted)
		})
	}
	assert.Equal(t, token, dev.Token(), "the token itself is at hand")
}

// An empty token prints as nothing, not as a redaction of something.
func TestDevAgentOptionsEmptyToken(t *testing.T) {
	out := printAll(t, mock.DevAgentOptions{InstanceID: "web"})
	assert.NotContains(t, out, edgesecrets.Redacted)
	assert.Contains(t, out, "web")
}
