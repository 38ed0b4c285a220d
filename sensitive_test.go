package edgesecrets_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
)

// TestSensitiveNeverPrints prints a Sensitive value alone, inside a struct
// and behind a pointer through every fmt verb, slog's handlers and
// encoding/json: none shows the value, and an empty value prints empty.
func TestSensitiveNeverPrints(t *testing.T) {
	const value = "hvs.CAESI-canary-7f3a"
	type options struct {
		User  string
		Token edgesecrets.Sensitive
	}
	s := edgesecrets.Sensitive(value)
	opts := options{User: "app", Token: s}

	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("m", "token", s, "opts", opts)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("m", "token", s, "opts", opts, "ptr", &opts)
	encoded, err := json.Marshal(map[string]any{"token": s, "opts": opts, "ptr": &opts})
	require.NoError(t, err)

	outs := map[string]string{"slog text": text.String(), "slog json": js.String(), "encoding/json": string(encoded)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
		outs[verb] = fmt.Sprintf(verb, s)
		outs[verb+" struct"] = fmt.Sprintf(verb, opts)
		outs[verb+" pointer"] = fmt.Sprintf(verb, &opts)
	}
	for name, out := range outs {
		assert.NotContains(t, out, "canary", name)
		assert.NotContains(t, out, "CAESI", name)
	}
	assert.Contains(t, string(encoded), `"Token":"`+edgesecrets.Redacted+`"`)
	assert.Equal(t, edgesecrets.Redacted, s.String())
	assert.Equal(t, `"`+edgesecrets.Redacted+`"`, fmt.Sprintf("%#v", s))
	assert.Equal(t, value, string(s), "the value itself is there for the code that uses it")

	var empty edgesecrets.Sensitive
	assert.Empty(t, empty.String(), "an empty value prints empty, so 'not set' stays visible")
	assert.Equal(t, `""`, fmt.Sprintf("%#v", empty))

	var decoded options
	require.NoError(t, json.Unmarshal([]byte(`{"User":"app","Token":"read-back"}`), &decoded))
	assert.Equal(t, edgesecrets.Sensitive("read-back"), decoded.Token, "a config decodes into it as into a string")
}
