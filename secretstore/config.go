package secretstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
	"go.opentelemetry.io/otel/metric"
)

// Config selects and configures a backend. Its JSON form is
//
//	{"type": "vault", "defaultScope": "myorg", "vault": {...}, "awssm": {...}}
//
// Each backend reads its own section, named after its type; sections for
// other types are kept but ignored, so one file can hold several.
type Config struct {
	// Type is the registered backend name: "memory", "vault", "awssm", or
	// an out-of-tree backend's name.
	Type string
	// DefaultScope is the path prefix every secret name is relative to.
	DefaultScope string
	// Sections holds each backend section as raw JSON, keyed by type.
	Sections map[string]json.RawMessage
}

// maxConfigSize bounds the JSON accepted by ParseConfig.
const maxConfigSize = 1 << 20

// ParseConfig decodes a JSON config of at most 1 MiB (1<<20 bytes) and
// validates it, reporting every problem at once (see Config.Validate).
func ParseConfig(r io.Reader) (Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("secretstore: reading config: %w", err)
	}
	if len(data) > maxConfigSize {
		return Config{}, &ConfigError{Problems: []string{fmt.Sprintf("config is larger than %d bytes", maxConfigSize)}}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Config{}, &ConfigError{Problems: []string{"config is empty"}}
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return Config{}, &ConfigError{Problems: []string{"config is not valid JSON: " + jsonProblem(err)}}
		}
		return Config{}, &ConfigError{Problems: []string{jsonProblem(err)}}
	}
	return cfg, cfg.Validate()
}

// UnmarshalJSON decodes type and defaultScope and keeps every other
// top-level member as a backend section.
func (c *Config) UnmarshalJSON(data []byte) error {
	if !isJSONObject(data) {
		return errors.New("config must be a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*c = Config{Sections: map[string]json.RawMessage{}}
	for k, v := range raw {
		var err error
		switch k {
		case "type":
			err = json.Unmarshal(v, &c.Type)
		case "defaultScope":
			err = json.Unmarshal(v, &c.DefaultScope)
		default:
			c.Sections[k] = v
		}
		if err != nil {
			return fmt.Errorf("%q: %s", k, jsonProblem(err))
		}
	}
	return nil
}

// MarshalJSON encodes the config with its credentials redacted: type and
// defaultScope as they are, and each backend section with its structure and
// member names kept but every string and number replaced by
// [edgesecrets.Redacted] (booleans and nulls stay). A struct holding a Config can so be
// logged through slog's JSON handler, or encoded into an error report,
// without writing a token out.
func (c Config) MarshalJSON() ([]byte, error) {
	sections := make(map[string]json.RawMessage, len(c.Sections))
	for k, v := range c.Sections {
		red, err := redactJSON(v)
		if err != nil {
			return nil, fmt.Errorf("secretstore: config section %q: %w", k, err)
		}
		sections[k] = red
	}
	return c.marshal(sections)
}

func (c Config) marshal(sections map[string]json.RawMessage) ([]byte, error) {
	m := map[string]any{"type": c.Type}
	if c.DefaultScope != "" {
		m["defaultScope"] = c.DefaultScope
	}
	for k, v := range sections {
		m[k] = v
	}
	return json.Marshal(m)
}

// redactJSON returns raw with every string and number replaced by
// edgesecrets.Redacted, keeping objects, arrays, member names, booleans and nulls.
func redactJSON(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("not valid JSON")
	}
	var redact func(any) any
	redact = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				v[k] = redact(e)
			}
			return v
		case []any:
			for i, e := range v {
				v[i] = redact(e)
			}
			return v
		case string, json.Number:
			return edgesecrets.Redacted
		}
		return v // bool, nil
	}
	return json.Marshal(redact(v))
}

// Format implements fmt.Formatter. Backend sections can hold credentials
// (tokens, keys), so every verb prints the type, scope and section names
// only.
func (c Config) Format(f fmt.State, verb rune) {
	_, _ = fmt.Fprintf(f, "{Type:%s DefaultScope:%s Sections:%v}", c.Type, c.DefaultScope, slices.Sorted(maps.Keys(c.Sections)))
}

// LogValue implements slog.LogValuer with the same redaction as Format.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("type", c.Type),
		slog.String("defaultScope", c.DefaultScope),
		slog.Any("sections", slices.Sorted(maps.Keys(c.Sections))),
	)
}

// DecodeSection decodes the section named after the config's type into
// dst, usually a pointer to a struct, and reports every problem in it: members whose
// values do not fit their fields and unknown members (a near miss named
// with the field it misspells), in nested objects too. Members that fit are
// decoded whatever the problems of others, so the backend can check their
// values as well. A missing section leaves dst unchanged. Problems come in a
// *ConfigError, each prefixed with the section's path, as in
// `vault.auth: unknown field "tokn" (did you mean "token"?)`.
func (c Config) DecodeSection(dst any) error {
	raw, ok := c.Sections[c.Type]
	if !ok || len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	if !isJSONObject(raw) {
		return &ConfigError{Problems: []string{c.Type + ": the section must be a JSON object"}}
	}
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		// A map or other value: nothing is unknown to it.
		if err := json.Unmarshal(raw, dst); err != nil {
			return &ConfigError{Problems: []string{c.Type + ": " + jsonProblem(err)}}
		}
		return nil
	}
	if problems := decodeEach(c.Type, raw, v); len(problems) > 0 {
		return &ConfigError{Problems: problems}
	}
	return nil
}

// Validate checks the config and the backend's section and returns a
// *ConfigError listing every problem found, or nil.
func (c Config) Validate() error {
	var problems []string
	b, typeKnown := lookupBackend(c.Type)
	switch {
	case c.Type == "":
		problems = append(problems, `"type" is missing; registered types: `+strings.Join(Backends(), ", "))
	case !typeKnown:
		problems = append(problems, fmt.Sprintf("type %q is not registered; registered types: %s", c.Type, strings.Join(Backends(), ", ")))
	}
	if _, err := cleanScope(c.DefaultScope); err != nil {
		problems = append(problems, "defaultScope: "+err.Error())
	}
	problems = append(problems, sectionProblems(c.Sections, c.Type)...)
	if typeKnown {
		if err := b.Validate(c); err != nil {
			problems = append(problems, problemLines(err)...)
		}
	}
	if len(problems) > 0 {
		return &ConfigError{Problems: problems}
	}
	return nil
}

// ConfigError lists every problem found in a Config. It matches edgesecrets.ErrInvalid.
type ConfigError struct {
	Problems []string
}

// Error lists the problems, one per line.
func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 {
		return "secretstore: invalid config: " + e.Problems[0]
	}
	return fmt.Sprintf("secretstore: invalid config: %d problems:\n  - %s", len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// Unwrap returns edgesecrets.ErrInvalid.
func (e *ConfigError) Unwrap() error { return edgesecrets.ErrInvalid }

// problemLines flattens an error (possibly an errors.Join or a
// *ConfigError) into one problem per line.
func problemLines(err error) []string {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var lines []string
		for _, e := range joined.Unwrap() {
			lines = append(lines, problemLines(e)...)
		}
		return lines
	}
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Problems
	}
	var lines []string
	for l := range strings.SplitSeq(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// sectionProblems reports top-level members that cannot be backend
// sections: near misses of "type", "defaultScope" or a registered type
// (member names are case-sensitive here, unlike encoding/json's default),
// and non-object values, which would otherwise be kept as sections and
// silently ignored. An object under another name is kept: the section of
// a backend this program does not link. The section of the selected type
// is left to its backend's Validate.
func sectionProblems(sections map[string]json.RawMessage, typ string) []string {
	known := append([]string{"type", "defaultScope"}, Backends()...)
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(sections)) {
		if k == typ || slices.Contains(known, k) {
			continue
		}
		if s := suggest(k, known); s != "" {
			problems = append(problems, unknownField(k, []string{s}))
			continue
		}
		if !isJSONObject(sections[k]) {
			problems = append(problems, fmt.Sprintf("%q is not a backend section: top-level members other than \"type\" and \"defaultScope\" must be JSON objects", k))
		}
	}
	return problems
}

func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && (t[0] == '{' || string(t) == "null")
}

// jsonProblem describes a JSON decoding error without quoting the input.
func jsonProblem(err error) string { return jsonproblem.Describe(err) }

// Backend is what a store backend registers: a validator for its config
// section and a constructor.
type Backend interface {
	// Validate checks cfg's section for this backend and returns every
	// problem, one per line (errors.Join or a *ConfigError), or nil.
	Validate(cfg Config) error
	// Open returns a ready store for a config that passed Validate.
	Open(ctx context.Context, cfg Config, opts OpenOptions) (*Store, error)
}

// OpenOptions carry what a config file cannot: a logger and similar
// process-level dependencies.
type OpenOptions struct {
	// Logger receives the backend's diagnostics. Nil discards them.
	Logger *slog.Logger
	// MeterProvider makes the store's instruments (Options.MeterProvider);
	// nil means the global one.
	MeterProvider metric.MeterProvider
}

// The backend registry, the package's only mutable state (as database/sql's
// driver registry).
var (
	registryMu sync.RWMutex
	registry   = map[string]Backend{}
)

// Register makes a backend available to Open under typ. It panics if typ is
// empty, b is nil, or typ is already registered: registration happens in
// init functions and a clash is a programming error.
func Register(typ string, b Backend) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if typ == "" || b == nil {
		panic("secretstore: Register with empty type or nil backend")
	}
	if _, dup := registry[typ]; dup {
		panic("secretstore: Register called twice for type " + typ)
	}
	registry[typ] = b
}

// Backends returns the registered type names, sorted.
func Backends() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for k := range registry {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func lookupBackend(typ string) (Backend, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	b, ok := registry[typ]
	return b, ok
}

// Open validates cfg and opens the backend it names. The backend's package
// must be imported (for its init) by the program, for example
//
//	import _ "github.com/edgesecrets/edgesecrets/secretstore/memory"
func Open(ctx context.Context, cfg Config, opts OpenOptions) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b, _ := lookupBackend(cfg.Type)
	return b.Open(ctx, cfg, opts)
}
