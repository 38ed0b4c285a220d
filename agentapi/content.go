package agentapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// binaryValue is how a JSON-format file holds a value that is not valid UTF-8.
type binaryValue struct {
	Base64 string `json:"base64"`
}

// renderSecret returns the file content of one service secret (see the
// package documentation, "File content"). Errors name the secret and keys,
// never values.
func renderSecret(name string, d agreement.SecretDetails) ([]byte, error) {
	switch d.Format {
	case agreement.FormatRaw:
		if len(d.Data) != 1 {
			return nil, fmt.Errorf("secret %s: %w: format %q needs exactly one key, got %d", quoteName(name), secretstore.ErrInvalid, agreement.FormatRaw, len(d.Data))
		}
		for _, v := range d.Data {
			return bytes.Clone(v), nil
		}
	case agreement.FormatValueOnly:
		// Open Horizon's value_only: the "value" of a {"key","value"} secret.
		v, ok := d.Data["value"]
		if !ok {
			return nil, fmt.Errorf("secret %s: %w: format %q needs a %q key, got %d other keys", quoteName(name), secretstore.ErrInvalid, agreement.FormatValueOnly, "value", len(d.Data))
		}
		return bytes.Clone(v), nil
	case "", agreement.FormatJSON:
		return renderJSON(name, d.Data)
	}
	return nil, fmt.Errorf("secret %s: %w: unknown format %q", quoteName(name), secretstore.ErrInvalid, d.Format)
}

func renderJSON(name string, data secretstore.Data) ([]byte, error) {
	obj := make(map[string]any, len(data))
	for k, v := range data {
		if !utf8.ValidString(k) {
			return nil, fmt.Errorf("secret %s: %w: a key is not valid UTF-8", quoteName(name), secretstore.ErrInvalid)
		}
		if utf8.Valid(v) {
			obj[k] = string(v)
		} else {
			obj[k] = binaryValue{Base64: base64.StdEncoding.EncodeToString(v)}
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// Values are written as they are: "<" in a password stays "<".
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("secret %s: encoding JSON: %w", quoteName(name), err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
