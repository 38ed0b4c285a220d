package agreement

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
	"github.com/edgesecrets/edgesecrets/internal/redact"
	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/ohsecret"
)

// messageVersion is the version of the message schema this package writes
// and the only one Open accepts. In a message being sealed, a Version of 0
// means messageVersion.
const messageVersion = 1

// Secret formats: how the agent lays a secret out in its file.
const (
	// FormatJSON: the file holds the secret's key/value pairs as a JSON object.
	FormatJSON = "json"
	// FormatRaw: the file holds one value's bytes: those of the secret's
	// only key, or, for a secret written the Open Horizon way (a "value"
	// and a "key"), those of its "value".
	FormatRaw = "raw"
	// FormatValueOnly is Open Horizon's "value_only": the file holds the
	// bytes of the secret's "value" key only (an Open Horizon secret is
	// {"key": ..., "value": ...}); the secret must have a "value" key.
	FormatValueOnly = "value_only"
)

// valueKey is the key whose value FormatValueOnly writes.
const valueKey = ohsecret.ValueMember

// ContentKey says how a secret in format with the given data keys is
// rendered into its file: for FormatRaw and FormatValueOnly, single is true
// and key is the key whose value is the whole file content (see those
// formats); for FormatJSON (and ""), whose file holds every key, single is
// false. It is the one rule of which formats a secret's data can be
// rendered in: the agbot checks it before it proposes a secret, the agent
// follows it when it writes the file. The error names the format and the
// number of keys, never a value.
func ContentKey(format string, keys []string) (key string, single bool, err error) {
	switch format {
	case "", FormatJSON:
		return "", false, nil
	case FormatRaw:
		switch {
		case len(keys) == 1:
			return keys[0], true, nil
		case ohsecret.IsKeyValue(keys):
			return valueKey, true, nil
		}
		return "", false, fmt.Errorf("format %q needs exactly one key, or Open Horizon's %q and %q; has %d keys", FormatRaw, ohsecret.KeyMember, valueKey, len(keys))
	case FormatValueOnly:
		if slices.Contains(keys, valueKey) {
			return valueKey, true, nil
		}
		return "", false, fmt.Errorf("format %q needs a %q key, has %d other keys", FormatValueOnly, valueKey, len(keys))
	}
	return "", false, fmt.Errorf("unknown format %.32q", format)
}

// Limits of message fields, beyond the overall message size limit.
const (
	// maxReasonLength bounds Reply.Reason, in bytes.
	maxReasonLength = 4 << 10
	// maxRefFieldLength bounds each ServiceRef field.
	maxRefFieldLength = 1 << 10
	// maxKindLength bounds Update.Kind.
	maxKindLength = 64
)

// SecretDetails is the content of one service secret as delivered to an
// agent. Printing it (fmt, slog) shows key names only (Data redacts itself); its JSON form, which
// only travels inside a sealed envelope, carries the values base64-encoded:
//
//	{"format":"json","data":{"password":"czNjcjN0"}}
type SecretDetails struct {
	// Format is FormatJSON (the default when empty), FormatRaw or
	// FormatValueOnly.
	Format string
	// Data holds the values.
	Data edgesecrets.Data
}

// String returns the format and the data's key names, each value
// [edgesecrets.Redacted]. fmt calls it for %v, %s and %q, and for %s and %q
// of a pointer met inside another value, whose error path would otherwise
// print the values raw.
func (s SecretDetails) String() string {
	type plain SecretDetails // without this method
	return fmt.Sprintf("%+v", plain(s))
}

// secretDetailsJSON is the wire form of SecretDetails.
type secretDetailsJSON struct {
	Format string            `json:"format,omitempty"`
	Data   map[string]string `json:"data"`
}

// details decodes the values. Errors name the key, never the value.
func (w secretDetailsJSON) details() (SecretDetails, error) {
	switch w.Format {
	case "", FormatJSON, FormatRaw, FormatValueOnly:
	default:
		return SecretDetails{}, fmt.Errorf("secret details: unknown format %.32q", w.Format)
	}
	if w.Data == nil {
		return SecretDetails{}, errors.New(`secret details: missing "data"`)
	}
	data := make(edgesecrets.Data, len(w.Data))
	for k, v := range w.Data {
		// Strict still skips line breaks; canonical means none.
		raw, err := base64.StdEncoding.Strict().DecodeString(v)
		if err != nil || strings.ContainsAny(v, "\r\n") {
			return SecretDetails{}, fmt.Errorf("secret details: value of key %q is not base64", k)
		}
		data[k] = raw
	}
	return SecretDetails{Format: w.Format, Data: data}, nil
}

// MarshalJSON encodes the values explicitly (base64); see the type comment.
func (s SecretDetails) MarshalJSON() ([]byte, error) {
	return appendSecretDetails(make([]byte, 0, secretDetailsSize(s)), s), nil
}

// Validate checks the format and that the data can be rendered in it
// (ContentKey), and that no key name is empty. Errors name the format and
// keys, never values.
func (s SecretDetails) Validate() error {
	if _, _, err := ContentKey(s.Format, s.Data.Keys()); err != nil {
		return err
	}
	if _, ok := s.Data[""]; ok {
		return errors.New("data has an empty key")
	}
	return nil
}

// LogValue implements slog.LogValuer: format and key names, so that a JSON
// log handler does not reach MarshalJSON and its values.
func (s SecretDetails) LogValue() slog.Value {
	return slog.GroupValue(slog.String("format", s.Format), slog.Any("keys", s.Data.Keys()))
}

// ServiceRef identifies one service of an agreement and, for a
// multi-container service, one container.
type ServiceRef struct {
	Org       string `json:"org"`
	URL       string `json:"url"`
	Arch      string `json:"arch,omitempty"`
	Version   string `json:"version,omitempty"`
	Container string `json:"container,omitempty"`
}

// String returns "org/url", followed by "@version", "[arch]" and
// "#container" when set.
func (r ServiceRef) String() string {
	s := r.Org + "/" + r.URL
	if r.Version != "" {
		s += "@" + r.Version
	}
	if r.Arch != "" {
		s += "[" + r.Arch + "]"
	}
	if r.Container != "" {
		s += "#" + r.Container
	}
	return s
}

// Validate checks that Org and URL are set and that no field is over 1 KiB
// or holds control characters.
func (r ServiceRef) Validate() error {
	if r.Org == "" || r.URL == "" {
		return fmt.Errorf("service %q: org and url are required", r.String())
	}
	for _, f := range []struct{ name, val string }{
		{"org", r.Org}, {"url", r.URL}, {"arch", r.Arch}, {"version", r.Version}, {"container", r.Container},
	} {
		if len(f.val) > maxRefFieldLength || !printable(f.val) {
			return fmt.Errorf("service %s is over %d bytes or not printable UTF-8", f.name, maxRefFieldLength)
		}
	}
	return nil
}

// ServiceSecrets are the secrets of one service (container), keyed by the
// service secret name (the file name under /open-horizon-secrets).
type ServiceSecrets struct {
	Service ServiceRef               `json:"service"`
	Secrets map[string]SecretDetails `json:"secrets"`
}

// Format implements fmt.Formatter: the fields as %v prints them, values
// redacted, for every verb, and behind a pointer too (see
// SecretDetails.String).
func (ss ServiceSecrets) Format(f fmt.State, _ rune) {
	type plain ServiceSecrets // without this method
	redact.Format(f, plain(ss))
}

// secretNames returns the service secret names of ss, sorted.
func (ss ServiceSecrets) secretNames() []string {
	if len(ss.Secrets) == 0 {
		return nil
	}
	return sortedKeys(make([]string, 0, len(ss.Secrets)), ss.Secrets)
}

// validate checks the service reference, that each secret name is a single
// safe path element (it becomes a file name) and each secret's details.
func (ss ServiceSecrets) validate() error {
	if err := ss.Service.Validate(); err != nil {
		return err
	}
	for _, name := range ss.secretNames() {
		if err := CheckSecretName(name); err != nil {
			return fmt.Errorf("service %s: %w", ss.Service, err)
		}
		if err := ss.Secrets[name].Validate(); err != nil {
			return fmt.Errorf("service %s: secret %q: %w", ss.Service, name, err)
		}
	}
	return nil
}

// LogValue implements slog.LogValuer: the service and its secret names.
func (ss ServiceSecrets) LogValue() slog.Value {
	return slog.GroupValue(slog.String("service", ss.Service.String()), slog.Any("secrets", ss.secretNames()))
}

// CheckSecretName returns an error unless name can be a service secret
// name: a single safe path element of at most 255 bytes (no slash or
// backslash, no control character, not "." or ".."), because the agent
// uses it as a file name. The binding package applies the same rule.
func CheckSecretName(name string) error {
	if err := safename.Check(name); err != nil {
		return fmt.Errorf("secret name %.80q %w; it must be a single file name", name, err)
	}
	return nil
}

// serviceSecretsJSON is the wire form of ServiceSecrets. Messages are
// decoded through these wire types rather than through SecretDetails' JSON
// methods: without encoding/json re-scanning every Unmarshaler's input, and
// strict (no unknown field) at every depth in one pass. They are encoded by
// the append-style encoders in wire.go, to the same bytes.
type serviceSecretsJSON struct {
	Service ServiceRef                   `json:"service"`
	Secrets map[string]secretDetailsJSON `json:"secrets"`
}

func servicesFromWire(services []serviceSecretsJSON) ([]ServiceSecrets, error) {
	if services == nil {
		return nil, nil
	}
	out := make([]ServiceSecrets, len(services))
	for i, w := range services {
		out[i].Service = w.Service
		if w.Secrets != nil {
			out[i].Secrets = make(map[string]SecretDetails, len(w.Secrets))
		}
		for name, wd := range w.Secrets {
			d, err := wd.details()
			if err != nil {
				return nil, fmt.Errorf("service %s: secret %.80q: %w", w.Service, name, err)
			}
			out[i].Secrets[name] = d
		}
	}
	return out, nil
}

// validateServices checks each entry and that no service appears twice.
func validateServices(services []ServiceSecrets) error {
	seen := make(map[ServiceRef]bool, len(services))
	for _, ss := range services {
		if err := ss.validate(); err != nil {
			return err
		}
		if seen[ss.Service] {
			return fmt.Errorf("service %s appears twice", ss.Service)
		}
		seen[ss.Service] = true
	}
	return nil
}

func servicesLogValue(services []ServiceSecrets) slog.Attr {
	attrs := make([]slog.Attr, 0, len(services))
	for _, ss := range services {
		attrs = append(attrs, slog.Any(ss.Service.String(), ss.secretNames()))
	}
	return slog.Attr{Key: "services", Value: slog.GroupValue(attrs...)}
}

// Proposal is the agreement proposal's secret-bearing part: for each service
// (container) of the agreement, its secrets.
type Proposal struct {
	Version     int              `json:"version"`
	AgreementID string           `json:"agreementId"`
	Services    []ServiceSecrets `json:"services"`
}

// Format implements fmt.Formatter: the fields as %v prints them, values
// redacted, for every verb, and behind a pointer too (see
// SecretDetails.String).
func (p Proposal) Format(f fmt.State, _ rune) {
	type plain Proposal // without this method
	redact.Format(f, plain(p))
}

// Validate checks the version, the agreement id and every service entry
// (no service twice).
func (p Proposal) Validate() error {
	if err := checkMessageHead("proposal", p.Version, p.AgreementID); err != nil {
		return err
	}
	if err := validateServices(p.Services); err != nil {
		return fmt.Errorf("%w: proposal of agreement %q: %w", errInvalidMessage, p.AgreementID, err)
	}
	return nil
}

// LogValue implements slog.LogValuer: agreement id, services and secret
// names, never values.
func (p Proposal) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("version", p.Version), slog.String("agreement_id", p.AgreementID), servicesLogValue(p.Services))
}

func (p Proposal) validate() error   { return p.Validate() }
func (p Proposal) agreement() string { return p.AgreementID }
func (p Proposal) version() int      { return p.Version }

type proposalJSON struct {
	Version     int                  `json:"version"`
	AgreementID string               `json:"agreementId"`
	Services    []serviceSecretsJSON `json:"services"`
}

func (p Proposal) encode() ([]byte, error) {
	return encodeServicesMessage(true, p.Version, p.AgreementID, p.Services), nil
}

func (p *Proposal) decode(b []byte) error {
	var w proposalJSON
	if err := decodeStrict(b, &w); err != nil {
		return err
	}
	services, err := servicesFromWire(w.Services)
	if err != nil {
		return err
	}
	*p = Proposal{Version: w.Version, AgreementID: w.AgreementID, Services: services}
	return nil
}

// Update kinds.
const (
	// UpdateKindSecrets carries a SecretsUpdate: only the changed secrets.
	UpdateKindSecrets = "secrets"
	// UpdateKindCancel ends the agreement; its payload is {}. The agent
	// removes the agreement's instances (their files are overwritten, then
	// deleted) and their API tokens stop working. Being an update, it is
	// sealed and signed like any other and takes a sequence from the same
	// series as the agreement's proposal and updates, so a relay can neither
	// forge it nor replay an older message after it.
	UpdateKindCancel = "cancel"
)

// Update is an agreement update: a generic kind and its payload, so the
// protocol extension can carry other kinds later. Agents reject kinds they
// do not know with a Reply naming the kind.
//
// Printing an Update (fmt, slog) shows its kind and payload size, never the
// payload.
type Update struct {
	Version     int    `json:"version"`
	AgreementID string `json:"agreementId"`
	// Kind is 1 to 64 of [a-z0-9._-].
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// Format prints the agreement, kind and payload size only.
func (u Update) Format(f fmt.State, verb rune) {
	// fmt.State buffers in memory; Format has no error to return.
	_, _ = fmt.Fprintf(f, "{Version:%d AgreementID:%s Kind:%s Payload:[%d bytes]}", u.Version, u.AgreementID, u.Kind, len(u.Payload))
}

// LogValue implements slog.LogValuer: agreement, kind and payload size.
func (u Update) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("version", u.Version), slog.String("agreement_id", u.AgreementID),
		slog.String("kind", u.Kind), slog.Int("payload_bytes", len(u.Payload)))
}

// validate checks the version, agreement id, kind and that the payload is
// JSON; for kind UpdateKindSecrets it also decodes and validates the
// payload. Unknown kinds are valid: the agent answers them with a rejecting
// Reply.
func (u Update) validate() error {
	if err := checkMessageHead("update", u.Version, u.AgreementID); err != nil {
		return err
	}
	if !validToken(u.Kind, maxKindLength) {
		return fmt.Errorf("%w: update of agreement %q: kind %.80q is not 1 to %d of [a-z0-9._-]", errInvalidMessage, u.AgreementID, u.Kind, maxKindLength)
	}
	if len(u.Payload) == 0 || !json.Valid(u.Payload) {
		return fmt.Errorf("%w: update of agreement %q: payload is missing or not JSON", errInvalidMessage, u.AgreementID)
	}
	if u.Kind == UpdateKindSecrets {
		if _, err := u.Secrets(); err != nil {
			return err
		}
	}
	return nil
}

func (u Update) agreement() string       { return u.AgreementID }
func (u Update) version() int            { return u.Version }
func (u Update) encode() ([]byte, error) { return json.Marshal(u) }
func (u *Update) decode(b []byte) error  { return decodeStrict(b, u) }

// SecretsUpdate is the payload of an update of kind UpdateKindSecrets.
type SecretsUpdate struct {
	Services []ServiceSecrets `json:"services"`
}

// Format implements fmt.Formatter: the fields as %v prints them, values
// redacted, for every verb, and behind a pointer too (see
// SecretDetails.String).
func (su SecretsUpdate) Format(f fmt.State, _ rune) {
	type plain SecretsUpdate // without this method
	redact.Format(f, plain(su))
}

// validate checks that there is at least one service, each with at least
// one secret, valid and not repeated.
func (su SecretsUpdate) validate() error {
	if len(su.Services) == 0 {
		return errors.New("no services")
	}
	for _, ss := range su.Services {
		if len(ss.Secrets) == 0 {
			return fmt.Errorf("service %s: no secrets", ss.Service)
		}
	}
	return validateServices(su.Services)
}

type secretsUpdateJSON struct {
	Services []serviceSecretsJSON `json:"services"`
}

// LogValue implements slog.LogValuer: services and secret names.
func (su SecretsUpdate) LogValue() slog.Value { return slog.GroupValue(servicesLogValue(su.Services)) }

// NewSecretsUpdate returns an Update of kind UpdateKindSecrets carrying su.
func NewSecretsUpdate(agreementID string, su SecretsUpdate) (Update, error) {
	if err := su.validate(); err != nil {
		return Update{}, fmt.Errorf("%w: secrets update of agreement %q: %w", errInvalidMessage, agreementID, err)
	}
	payload := encodeServicesMessage(false, 0, "", su.Services)
	return Update{Version: messageVersion, AgreementID: agreementID, Kind: UpdateKindSecrets, Payload: payload}, nil
}

// Secrets decodes and validates the payload of an update of kind
// UpdateKindSecrets.
func (u Update) Secrets() (SecretsUpdate, error) {
	if u.Kind != UpdateKindSecrets {
		return SecretsUpdate{}, fmt.Errorf("%w: agreement %q: update kind is %.80q, not %q", errUnexpectedType, u.AgreementID, u.Kind, UpdateKindSecrets)
	}
	var w secretsUpdateJSON
	err := decodeStrict(u.Payload, &w)
	var su SecretsUpdate
	if err == nil {
		su.Services, err = servicesFromWire(w.Services)
	}
	if err != nil {
		return SecretsUpdate{}, fmt.Errorf("%w: agreement %q: secrets update: %w", errMalformed, u.AgreementID, err)
	}
	if err := su.validate(); err != nil {
		return SecretsUpdate{}, fmt.Errorf("%w: agreement %q: secrets update: %w", errInvalidMessage, u.AgreementID, err)
	}
	return su, nil
}

// MessageRef names an envelope within an agreement: its message type and
// sequence (from its Header).
type MessageRef struct {
	Type     MessageType `json:"type"`
	Sequence uint64      `json:"sequence"`
}

// Reply is an agent's answer to a proposal or update.
type Reply struct {
	Version     int    `json:"version"`
	AgreementID string `json:"agreementId"`
	// InReplyTo names the message answered, so the agbot can tell an answer
	// to a superseded update from one to the current update. NewReply sets
	// it; it is optional on the wire.
	InReplyTo MessageRef `json:"inReplyTo,omitzero"`
	// Accepted is true when the agent applied the message.
	Accepted bool `json:"accepted"`
	// Reason says why the agent rejected the message; required when
	// rejecting, at most 4 KiB. It travels to the agbot's
	// logs: never put secret values in it.
	Reason string `json:"reason,omitempty"`
	// Unknown, with a rejection, says the agent holds nothing of the
	// agreement: it lost its files and replay state but kept its keys (a
	// wiped node, a restored disk). The agbot proposes the agreement
	// again rather than repeating the update. Optional on the wire.
	Unknown bool `json:"unknown,omitempty"`
}

// RejectedTemplateFailed starts a Reply's Reason, followed by a colon, when
// the agent could not render a secret file of the message with the
// instance's template or ready output format: a code both sides read,
// which the agbot's engine reports as its own reason code.
const RejectedTemplateFailed = "TemplateFailed"

// NewReply returns the reply to the message whose (authentic) header is
// answered. A reason over 4 KiB is cut at a character boundary.
func NewReply(answered Header, accepted bool, reason string) Reply {
	if len(reason) > maxReasonLength {
		reason = strings.ToValidUTF8(reason[:maxReasonLength], "")
	}
	return Reply{
		Version:     messageVersion,
		AgreementID: answered.AgreementID,
		InReplyTo:   MessageRef{Type: answered.Type, Sequence: answered.Sequence},
		Accepted:    accepted,
		Reason:      reason,
	}
}

// validate checks the version, agreement id, the reference to the answered
// message when set, and that a rejection says why.
func (r Reply) validate() error {
	if err := checkMessageHead("reply", r.Version, r.AgreementID); err != nil {
		return err
	}
	if r.InReplyTo != (MessageRef{}) && (!validToken(string(r.InReplyTo.Type), maxTypeLength) || r.InReplyTo.Sequence == 0) {
		return fmt.Errorf("%w: reply of agreement %q: inReplyTo needs a message type and a sequence above 0", errInvalidMessage, r.AgreementID)
	}
	if r.Accepted && r.Unknown {
		return fmt.Errorf("%w: reply of agreement %q: an accepted message cannot be of an unknown agreement", errInvalidMessage, r.AgreementID)
	}
	if !r.Accepted && r.Reason == "" {
		return fmt.Errorf("%w: reply of agreement %q: a rejection needs a reason", errInvalidMessage, r.AgreementID)
	}
	if len(r.Reason) > maxReasonLength || !utf8.ValidString(r.Reason) {
		return fmt.Errorf("%w: reply of agreement %q: reason is over %d bytes or not UTF-8", errInvalidMessage, r.AgreementID, maxReasonLength)
	}
	return nil
}

func (r Reply) agreement() string       { return r.AgreementID }
func (r Reply) version() int            { return r.Version }
func (r Reply) encode() ([]byte, error) { return json.Marshal(r) }
func (r *Reply) decode(b []byte) error  { return decodeStrict(b, r) }

// message is what the typed seal helpers handle; decodable messages are
// what the decoders fill.
type message interface {
	validate() error
	agreement() string
	version() int
	encode() ([]byte, error)
}

type decodable interface {
	message
	decode([]byte) error
}

// versionField reads the version field of any message.
type versionField struct {
	Version *int `json:"version"`
}

// decodeMessage decodes a message strictly into m and validates it: the
// wire version must be exactly messageVersion.
func decodeMessage(what string, b []byte, limit int, m decodable) error {
	if len(b) > limit {
		return fmt.Errorf("%s: %w: %d bytes, limit %d", what, errTooLarge, len(b), limit)
	}
	if err := m.decode(b); err != nil {
		// A message of another version may well have other fields: say so
		// rather than which field is unknown.
		var v versionField
		if json.Unmarshal(b, &v) == nil && v.Version != nil && *v.Version != messageVersion {
			return fmt.Errorf("%s: %w: version %d, want %d", what, errUnsupportedVersion, *v.Version, messageVersion)
		}
		return fmt.Errorf("%s: %w: %w", what, errMalformed, err)
	}
	if m.version() != messageVersion {
		return fmt.Errorf("%s: %w: version %d, want %d", what, errUnsupportedVersion, m.version(), messageVersion)
	}
	return m.validate()
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields and
// trailing data. Its errors never quote the input.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(jsonproblem.Describe(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// checkMessageHead checks what every message has: a known version (0 means
// messageVersion) and an agreement id.
func checkMessageHead(what string, version int, agreementID string) error {
	if version != 0 && version != messageVersion {
		return fmt.Errorf("%w: %s version %d, want %d", errUnsupportedVersion, what, version, messageVersion)
	}
	if err := checkAgreementID(agreementID); err != nil {
		return fmt.Errorf("%w: %s: %w", errInvalidMessage, what, err)
	}
	return nil
}

// checkAgreementID requires 1 to 256 bytes of printable UTF-8 without
// spaces.
func checkAgreementID(id string) error {
	if id == "" {
		return errors.New("agreement id is missing")
	}
	if len(id) > maxAgreementIDLength || !printable(id) || strings.ContainsFunc(id, unicode.IsSpace) {
		return fmt.Errorf("agreement id is over %d bytes, not printable UTF-8 or holds spaces", maxAgreementIDLength)
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// validToken reports whether s is 1 to max of [a-z0-9._-].
func validToken(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// SealSecretsUpdate seals an update of kind UpdateKindSecrets carrying su
// to recipient: NewSecretsUpdate and Seal in one step, for the agbot's
// rotation path. The values are encoded once, into the one buffer that is
// sealed and then cleared, so no copy of them (the payload of an Update,
// an encoder's buffer) is left to the garbage collector. The envelope
// opens as the Update NewSecretsUpdate would have made.
func SealSecretsUpdate(sender *PrivateKeys, recipient *PublicKeys, agreementID string, su SecretsUpdate, h Header, opts Options) ([]byte, error) {
	return sealMessage(sender, recipient, TypeUpdate, secretsUpdateMessage{agreementID: agreementID, su: su}, h, opts)
}

// secretsUpdateMessage is the message SealSecretsUpdate seals: an Update
// of kind UpdateKindSecrets whose payload is encoded with the rest.
type secretsUpdateMessage struct {
	agreementID string
	su          SecretsUpdate
}

func (m secretsUpdateMessage) validate() error {
	if err := checkMessageHead("update", messageVersion, m.agreementID); err != nil {
		return err
	}
	if err := m.su.validate(); err != nil {
		return fmt.Errorf("%w: secrets update of agreement %q: %w", errInvalidMessage, m.agreementID, err)
	}
	return nil
}

func (m secretsUpdateMessage) agreement() string { return m.agreementID }
func (m secretsUpdateMessage) version() int      { return messageVersion }

// encode writes what json.Marshal writes for the Update NewSecretsUpdate
// makes, into one buffer sized up front.
func (m secretsUpdateMessage) encode() ([]byte, error) {
	b := make([]byte, 0, m.size())
	b = append(b, '{')
	b = appendField(b, "version", true)
	b = strconv.AppendInt(b, messageVersion, 10)
	b = appendField(b, "agreementId", false)
	b = appendJSONString(b, m.agreementID)
	b = appendField(b, "kind", false)
	b = appendJSONString(b, UpdateKindSecrets)
	b = appendField(b, "payload", false)
	b = append(b, '{')
	b = appendField(b, "services", true)
	b = appendServices(b, m.su.Services)
	return append(b, '}', '}'), nil
}

// size bounds the length of encode's output.
func (m secretsUpdateMessage) size() int {
	return len(`{"version":,"agreementId":,"kind":,"payload":}`) + 20 + jsonStringSize(m.agreementID) + jsonStringSize(UpdateKindSecrets) +
		servicesMessageSize("", m.su.Services)
}
