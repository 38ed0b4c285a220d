package agentapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// FileOptions say how one secret's file of an instance is written: its
// owner, group and mode, and whether its content is rendered from a
// template or a ready output format instead of the secret's format (see
// the package documentation, "Templated files"). The zero value writes
// the file as before: root-only 0400, or 0440 and the instance's group.
type FileOptions struct {
	// UID and GID, when set, own the file (fchown on the staging file
	// before it is renamed into place). Nil: the agent's user, and the
	// instance's group (Instance.GroupReadable) or the agent's.
	UID *int `json:"uid,omitempty"`
	GID *int `json:"gid,omitempty"`
	// Mode is the file's permission bits; zero means 0400 (0440 with
	// GroupReadable). It must include owner read and nothing for others,
	// and no setuid, setgid or sticky bit.
	Mode fs.FileMode `json:"mode,omitempty"`
	// Template, when set, renders the file with Go's text/template over
	// the secret's keys (see TemplateFuncs); it is parsed when declared.
	Template string `json:"template,omitempty"`
	// Output, when set, renders the file in a ready format instead:
	// OutputEnv or OutputPEMBundle. Not with Template.
	Output Output `json:"output,omitempty"`
}

// Output is a ready format for a secret's file (FileOptions.Output).
type Output string

// The ready output formats.
const (
	// OutputEnv writes one KEY="value" line per key, in key order, each
	// value quoted as envQuote quotes it; every key must be an
	// environment variable name ([A-Za-z_][A-Za-z0-9_]*).
	OutputEnv Output = "env"
	// OutputPEMBundle writes the values that are PEM (one or more blocks
	// and nothing else) concatenated in key order, each ending in a
	// newline; other keys are left out. At least one value must be PEM.
	OutputPEMBundle Output = "pem-bundle"
)

// ReasonTemplateFailed starts the reason of a rejection whose message
// could not be rendered by an instance's template (or ready output
// format): "TemplateFailed: ...". The last good file is kept.
const ReasonTemplateFailed = agreement.RejectedTemplateFailed

// ErrTemplateFailed matches (errors.Is) the error of an apply that a
// template or ready output format could not render. It also matches
// edgesecrets.ErrInvalid: the message is rejected, nothing is written.
var ErrTemplateFailed = fmt.Errorf("%w: template failed", edgesecrets.ErrInvalid)

// templateError is a render failure of one instance's secret file. It
// holds the template's name and position only: the text of an execution
// error may quote the data.
type templateError struct {
	instance, secret, where string
}

func (e *templateError) Error() string {
	return fmt.Sprintf("%s: instance %s, secret %s: %s", ErrTemplateFailed.Error(), quoteName(e.instance), quoteName(e.secret), e.where)
}

func (e *templateError) Is(target error) bool { return target == ErrTemplateFailed }

func (e *templateError) Unwrap() error { return ErrTemplateFailed }

// templatePosition matches the "template: name:line:col" head of a
// text/template error; what follows it may quote data.
var templatePosition = regexp.MustCompile(`^template: ([^:\s]+(?::\d+){1,2})`)

// sanitizeTemplateError returns where a template failed, never the error's text.
func sanitizeTemplateError(err error) string {
	if m := templatePosition.FindStringSubmatch(err.Error()); m != nil {
		return "template " + m[1] + " failed"
	}
	return "template failed"
}

// TemplateFuncs lists the functions a template may call, besides
// text/template's built-ins; nothing else is defined (no file,
// environment or network access):
//
//	base64Encode s    standard base64 of s
//	base64Decode s    the bytes standard base64 s encodes (an error if not base64)
//	json s            s as a JSON string, quoted
//	toJSON .          the secret's keys as one compact JSON object, keys sorted
//	pemBlock type s   s (raw bytes) as one PEM block of the type
//	pem s             s unchanged if it is PEM (blocks and whitespace only), else an error
//	envQuote s        s double-quoted for an env file: \ " $ ` escaped, newline as \n
//	keys .            the secret's key names, sorted
//
// The template's data (.) is the secret's keys: a map of key to value
// (as a string); a key it names that the secret lacks is an error.
func TemplateFuncs() []string {
	return slices.Sorted(maps.Keys(templateFuncs))
}

var templateFuncs = template.FuncMap{
	"base64Encode": func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	"base64Decode": func(s string) (string, error) {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "", errors.New("not base64")
		}
		return string(b), nil
	},
	"json": func(s string) (string, error) {
		if !utf8.ValidString(s) {
			return "", errors.New("not UTF-8")
		}
		return jsonString(s), nil
	},
	"toJSON": func(m map[string]string) (string, error) {
		data := make(edgesecrets.Data, len(m))
		for k, v := range m {
			data[k] = []byte(v)
		}
		b, err := renderJSON("", data)
		return string(b), err
	},
	"pemBlock": func(typ, s string) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: []byte(s)}))
	},
	"pem": func(s string) (string, error) {
		if !isPEM([]byte(s)) {
			return "", errors.New("not PEM")
		}
		return s, nil
	},
	"envQuote": envQuote,
	"keys": func(m map[string]string) []string {
		return slices.Sorted(maps.Keys(m))
	},
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a valid UTF-8 string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// envQuote double-quotes s for an env file (systemd's EnvironmentFile,
// dotenv, a shell's source): backslash, double quote, dollar and backtick
// are escaped, a newline becomes \n and a carriage return \r. A NUL
// cannot be in an environment value.
func envQuote(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", errors.New("a NUL byte cannot be quoted")
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range []byte(s) {
		switch r {
		case '\\', '"', '$', '`':
			b.WriteByte('\\')
			b.WriteByte(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteByte(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// isPEM reports whether b is one or more PEM blocks and whitespace only.
func isPEM(b []byte) bool {
	found := false
	for {
		block, rest := pem.Decode(b)
		if block == nil {
			return found && len(bytes.TrimSpace(b)) == 0
		}
		found, b = true, rest
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseTemplate parses a secret's template with the function set only.
func parseTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Funcs(templateFuncs).Option("missingkey=error").Parse(text)
}

// check refuses unsafe or malformed options of the secret name, with
// edgesecrets.ErrInvalid naming the file and the rule.
func (o FileOptions) check(instance, name string) error {
	fail := func(rule string, args ...any) error {
		return fmt.Errorf("%w: instance %s, file %s: %s", edgesecrets.ErrInvalid, quoteName(instance), quoteName(name), fmt.Sprintf(rule, args...))
	}
	if err := checkSecretName(name); err != nil {
		return fmt.Errorf("instance %s: file options: %w", quoteName(instance), err)
	}
	switch {
	case o.Mode&^fs.ModePerm != 0:
		return fail("mode %s: no setuid, setgid, sticky or file type bits", o.Mode)
	case o.Mode != 0 && o.Mode&0o007 != 0:
		return fail("mode %04o: nothing for others (never world-readable)", uint32(o.Mode))
	case o.Mode != 0 && o.Mode&0o400 == 0:
		return fail("mode %04o: the owner must be able to read", uint32(o.Mode))
	case o.UID != nil && *o.UID < 0:
		return fail("uid %d is negative", *o.UID)
	case o.GID != nil && *o.GID < 0:
		return fail("gid %d is negative", *o.GID)
	case o.Template != "" && o.Output != "":
		return fail("a template or an output format, not both")
	case o.Output != "" && o.Output != OutputEnv && o.Output != OutputPEMBundle:
		return fail("unknown output format %s (env, pem-bundle)", quoteName(string(o.Output)))
	}
	if o.Template != "" {
		if _, err := parseTemplate(name, o.Template); err != nil {
			// A parse error quotes the template, which is configuration.
			return fail("template: %v", err)
		}
	}
	return nil
}

// Check refuses an instance whose id or file options are unsafe or
// malformed; the error matches edgesecrets.ErrInvalid and names the file
// and the rule. ApplyProposal checks the same; an embedder checks its
// configuration with it when it reads it.
func (i Instance) Check() error {
	if err := checkInstanceID(i.ID); err != nil {
		return err
	}
	if i.GroupReadable && i.Group < 0 {
		return fmt.Errorf("%w: instance %s: group id %d is negative", edgesecrets.ErrInvalid, quoteName(i.ID), i.Group)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(i.Files)) {
		errs = append(errs, i.Files[name].check(i.ID, name))
	}
	return errors.Join(errs...)
}

// equal compares options by value.
func (o FileOptions) equal(p FileOptions) bool {
	sameID := func(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
	return sameID(o.UID, p.UID) && sameID(o.GID, p.GID) && o.Mode == p.Mode && o.Template == p.Template && o.Output == p.Output
}

// clone copies o, so the store keeps no pointer of the embedder's.
func (o FileOptions) clone() FileOptions {
	if o.UID != nil {
		uid := *o.UID
		o.UID = &uid
	}
	if o.GID != nil {
		gid := *o.GID
		o.GID = &gid
	}
	return o
}

// templated reports whether the file's content is rendered by o.
func (o FileOptions) templated() bool { return o.Template != "" || o.Output != "" }

// renderTemplated renders a secret's file from its template or ready
// output format. Errors are *templateError.
func renderTemplated(instance, name string, d agreement.SecretDetails, o FileOptions) ([]byte, error) {
	data := make(map[string]string, len(d.Data))
	for k, v := range d.Data {
		data[k] = string(v)
	}
	fail := func(where string) error { return &templateError{instance: instance, secret: name, where: where} }
	switch o.Output {
	case OutputEnv:
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(data)) {
			if !envName.MatchString(k) {
				return nil, fail("output env: a key is not an environment variable name")
			}
			q, err := envQuote(data[k])
			if err != nil {
				return nil, fail("output env: a value holds a NUL byte")
			}
			b.WriteString(k + "=" + q + "\n")
		}
		return []byte(b.String()), nil
	case OutputPEMBundle:
		var b bytes.Buffer
		for _, k := range slices.Sorted(maps.Keys(data)) {
			v := []byte(data[k])
			if !isPEM(v) {
				continue
			}
			b.Write(bytes.TrimSpace(v))
			b.WriteByte('\n')
		}
		if b.Len() == 0 {
			return nil, fail("output pem-bundle: no value is PEM")
		}
		return b.Bytes(), nil
	}
	t, err := parseTemplate(name, o.Template)
	if err != nil {
		return nil, fail("template does not parse")
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		clear(b.Bytes())
		return nil, fail(sanitizeTemplateError(err))
	}
	return b.Bytes(), nil
}
