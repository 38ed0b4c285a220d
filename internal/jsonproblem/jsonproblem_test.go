package jsonproblem

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDescribe(t *testing.T) {
	var v struct {
		N int   `json:"n"`
		S int   `json:"s,string"`
		B uint8 `json:"b"`
	}
	strict := func(s string) error {
		d := json.NewDecoder(bytes.NewReader([]byte(s)))
		d.DisallowUnknownFields()
		return d.Decode(&v)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"syntax", json.Unmarshal([]byte(`{"n": hunter2}`), &v), "syntax error at byte 7"},
		{"field type", json.Unmarshal([]byte(`{"n": "hunter2"}`), &v), `field "n": expected int, got JSON string`},
		{"top-level type", json.Unmarshal([]byte(`"hunter2"`), &v), "got JSON string"},
		{"truncated", json.Unmarshal([]byte(`{"n": 1`), &v), "syntax error at byte 7"},
		{"stream end", strict(``), "unexpected end of input"},
		{"unknown field", strict(`{"hunter2": 1}`), `unknown field "hunter2"`},
		{"number out of range", json.Unmarshal([]byte(`{"b": 9992222222}`), &v), `field "b": expected uint8, got JSON number`},
		{",string value", json.Unmarshal([]byte(`{"s": "hunter2"}`), &v), "invalid use of ,string struct tag"},
		{"other", errors.New("json: other"), "other"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Describe(c.err)
			assert.Contains(t, got, c.want)
			if c.name != "unknown field" {
				assert.NotContains(t, got, "hunter2", "input is not quoted")
				assert.NotContains(t, got, "2222222", "input is not quoted")
			}
		})
	}
}
