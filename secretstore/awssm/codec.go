package awssm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/binarykey"
)

// binaryKeysField is the reserved member of a SecretString that lists the
// keys whose values are base64 (standard encoding) because they are not
// valid UTF-8. It is present only when some value needs it, so secrets of
// text values are plain JSON objects any tool reads. A data key of this name
// is rejected by Put.
const binaryKeysField = binarykey.Marker

// maxSecretStringBytes is AWS's limit on a SecretString.
const maxSecretStringBytes = 65536

// encodeData returns the SecretString for d: a JSON object of the values,
// text as JSON strings and non-UTF-8 values as base64 listed under
// binaryKeysField.
func encodeData(d edgesecrets.Data) (string, error) {
	obj := make(map[string]any, len(d)+1)
	var binary []string
	for k, v := range d {
		switch {
		case k == binaryKeysField:
			return "", fmt.Errorf("data key %q is reserved by the awssm backend", k)
		case !utf8.ValidString(k):
			return "", fmt.Errorf("data key %q is not valid UTF-8, which JSON member names must be", k)
		}
		if utf8.Valid(v) {
			obj[k] = string(v)
			continue
		}
		obj[k] = base64.StdEncoding.EncodeToString(v)
		binary = append(binary, k)
	}
	if binary != nil {
		slices.Sort(binary)
		obj[binaryKeysField] = binary
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return "", errors.New("data could not be encoded as JSON")
	}
	s := strings.TrimSuffix(b.String(), "\n")
	if len(s) > maxSecretStringBytes {
		return "", fmt.Errorf("encoded data is %d bytes, over AWS's %d-byte SecretString limit", len(s), maxSecretStringBytes)
	}
	return s, nil
}

// errNotObject is what decodeData reports for a SecretString that is not a
// JSON object. It says nothing of the content, which is secret.
var errNotObject = errors.New("SecretString is not a JSON object of key/value pairs")

// decodeData parses a SecretString written by encodeData or by any tool
// that stores a JSON object. String members are the values' bytes; members
// listed under binaryKeysField are base64-decoded; other JSON values
// (numbers, booleans, objects, arrays, null) are kept as their compact JSON
// text. Errors never quote the input.
func decodeData(s string) (edgesecrets.Data, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
		return nil, errNotObject
	}
	binary := map[string]bool{}
	if raw, ok := obj[binaryKeysField]; ok {
		var keys []string
		if err := json.Unmarshal(raw, &keys); err != nil {
			return nil, fmt.Errorf("SecretString member %q is not a list of key names", binaryKeysField)
		}
		for _, k := range keys {
			binary[k] = true
		}
		delete(obj, binaryKeysField)
	}
	d := make(edgesecrets.Data, len(obj))
	for k, raw := range obj {
		if len(raw) > 0 && raw[0] == '"' {
			var str string
			if err := json.Unmarshal(raw, &str); err != nil {
				return nil, errNotObject
			}
			if !binary[k] {
				d[k] = []byte(str)
				continue
			}
			v, err := base64.StdEncoding.DecodeString(str)
			if err != nil {
				return nil, fmt.Errorf("SecretString member %q is listed as base64 but is not", k)
			}
			d[k] = v
			continue
		}
		if binary[k] {
			return nil, fmt.Errorf("SecretString member %q is listed as base64 but is not a string", k)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return nil, errNotObject
		}
		d[k] = c.Bytes()
	}
	for k := range binary {
		if _, ok := d[k]; !ok {
			return nil, fmt.Errorf("SecretString lists %q as base64 but has no such member", k)
		}
	}
	return d, nil
}

// AWS's tag limits.
const (
	maxTags           = 50
	maxTagKeyLength   = 128
	maxTagValueLength = 256
)

// checkLabels reports every way labels break AWS's tag rules: at most 50;
// keys 1–128 and values up to 256 characters of letters, numbers, spaces and
// _ . : / = + - @; keys not starting with "aws:". Labels are not secret, so
// the problems may name them.
func checkLabels(labels map[string]string) error {
	var problems []string
	if len(labels) > maxTags {
		problems = append(problems, fmt.Sprintf("%d labels, AWS allows at most %d tags", len(labels), maxTags))
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		switch {
		case utf8.RuneCountInString(k) > maxTagKeyLength:
			problems = append(problems, fmt.Sprintf("label key %q is longer than %d characters", k, maxTagKeyLength))
		case !tagText(k):
			problems = append(problems, fmt.Sprintf("label key %q has characters AWS tags do not allow", k))
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			problems = append(problems, fmt.Sprintf("label key %q uses the reserved aws: prefix", k))
		}
		switch {
		case utf8.RuneCountInString(v) > maxTagValueLength:
			problems = append(problems, fmt.Sprintf("value of label %q is longer than %d characters", k, maxTagValueLength))
		case !tagText(v):
			problems = append(problems, fmt.Sprintf("value of label %q has characters AWS tags do not allow", k))
		}
	}
	if problems != nil {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// tagText reports whether s uses only the characters AWS allows in tags.
func tagText(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.Is(unicode.Zs, r) && !strings.ContainsRune("_.:/=+-@", r) {
			return false
		}
	}
	return true
}

func toTags(labels map[string]string) []types.Tag {
	tags := make([]types.Tag, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(labels[k])})
	}
	return tags
}

// fromTags returns the labels among tags. Tags whose key starts with "aws:"
// are set by AWS services (CloudFormation, for one), cannot be changed by
// users and are not labels: they are left out, and Put leaves them alone.
func fromTags(tags []types.Tag) map[string]string {
	var labels map[string]string
	for _, t := range tags {
		if strings.HasPrefix(strings.ToLower(aws.ToString(t.Key)), "aws:") {
			continue
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return labels
}

// checkAWSName reports a name (or scope, or list prefix) AWS cannot store:
// secret names use ASCII letters, digits and / _ + = . @ - only.
func checkAWSName(name string) error {
	for _, r := range name {
		if r >= utf8.RuneSelf || (!unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("/_+=.@-", r)) {
			return fmt.Errorf("AWS secret names allow only ASCII letters, digits and / _ + = . @ -, not %q", r)
		}
	}
	return nil
}
