package secretstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// ootType is an out-of-tree backend, registered the way a third party's
// package would register its own.
const ootType = "oot-test"

type ootConfig struct {
	Greeting string `json:"greeting"`
	Port     uint8  `json:"port"`
	Retries  int    `json:"retries,string"`
}

type ootBackend struct {
	mu     sync.Mutex
	logger *slog.Logger
	cfg    ootConfig
}

var oot = &ootBackend{}

func init() { secretstore.Register(ootType, oot) }

func (b *ootBackend) Validate(cfg secretstore.Config) error {
	var c ootConfig
	errs := []error{cfg.DecodeSection(&c)}
	if c.Greeting == "" {
		errs = append(errs, errors.New(ootType+".greeting is required"))
	}
	if c.Port == 0 {
		errs = append(errs, errors.New(ootType+".port is required"))
	}
	return errors.Join(errs...)
}

func (b *ootBackend) Open(_ context.Context, cfg secretstore.Config, opts secretstore.OpenOptions) (*secretstore.Store, error) {
	var c ootConfig
	if err := cfg.DecodeSection(&c); err != nil {
		return nil, err
	}
	if c.Greeting == "unreachable" {
		return nil, &secretstore.Error{Op: "open", Kind: edgesecrets.ErrUnavailable, Err: errors.New("cannot connect")}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.logger, b.cfg = opts.Logger, c
	return memory.New(), nil
}

func (b *ootBackend) seen() (*slog.Logger, ootConfig) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logger, b.cfg
}

// configCases also seed FuzzParseConfig.
var configCases = []struct {
	name     string
	json     string
	problems []string // in order; empty: valid
}{
	{"minimal", `{"type":"memory"}`, nil},
	{"scope and other backends' sections", `{"type":"memory","defaultScope":"/org1/","memory":{},"vault":{"address":"https://v:8200"},"awssm":null}`, nil},
	{"out-of-tree backend", `{"type":"oot-test","oot-test":{"greeting":"hi","port":7,"retries":"3"}}`, nil},
	{"several mistakes",
		`{"type":"memory","defaultScope":"a//b","memory":{"bogus":1},"defaultscope":"x","extra":5}`,
		[]string{`defaultScope: scope "a//b": name has an empty path segment`,
			`unknown field "defaultscope" (did you mean "defaultScope"?)`,
			`"extra" is not a backend section`,
			`memory: unknown field "bogus"`}},
	{"several mistakes in an out-of-tree section",
		`{"type":"oot-test","defaultScope":"..","oot-test":{}}`,
		[]string{`defaultScope: scope "..": name has a ".." path segment`, "oot-test.greeting is required", "oot-test.port is required"}},
	{"unknown type", `{"type":"memroy","defaultScope":"/x//y"}`,
		[]string{`type "memroy" is not registered; registered types: memory, oot-test`, "defaultScope"}},
	{"missing type", `{}`, []string{`"type" is missing; registered types: memory, oot-test`}},
	{"misspelt type", `{"Type":"memory"}`, []string{`"type" is missing`, `unknown field "Type" (did you mean "type"?)`}},
	{"bad defaultScope", `{"type":"memory","defaultScope":"../up"}`, []string{`defaultScope: scope "../up": name has a ".." path segment`}},
	{"unknown field in memory section", `{"type":"memory","memory":{"path":"/tmp"}}`, []string{`memory: unknown field "path"`}},
	{"memory section not an object", `{"type":"memory","memory":[1]}`, []string{"memory: the section must be a JSON object"}},
	{"wrong type in a section", `{"type":"oot-test","oot-test":{"greeting":5,"port":1}}`,
		[]string{`oot-test: field "greeting": expected string, got JSON number`, "oot-test.greeting is required"}},
	{"an unknown field hides nothing", `{"type":"oot-test","oot-test":{"greting":"hi","port":300,"retries":"x","prot":1}}`,
		[]string{`oot-test: unknown field "greting" (did you mean "greeting"?)`, `oot-test: field "port": expected uint8`,
			`oot-test: field "retries": invalid use of ,string struct tag`, `oot-test: unknown field "prot" (did you mean "port"?)`,
			"oot-test.greeting is required", "oot-test.port is required"}},
	{"misspelt section", `{"type":"memory","memroy":{}}`, []string{`unknown field "memroy" (did you mean "memory"?)`}},
	{"not an object", `[{"type":"memory"}]`, []string{"config must be a JSON object"}},
	{"type not a string", `{"type":7}`, []string{`"type": expected string, got JSON number`}},
	{"empty", ``, []string{"config is empty"}},
	{"blank", " \n\t ", []string{"config is empty"}},
	{"truncated", `{"type":"memory"`, []string{"config is not valid JSON: syntax error at byte 16"}},
	{"syntax error", `{"type":"memory",}`, []string{"config is not valid JSON: syntax error at byte 18"}},
	{"trailing data", `{"type":"memory"} {}`, []string{"config is not valid JSON: syntax error at byte"}},
	{"null", `null`, []string{`"type" is missing`}},
}

func TestParseConfig(t *testing.T) {
	for _, c := range configCases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := secretstore.ParseConfig(strings.NewReader(c.json))
			if len(c.problems) == 0 {
				require.NoError(t, err)
				assert.NotEmpty(t, cfg.Type)
				return
			}
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			var ce *secretstore.ConfigError
			require.ErrorAs(t, err, &ce)
			require.Len(t, ce.Problems, len(c.problems), "problems: %q", ce.Problems)
			for i, want := range c.problems {
				assert.Contains(t, ce.Problems[i], want)
				assert.Contains(t, err.Error(), ce.Problems[i], "the one error lists every problem")
			}
			if len(c.problems) > 1 {
				assert.Contains(t, err.Error(), fmt.Sprintf("%d problems", len(c.problems)))
			}
		})
	}
}

func TestParseConfigFields(t *testing.T) {
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{"type":"memory","defaultScope":"org1","vault":{"address":"https://v:8200"}}`))
	require.NoError(t, err)
	assert.Equal(t, "memory", cfg.Type)
	assert.Equal(t, "org1", cfg.DefaultScope)
	assert.JSONEq(t, `{"address":"https://v:8200"}`, string(cfg.Sections["vault"]), "sections of other types are kept")
}

func TestParseConfigNeverEchoesValues(t *testing.T) {
	canary := "canary" + rand.Text()
	n, err := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil))
	require.NoError(t, err)
	digits := n.String() + "987654321"

	inputs := map[string]string{
		"syntax error after a value":    `{"type":"memory","token":"` + canary + `" x}`,
		"bare word":                     `{"type":"memory","token":` + canary + `}`,
		"unterminated string":           `{"type":"memory","token":"` + canary,
		"unknown field with value":      `{"type":"memory","memory":{"token":"` + canary + `"}}`,
		"number overflow":               `{"type":"oot-test","oot-test":{"greeting":"hi","port":` + digits + `}}`,
		"number into string":            `{"type":"oot-test","oot-test":{"greeting":` + digits + `,"port":1}}`,
		",string value":                 `{"type":"oot-test","oot-test":{"greeting":"hi","port":1,"retries":"` + canary + `"}}`,
		"top-level number":              digits,
		"top-level string":              `"` + canary + `"`,
		"non-object section":            `{"type":"memory","other":"` + canary + `"}`,
		"type with a number":            `{"type":` + digits + `}`,
		"defaultScope with a number":    `{"type":"memory","defaultScope":` + digits + `}`,
		"control character in string":   `{"type":"memory","memory":{"t":"` + canary + "\x01" + `"}}`,
		"invalid escape in string":      `{"type":"memory","other":{"t":"` + canary + `\q"}}`,
		"duplicate section, wrong type": `{"type":"memory","memory":"` + canary + `"}`,
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			_, err := secretstore.ParseConfig(strings.NewReader(in))
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.NotContains(t, err.Error(), canary)
			assert.NotContains(t, err.Error(), digits)
		})
	}
}

func TestParseConfigSizeLimit(t *testing.T) {
	frame := `{"type":"memory","other":{"pad":""}}`
	fits := strings.Replace(frame, `""`, `"`+strings.Repeat("x", 1<<20-len(frame))+`"`, 1)
	require.Len(t, fits, 1<<20)
	_, err := secretstore.ParseConfig(strings.NewReader(fits))
	assert.NoError(t, err, "a config of exactly 1 MiB is accepted")

	tooBig := strings.Replace(fits, `"x`, `"xx`, 1)
	_, err = secretstore.ParseConfig(strings.NewReader(tooBig))
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.Contains(t, err.Error(), fmt.Sprintf("config is larger than %d bytes", 1<<20))

	_, err = secretstore.ParseConfig(&failingReader{})
	assert.ErrorContains(t, err, "reading config: disk on fire")
}

type failingReader struct{}

func (*failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestDecodeSection(t *testing.T) {
	cases := []struct {
		name    string
		section string // "" = absent
		want    ootConfig
		problem string
	}{
		{"absent section leaves dst unchanged", "", ootConfig{Greeting: "default"}, ""},
		{"null section leaves dst unchanged", "null", ootConfig{Greeting: "default"}, ""},
		{"decodes", `{"greeting":"hi","port":9}`, ootConfig{Greeting: "hi", Port: 9}, ""},
		{"unknown field", `{"greting":"hi"}`, ootConfig{}, `oot-test: unknown field "greting" (did you mean "greeting"?)`},
		{"not an object", `"hi"`, ootConfig{}, "oot-test: the section must be a JSON object"},
		{"overflow", `{"port":300}`, ootConfig{}, `oot-test: field "port": expected uint8, got JSON number`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := secretstore.Config{Type: ootType, Sections: map[string]json.RawMessage{}}
			if c.section != "" {
				cfg.Sections[ootType] = json.RawMessage(c.section)
			}
			dst := ootConfig{Greeting: "default"}
			err := cfg.DecodeSection(&dst)
			if c.problem != "" {
				var ce *secretstore.ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, []string{c.problem}, ce.Problems)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, dst)
		})
	}
}

func TestRegisterPanics(t *testing.T) {
	cases := []struct {
		name string
		typ  string
		b    secretstore.Backend
		msg  string
	}{
		{"empty type", "", oot, "secretstore: Register with empty type or nil backend"},
		{"nil backend", "fresh", nil, "secretstore: Register with empty type or nil backend"},
		{"duplicate in-tree", "memory", oot, "secretstore: Register called twice for type memory"},
		{"duplicate out-of-tree", ootType, oot, "secretstore: Register called twice for type oot-test"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.PanicsWithValue(t, c.msg, func() { secretstore.Register(c.typ, c.b) })
		})
	}
	assert.Equal(t, []string{"memory", ootType}, secretstore.Backends(), "failed registrations changed nothing")
}

func TestOpenOutOfTreeBackend(t *testing.T) {
	ctx := t.Context()
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{"type":"oot-test","oot-test":{"greeting":"hello","port":8,"retries":"2"}}`))
	require.NoError(t, err)
	logger := slog.New(slog.DiscardHandler)
	store, err := secretstore.Open(ctx, cfg, secretstore.OpenOptions{Logger: logger})
	require.NoError(t, err)
	defer store.Close()
	gotLogger, gotCfg := oot.seen()
	assert.Same(t, logger, gotLogger, "the backend receives the logger")
	assert.Equal(t, ootConfig{Greeting: "hello", Port: 8, Retries: 2}, gotCfg, "the backend receives its section")
	put(t, store, "a", "1")
	names, err := store.List(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, names)

	_, err = secretstore.Open(ctx, cfg, secretstore.OpenOptions{})
	require.NoError(t, err)
	gotLogger, _ = oot.seen()
	assert.NotNil(t, gotLogger, "without a Logger the backend gets a discarding logger, not nil")

	cfg.Sections[ootType] = json.RawMessage(`{"greeting":"unreachable","port":1}`)
	_, err = secretstore.Open(ctx, cfg, secretstore.OpenOptions{})
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable, "the backend's Open error is returned")

	_, err = secretstore.Open(ctx, secretstore.Config{Type: ootType, DefaultScope: "a//b"}, secretstore.OpenOptions{})
	var ce *secretstore.ConfigError
	require.ErrorAs(t, err, &ce, "Open validates a config built in code")
	assert.Len(t, ce.Problems, 3)
}

func TestOpenMemoryScope(t *testing.T) {
	ctx := t.Context()
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{"type":"memory","defaultScope":"org1"}`))
	require.NoError(t, err)
	store, err := secretstore.Open(ctx, cfg, secretstore.OpenOptions{})
	require.NoError(t, err)
	put(t, store, "db", "v")
	got, err := store.Get(ctx, "db")
	require.NoError(t, err)
	assert.Equal(t, "db", got.Name, "names stay relative to the scope")
}

func FuzzParseConfig(f *testing.F) {
	for _, c := range configCases {
		f.Add(c.json)
	}
	f.Add(`{"type":"memory","other":{"a":"<\u00e9>"},"x":null}`)
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := secretstore.ParseConfig(strings.NewReader(in))
		if err != nil {
			var ce *secretstore.ConfigError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			require.NotEmpty(t, ce.Problems)
			for _, p := range ce.Problems {
				require.NotEmpty(t, strings.TrimSpace(p))
			}
			return
		}
		require.Contains(t, secretstore.Backends(), cfg.Type)
		if sc := strings.Trim(cfg.DefaultScope, "/"); sc != "" {
			require.NoError(t, secretstore.ValidateName(sc))
		}

		redacted, err := json.Marshal(cfg)
		require.NoError(t, err)
		var top map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(redacted, &top), "the redacted form is a JSON object")
		want := 1 + len(cfg.Sections) // type and the sections
		if cfg.DefaultScope != "" {
			want++
		}
		require.Len(t, top, want, "with the same members")
	})
}

// A config's backend sections can hold credentials: printing the config
// (fmt verbs, slog text and JSON) shows the type, scope and section names
// only, and encoding it (directly or inside another value) redacts them.
func TestConfigNeverPrintsSections(t *testing.T) {
	canary := "token-" + rand.Text()
	cfg, err := secretstore.ParseConfig(strings.NewReader(
		`{"type":"oot-test","defaultScope":"acme","oot-test":{"greeting":"` + canary + `","port":1},"vault":{"token":"` + canary + `"}}`))
	require.NoError(t, err)

	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		fmt.Fprintf(&out, verb+"\n", cfg)
		fmt.Fprintf(&out, verb+"\n", &cfg)
	}
	slog.New(slog.NewTextHandler(&out, nil)).Info("cfg", "config", cfg)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("cfg", "config", cfg)
	for _, form := range leakForms([]byte(canary)) {
		assert.NotContains(t, out.String(), form)
	}
	assert.Contains(t, out.String(), "oot-test", "type is printed")
	assert.Contains(t, out.String(), "vault", "section names are printed")

	// A struct holding the config, as an application logs its settings:
	// the JSON handler marshals it, and MarshalJSON redacts.
	settings := struct {
		Store secretstore.Config
		Port  int
	}{cfg, 8080}
	var nested bytes.Buffer
	slog.New(slog.NewJSONHandler(&nested, nil)).Info("settings", "settings", settings)
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	for _, out := range []string{nested.String(), string(raw)} {
		for _, form := range leakForms([]byte(canary)) {
			assert.NotContains(t, out, form)
		}
	}
	assert.JSONEq(t, `{"type":"oot-test","defaultScope":"acme","oot-test":{"greeting":"[redacted]","port":"[redacted]"},"vault":{"token":"[redacted]"}}`, string(raw),
		"structure and names are kept")
}
