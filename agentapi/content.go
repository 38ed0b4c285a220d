package agentapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// binaryValue is how a JSON-format file holds a value that is not valid UTF-8.
type binaryValue struct {
	Base64 string `json:"base64"`
}

// renderSecret returns the file content of one service secret (see the
// package documentation, "File content"). Errors name the secret and keys,
// never values.
func renderSecret(name string, d agreement.SecretDetails) ([]byte, error) {
	key, single, err := agreement.ContentKey(d.Format, d.Data.Keys())
	switch {
	case err != nil:
		return nil, fmt.Errorf("secret %s: %w: %w", quoteName(name), edgesecrets.ErrInvalid, err)
	case single:
		return bytes.Clone(d.Data[key]), nil
	}
	return renderJSON(name, d.Data)
}

func renderJSON(name string, data edgesecrets.Data) ([]byte, error) {
	obj := make(map[string]any, len(data))
	for k, v := range data {
		if !utf8.ValidString(k) {
			return nil, fmt.Errorf("secret %s: %w: a key is not valid UTF-8", quoteName(name), edgesecrets.ErrInvalid)
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
