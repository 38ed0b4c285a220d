package secretstore_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// leakForms returns the ways a value could show up in output: raw, quoted,
// hex, base64 and fmt's byte-slice forms (decimal, octal, Go syntax).
func leakForms(v []byte) []string {
	dec := strings.Trim(fmt.Sprint(string(v)), "[]")
	oct := strings.Trim(fmt.Sprintf("%o", v), "[]")
	_, goSyntax, _ := strings.Cut(fmt.Sprintf("%#v", v), "{")
	return []string{
		strings.TrimSuffix(goSyntax, "}"),
		fmt.Sprintf("% x", v),
		oct,
		string(v),
		hex.EncodeToString(v),
		strings.ToUpper(hex.EncodeToString(v)),
		base64.StdEncoding.EncodeToString(v),
		base64.RawStdEncoding.EncodeToString(v),
		base64.URLEncoding.EncodeToString(v),
		base64.RawURLEncoding.EncodeToString(v),
		strings.Trim(fmt.Sprintf("%q", v), `"`),
		dec,
	}
}

func TestSecretNeverPrintsValues(t *testing.T) {
	canary := []byte("canary-" + rand.Text())
	binary := make([]byte, 24)
	_, _ = rand.Read(binary)
	var forbidden []string
	forbidden = append(forbidden, leakForms(canary)...)
	forbidden = append(forbidden, leakForms(binary)...)

	s := secretstore.Secret{
		Name:      "db/password",
		Data:      edgesecrets.Data{"password": canary, "tls.key": binary},
		Labels:    map[string]string{"team": "edge"},
		Version:   "7",
		UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	ps := &s
	type holder struct {
		Secret *secretstore.Secret
		Data   edgesecrets.Data
	}
	values := map[string]any{
		"Secret":          s,
		"*Secret":         ps,
		"Data":            s.Data,
		"[]*Secret":       []*secretstore.Secret{ps},
		"[]Secret":        []secretstore.Secret{s},
		"map[string]Data": map[string]edgesecrets.Data{"x": s.Data},
		"struct":          holder{Secret: ps, Data: s.Data},
		"*struct":         &holder{Secret: ps, Data: s.Data},
		"any-in-slice":    []any{s, ps, s.Data},
	}

	outputs := map[string]string{}
	for vname, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "% x", "%#x", "%d", "%o", "%10.3s", "%-x"} {
			outputs[vname+" "+verb] = fmt.Sprintf(verb, v)
		}
		outputs[vname+" Sprint"] = fmt.Sprint(v)
		outputs[vname+" Sprintln"] = fmt.Sprintln(v)

		j, err := json.Marshal(v)
		require.NoError(t, err, "json of %s", vname)
		outputs[vname+" json"] = string(j)
		j, err = json.MarshalIndent(v, "", " ")
		require.NoError(t, err)
		outputs[vname+" json indent"] = string(j)

		for hname, h := range map[string]func(*bytes.Buffer) slog.Handler{
			"text": func(b *bytes.Buffer) slog.Handler {
				return slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
			},
			"json": func(b *bytes.Buffer) slog.Handler {
				return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
			},
		} {
			var b bytes.Buffer
			log := slog.New(h(&b))
			log.Debug("read", "value", v)
			log.Info("read", slog.Any("value", v), slog.Group("g", slog.Any("nested", v)))
			log.With("with", v).Warn("read")
			outputs[vname+" slog "+hname] = b.String()
		}

		wrapped := &secretstore.Error{Op: "get", Name: s.Name, Kind: edgesecrets.ErrUnavailable, Err: fmt.Errorf("while handling %v", v)}
		for ename, err := range map[string]error{
			"Errorf %v":  fmt.Errorf("reading: %v", v),
			"Errorf %+v": fmt.Errorf("reading: %+v", v),
			"Errorf %w":  fmt.Errorf("outer: %w", wrapped),
			"Join":       errors.Join(wrapped, fmt.Errorf("%s", v)),
		} {
			outputs[vname+" error "+ename] = err.Error()
			outputs[vname+" error "+ename+" %+v"] = fmt.Sprintf("%+v", err)
		}
	}
	ds := driver.Secret{Data: s.Data, Labels: s.Labels, Version: s.Version}
	outputs["driver.Secret %#v"] = fmt.Sprintf("%#v", ds)
	outputs["driver.Secret %v"] = fmt.Sprintf("%v", &ds)
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).Info("driver", "secret", ds)
	outputs["driver.Secret slog"] = b.String()

	require.NotEmpty(t, outputs)
	for what, out := range outputs {
		for _, f := range forbidden {
			if strings.Contains(out, f) {
				t.Errorf("%s leaks a value (form %q) in %q", what, f, out)
			}
		}
		if !strings.HasPrefix(what, "Metadata") {
			assert.Contains(t, out, "password", "%s shows the key name", what)
		}
	}
	assert.Contains(t, outputs["Secret %v"], "db/password")
	assert.Contains(t, outputs["Secret %v"], edgesecrets.Redacted)
	assert.Contains(t, outputs["Data json"], `"password":"[redacted]"`)
	assert.Contains(t, outputs["Secret slog json"], `"data":{"password":"[redacted]","tls.key":"[redacted]"}`)
	assert.Contains(t, outputs["driver.Secret %v"], "tls.key", "a driver.Secret prints its key names")

	// The values themselves are intact and readable by indexing.
	assert.Equal(t, canary, []byte(s.Data["password"]))
}

func TestDataFormats(t *testing.T) {
	d := edgesecrets.Data{"b": []byte("2"), "a": []byte("1")}
	cases := []struct {
		format string
		want   string
	}{
		{"%v", "map[a:[redacted] b:[redacted]]"},
		{"%s", "map[a:[redacted] b:[redacted]]"},
		{"%#v", `edgesecrets.Data{"a":[redacted], "b":[redacted]}`},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, fmt.Sprintf(c.format, d), c.format)
	}
	assert.Equal(t, "map[]", fmt.Sprint(edgesecrets.Data(nil)))
	assert.Equal(t, "map[a:[redacted] b:[redacted]]", d.String())
	j, err := json.Marshal(edgesecrets.Data(nil))
	require.NoError(t, err)
	assert.Equal(t, "{}", string(j))
	assert.Equal(t, []string{"a", "b"}, d.Keys())
}

func TestDataEqual(t *testing.T) {
	cases := []struct {
		name string
		a, b edgesecrets.Data
		want bool
	}{
		{"nil and empty", nil, edgesecrets.Data{}, true},
		{"same", edgesecrets.Data{"k": []byte("v")}, edgesecrets.Data{"k": []byte("v")}, true},
		{"nil and empty value", edgesecrets.Data{"k": nil}, edgesecrets.Data{"k": {}}, true},
		{"different value", edgesecrets.Data{"k": []byte("v")}, edgesecrets.Data{"k": []byte("w")}, false},
		{"different key", edgesecrets.Data{"k": []byte("v")}, edgesecrets.Data{"j": []byte("v")}, false},
		{"extra key", edgesecrets.Data{"k": []byte("v")}, edgesecrets.Data{"k": []byte("v"), "j": nil}, false},
		{"missing vs empty value", edgesecrets.Data{}, edgesecrets.Data{"k": nil}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.a.Equal(c.b))
			assert.Equal(t, c.want, c.b.Equal(c.a), "symmetric")
			assert.Equal(t, c.want, tagOf(c.a) == tagOf(c.b), "the content tag agrees with Equal")
		})
	}
}

func TestDataChecksumIsUnambiguous(t *testing.T) {
	// Pairs whose naive concatenations collide.
	pairs := [][2]edgesecrets.Data{
		{{"ab": []byte("c")}, {"a": []byte("bc")}},
		{{"a": []byte(""), "b": []byte("")}, {"ab": []byte("")}},
		{{"a": []byte("b"), "c": []byte("d")}, {"a": []byte("bc"), "": []byte("d")}},
		{{"k": []byte{0, 0, 0, 0, 0, 0, 0, 1}}, {"k\x00\x00\x00\x00\x00\x00\x00\x01": nil}},
		// Equal streams if key lengths were left out of the encoding.
		{{"a": []byte("x"), "b": nil}, {"a\x00\x00\x00\x00\x00\x00\x00\x01xb": nil}},
		// Equal streams if value lengths were left out.
		{{"a": []byte("b\x00\x00\x00\x00\x00\x00\x00\x01c")}, {"a": []byte("b"), "c": nil}},
	}
	for i, p := range pairs {
		assert.NotEqual(t, tagOf(p[0]), tagOf(p[1]), "pair %d", i)
	}
	d := edgesecrets.Data{"x": []byte("1"), "y": []byte("2")}
	assert.Equal(t, tagOf(d), tagOf(d.Clone()), "stable across copies and map order")
}

func TestDataClone(t *testing.T) {
	assert.Nil(t, edgesecrets.Data(nil).Clone())
	orig := edgesecrets.Data{"k": []byte("value"), "nil": nil}
	c := orig.Clone()
	require.True(t, orig.Equal(c))
	orig["k"][0] = 'X'
	orig["new"] = []byte("n")
	assert.Equal(t, []byte("value"), []byte(c["k"]), "values are copied")
	assert.NotContains(t, c, "new", "the map is copied")
	assert.NotNil(t, c["nil"], "a nil value becomes empty")
}

func TestSecretClone(t *testing.T) {
	var nilSecret *secretstore.Secret
	assert.Nil(t, nilSecret.Clone())
	s := &secretstore.Secret{Name: "n", Data: edgesecrets.Data{"k": []byte("v")}, Labels: map[string]string{"l": "1"}, Version: "3", UpdatedAt: time.Unix(5, 0)}
	c := s.Clone()
	require.Equal(t, s, c)
	c.Data["k"][0] = 'w'
	c.Labels["l"] = "2"
	assert.Equal(t, []byte("v"), []byte(s.Data["k"]))
	assert.Equal(t, "1", s.Labels["l"])
}

// tagOf is the content tag of data in a store without versions: its
// checksum.
func tagOf(d edgesecrets.Data) secretstore.ContentTag {
	return (&secretstore.Secret{Data: d}).ContentTag()
}

func TestDataWipe(t *testing.T) {
	for _, tc := range []struct {
		name string
		data edgesecrets.Data
	}{
		{"values", edgesecrets.Data{"a": []byte("one"), "b": []byte("two")}},
		{"an empty value", edgesecrets.Data{"a": {}}},
		{"nil", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := tc.data.Keys()
			values := map[string][]byte{}
			for k, v := range tc.data {
				values[k] = v
			}
			tc.data.Wipe()
			assert.Equal(t, keys, tc.data.Keys(), "the keys stay")
			for k, v := range values {
				assert.Equal(t, make([]byte, len(v)), v, "value %q is zeros, in place", k)
			}
		})
	}
}
