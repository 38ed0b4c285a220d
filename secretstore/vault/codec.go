package vault

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/binarykey"
)

// encodeData turns secret data into the JSON object Vault stores. Vault KV
// stores JSON, and a JSON string cannot hold arbitrary bytes, so a value
// that is not valid UTF-8 is written as the object
// {"edgesecrets:base64": "<standard base64>"} (binarykey.Marker). Every
// other value is written as a plain JSON string, so secrets stay readable
// and writable with `vault kv get/put`.
func encodeData(d edgesecrets.Data) map[string]any {
	out := make(map[string]any, len(d))
	for k, v := range d {
		if utf8.Valid(v) {
			out[k] = string(v)
		} else {
			out[k] = map[string]any{binarykey.Marker: base64.StdEncoding.EncodeToString(v)}
		}
	}
	return out
}

// decodeData turns a Vault KV data object into secret data. A string is
// its bytes; an object {binarykey.Marker: base64} is the decoded bytes; any other
// JSON value (a number, boolean, null, array or object another tool wrote)
// is its compact JSON text.
func decodeData(m map[string]any) edgesecrets.Data {
	out := make(edgesecrets.Data, len(m))
	for k, v := range m {
		out[k] = decodeValue(v)
	}
	return out
}

func decodeValue(v any) []byte {
	switch v := v.(type) {
	case string:
		return []byte(v)
	case map[string]any:
		if len(v) == 1 {
			if s, ok := v[binarykey.Marker].(string); ok {
				if b, err := base64.StdEncoding.DecodeString(s); err == nil {
					return b
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only values decoded from JSON reach here, and those re-encode.
		return nil
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// decodeLabels turns custom_metadata into labels; nil when there are none.
func decodeLabels(v any) map[string]string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		} else {
			out[k] = string(decodeValue(v))
		}
	}
	return out
}

// Limits Vault enforces on KV v2 custom_metadata.
const (
	maxLabels           = 64
	maxLabelKeyLength   = 128
	maxLabelValueLength = 512
)

// checkLabels reports labels Vault would refuse, before anything is
// written, naming the label key (never its value).
func checkLabels(labels map[string]string) error {
	if len(labels) > maxLabels {
		return fmt.Errorf("%d labels; vault custom_metadata holds at most %d", len(labels), maxLabels)
	}
	var errs []error
	for k, v := range labels {
		switch {
		case len(k) > maxLabelKeyLength:
			errs = append(errs, fmt.Errorf("label key %q is longer than %d bytes", k, maxLabelKeyLength))
		case !printable(k):
			errs = append(errs, fmt.Errorf("label key %q has an unprintable character", k))
		}
		switch {
		case v == "":
			errs = append(errs, fmt.Errorf("label %q has an empty value; vault custom_metadata needs non-empty values", k))
		case len(v) > maxLabelValueLength:
			errs = append(errs, fmt.Errorf("label %q has a value longer than %d bytes", k, maxLabelValueLength))
		case !printable(v):
			errs = append(errs, fmt.Errorf("label %q has an unprintable character in its value", k))
		}
	}
	return errors.Join(errs...)
}

// printable is Vault's test for custom_metadata: every rune printable.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
}

// kvVersion is the part of KV v2 version metadata the store uses.
type kvVersion struct {
	number    int
	createdAt time.Time
	deleted   bool // soft-deleted (deletion_time reached) or destroyed
}

// parseVersion reads a KV v2 version metadata object: from a data read's
// "metadata", or one entry of a metadata read's "versions". now decides
// whether a deletion_time has been reached.
func parseVersion(m map[string]any, number int, now time.Time) kvVersion {
	v := kvVersion{number: number}
	if n, ok := m["version"].(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			v.number = int(i)
		}
	}
	if s, ok := m["created_time"].(string); ok {
		v.createdAt, _ = time.Parse(time.RFC3339Nano, s)
	}
	if s, ok := m["deletion_time"].(string); ok && s != "" {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil && !t.After(now) {
			v.deleted = true
		}
	}
	if d, ok := m["destroyed"].(bool); ok && d {
		v.deleted = true
	}
	return v
}
