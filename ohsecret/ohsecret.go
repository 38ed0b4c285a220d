// Package ohsecret is Open Horizon's secret body, the JSON object
// {"key": "<key>", "value": "<value>"}: a value and a name for it (often
// "username" or "password"; it may be empty). It is what hzn secretsmanager
// secret add sends and what anax's agbot stores, one Vault KV entry with
// those two data keys, and serves back through its secrets-manager API
// (open-horizon/anax agreementbot/secrets/secrets.go, SecretDetails); it is
// also what anax's agent writes into a service's secret file and serves at
// GET /api/v1/secrets/{name} (resource/secret_api.go, secretObject).
//
// A store secret's data is any set of named values (edgesecrets.Data), so
// FromData maps it onto the one body: data written through Open Horizon
// ("value", with or without "key") gives those two back; data with a
// single entry gives its name as the key and its value; any other data
// gives an empty key and, as the value, the data as one compact JSON
// object with sorted keys. FromFile does the same for the content of a
// service's secret file. The agbot (package secretsapi, or anax's own
// agbot through an AgbotSecrets plugin) and the agent (package agentapi)
// share these rules, so a secret reads the same on both sides.
//
// The body's printed forms never show the value; only its JSON form
// (Marshal) carries it.
package ohsecret

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// ErrTooLarge is matched (errors.Is) by Decode's error for a body over its
// limit, so that a server can answer it apart from a malformed body.
var ErrTooLarge = errors.New("secret body too large")

// Member names of the body, which are also the data keys a secret written
// through the Open Horizon API has.
const (
	KeyMember   = "key"
	ValueMember = "value"
)

// MaxBodySize bounds a request body Decode reads: a value of up to 1 MiB
// (a certificate chain, a kubeconfig) with JSON escaping to spare.
const MaxBodySize = 2<<20 + 4<<10

// Details is one Open Horizon secret: a key (a name for the value, often
// "username" or "password"; anax lets it be empty) and the value. Printing
// it (fmt with any verb, slog) shows the key and [edgesecrets.Redacted]; its
// JSON form, which carries the value, is the wire body.
type Details struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Format implements fmt.Formatter: the key, never the value.
func (d Details) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "{Key:%q Value:%s}", d.Key, edgesecrets.Redacted) // fmt.State buffers in memory; Format has no error to return
}

// String returns the printed form: the key, never the value.
func (d Details) String() string { return fmt.Sprint(d) }

// GoString returns the printed form: the key, never the value.
func (d Details) GoString() string { return fmt.Sprint(d) }

// LogValue implements slog.LogValuer: the key, never the value.
func (d Details) LogValue() slog.Value {
	return slog.GroupValue(slog.String(KeyMember, d.Key), slog.String(ValueMember, edgesecrets.Redacted))
}

// Data is the secret's data in the store: {"key": Key, "value": Value}, the
// layout anax's agbot writes to Vault.
func (d Details) Data() edgesecrets.Data {
	return edgesecrets.Data{KeyMember: []byte(d.Key), ValueMember: []byte(d.Value)}
}

// Marshal returns the wire body, indented as anax indents it.
func (d Details) Marshal() []byte {
	b, _ := json.MarshalIndent(d, "", "  ") // two strings always encode
	return b
}

// Decode reads a request body {"key":"…","value":"…"} of at most limit
// bytes. Both members are required (the key may be empty); anything else in
// the object, another JSON type or trailing data is refused. Errors say
// what was wrong without quoting the input; a body over the limit matches
// ErrTooLarge.
func Decode(r io.Reader, limit int) (Details, error) {
	var body struct {
		Key   *string `json:"key"`
		Value *string `json:"value"`
	}
	if err := jsonproblem.Decode(r, limit, &body); err != nil {
		if errors.Is(err, jsonproblem.ErrTooLarge) {
			return Details{}, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		return Details{}, fmt.Errorf(`secret body: want {"key": "<key>", "value": "<value>"}: %w`, err)
	}
	var missing []string
	if body.Key == nil {
		missing = append(missing, `"key"`)
	}
	if body.Value == nil {
		missing = append(missing, `"value"`)
	}
	if len(missing) > 0 {
		return Details{}, fmt.Errorf(`secret body: member %s missing; want {"key": "<key>", "value": "<value>"}`, strings.Join(missing, " and "))
	}
	return Details{Key: *body.Key, Value: *body.Value}, nil
}

// IsKeyValue reports whether a secret's data keys are Open Horizon's: a
// "value", with or without a "key" (what the Open Horizon API writes).
func IsKeyValue(keys []string) bool {
	switch len(keys) {
	case 1:
		return keys[0] == ValueMember
	case 2:
		return keys[0] == KeyMember && keys[1] == ValueMember || keys[0] == ValueMember && keys[1] == KeyMember
	}
	return false
}

// FromData maps a secret's data onto the body:
//
//   - data with a "value" and at most a "key" besides (what the Open Horizon
//     API writes): those two;
//   - data with one entry, as {"password": "…"}: its name as the key and its
//     value;
//   - any other data: an empty key and, as the value, the data as one
//     compact JSON object with sorted keys (what a service's JSON secret
//     file holds).
//
// Values must be valid UTF-8, since the body carries them as JSON strings;
// the error names the key, never the value.
func FromData(d edgesecrets.Data) (Details, error) {
	switch {
	case IsKeyValue(d.Keys()):
		if err := checkUTF8(d, KeyMember, ValueMember); err != nil {
			return Details{}, err
		}
		return Details{Key: string(d[KeyMember]), Value: string(d[ValueMember])}, nil
	case len(d) == 1:
		for k, v := range d {
			if err := checkUTF8(d, k); err != nil {
				return Details{}, err
			}
			return Details{Key: k, Value: string(v)}, nil
		}
	case len(d) == 0:
		return Details{}, errors.New("the secret has no data")
	}
	keys := slices.Sorted(maps.Keys(d))
	if err := checkUTF8(d, keys...); err != nil {
		return Details{}, err
	}
	obj := make(map[string]string, len(d))
	for k, v := range d {
		obj[k] = string(v)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return Details{}, fmt.Errorf("encoding the secret's data: %w", err)
	}
	return Details{Value: strings.TrimSuffix(b.String(), "\n")}, nil
}

// FromFile maps the content of a service's secret file onto the body. A
// JSON object of strings (the agent's file for a JSON-format secret, and
// anax's {"key":…,"value":…}) follows FromData's rules; any other JSON
// object (one with binary values written as {"base64":…}) becomes the value
// as it is, with an empty key; so does any other content that is valid
// UTF-8 (a raw-format or value-only file). Binary raw content cannot be a
// JSON string and is refused.
func FromFile(content []byte) (Details, error) {
	var obj map[string]any
	if json.Unmarshal(content, &obj) == nil && obj != nil {
		data := make(edgesecrets.Data, len(obj))
		for k, v := range obj {
			s, ok := v.(string)
			if !ok {
				data = nil
				break
			}
			data[k] = []byte(s)
		}
		if len(data) > 0 {
			return FromData(data)
		}
	}
	return FromValue("", content)
}

// FromValue is the body of a secret file that holds one value (formats raw
// and value_only) delivered with key: the content as it is. Binary content
// cannot be a JSON string and is refused.
func FromValue(key string, content []byte) (Details, error) {
	if !utf8.Valid(content) {
		return Details{}, errors.New("the secret file holds binary content, which the key/value body cannot carry (give the secret format json: binary values are base64-encoded there)")
	}
	return Details{Key: key, Value: string(content)}, nil
}

func checkUTF8(d edgesecrets.Data, keys ...string) error {
	for _, k := range keys {
		if !utf8.ValidString(k) {
			return errors.New("a key of the secret is not valid UTF-8")
		}
		if !utf8.Valid(d[k]) {
			return fmt.Errorf("the value of key %q is binary, which the key/value body cannot carry as a JSON string", k)
		}
	}
	return nil
}
