package jsonproblem

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type body struct {
	Name  string    `json:"name"`
	Count int       `json:"count"`
	Blob  []byte    `json:"blob"`
	At    time.Time `json:"at"`
}

func TestDecodeStrict(t *testing.T) {
	var b body
	require.NoError(t, Decode(strings.NewReader(` {"name":"x","count":2} `), 100, &b))
	assert.Equal(t, body{Name: "x", Count: 2}, b)

	cases := map[string]struct {
		in, msg string
	}{
		"syntax":         {`{"name":"SECRET",}`, "syntax error at byte 18"},
		"type":           {`{"count":"SECRET"}`, `field "count": expected int`},
		"top-level type": {`"SECRET"`, "expected jsonproblem.body"},
		"truncated":      {`{"name":"SECRET`, "unexpected end of input"},
		"empty":          {``, "unexpected end of input"},
		"unknown field":  {`{"SECRETFIELD":1}`, `unknown field "SECRETFIELD"`},
		"long field":     {`{"` + strings.Repeat("SECRET", 12) + `":1}`, "unknown field"},
		"base64":         {`{"blob":"SECRET!!"}`, "not valid base64"},
		"time":           {`{"at":"SECRET"}`, "malformed JSON value"},
		"trailing":       {`{} {"name":"SECRET"}`, "trailing data"},
		"too large":      {`{"name":"` + strings.Repeat("SECRET", 20) + `"}`, "input too large: more than 100 bytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Decode(strings.NewReader(tc.in), 100, &body{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
			if name != "unknown field" {
				assert.NotContains(t, err.Error(), "SECRET", "errors never quote values")
			}
			assert.Equal(t, name == "too large", errors.Is(err, ErrTooLarge))
		})
	}
}

func FuzzDecodeStrict(f *testing.F) {
	f.Add([]byte(`{"name":"x","count":1,"blob":"AA==","at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"at":"CANARY"}`))
	f.Add([]byte(`[1,2`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var b body
		err := Decode(strings.NewReader(string(in)), 256, &b)
		if err == nil {
			return
		}
		require.Less(t, len(err.Error()), 120, "errors are short and never echo the input")
		if strings.Contains(string(in), "CANARY") && !strings.Contains(err.Error(), "unknown field") {
			require.NotContains(t, err.Error(), "CANARY")
		}
	})
}
