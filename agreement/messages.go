package agreement

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// MessageVersion is the version of the message schema this package writes.
const MessageVersion = 1

// Secret formats: how the agent lays a secret out in its file.
const (
	// FormatJSON: the file holds the secret's key/value pairs as a JSON object.
	FormatJSON = "json"
	// FormatRaw: the secret has exactly one key; the file holds its value's bytes.
	FormatRaw = "raw"
)

// SecretDetails is the content of one service secret as delivered to an
// agent. Printing it (fmt, slog) shows key names only (Data redacts itself); its JSON form, which
// only travels inside a sealed envelope, carries the values base64-encoded:
//
//	{"format":"json","data":{"password":"czNjcjN0"}}
type SecretDetails struct {
	// Format is FormatJSON (the default when empty) or FormatRaw.
	Format string
	// Data holds the values.
	Data secretstore.Data
}

type secretDetailsJSON struct {
	Format string            `json:"format,omitempty"`
	Data   map[string]string `json:"data"`
}

// MarshalJSON encodes the values explicitly (base64); see the type comment.
func (s SecretDetails) MarshalJSON() ([]byte, error) {
	out := secretDetailsJSON{Format: s.Format, Data: make(map[string]string, len(s.Data))}
	for k, v := range s.Data {
		out.Data[k] = base64.StdEncoding.EncodeToString(v)
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes the form MarshalJSON writes. Errors name the key,
// never the value.
func (s *SecretDetails) UnmarshalJSON(b []byte) error {
	var in secretDetailsJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("secret details: %w", jsonError(err))
	}
	switch in.Format {
	case "", FormatJSON, FormatRaw:
	default:
		return fmt.Errorf("secret details: unknown format %q", in.Format)
	}
	data := make(secretstore.Data, len(in.Data))
	for k, v := range in.Data {
		raw, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return fmt.Errorf("secret details: value of key %q is not base64", k)
		}
		data[k] = raw
	}
	*s = SecretDetails{Format: in.Format, Data: data}
	return nil
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

// ServiceSecrets are the secrets of one service (container), keyed by the
// service secret name (the file name under /open-horizon-secrets).
type ServiceSecrets struct {
	Service ServiceRef               `json:"service"`
	Secrets map[string]SecretDetails `json:"secrets"`
}

// Proposal is the agreement proposal's secret-bearing part: for each service
// (container) of the agreement, its secrets.
type Proposal struct {
	Version     int              `json:"version"`
	AgreementID string           `json:"agreementId"`
	Services    []ServiceSecrets `json:"services"`
}

// Update kinds.
const (
	// UpdateKindSecrets carries a SecretsUpdate: only the changed secrets.
	UpdateKindSecrets = "secrets"
)

// Update is an agreement update: a generic kind and its payload, so the
// protocol extension can carry other kinds later. Agents reject kinds they
// do not know with a Reply naming the kind.
//
// Printing an Update shows its kind and payload size, never the payload.
type Update struct {
	Version     int             `json:"version"`
	AgreementID string          `json:"agreementId"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
}

// Format prints the agreement, kind and payload size only.
func (u Update) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "{Version:%d AgreementID:%s Kind:%s Payload:[%d bytes]}", u.Version, u.AgreementID, u.Kind, len(u.Payload))
}

// SecretsUpdate is the payload of an update of kind UpdateKindSecrets.
type SecretsUpdate struct {
	Services []ServiceSecrets `json:"services"`
}

// NewSecretsUpdate returns an Update of kind UpdateKindSecrets carrying su.
func NewSecretsUpdate(agreementID string, su SecretsUpdate) (Update, error) {
	payload, err := json.Marshal(su)
	if err != nil {
		return Update{}, fmt.Errorf("agreement %s: encoding secrets update: %w", agreementID, err)
	}
	return Update{Version: MessageVersion, AgreementID: agreementID, Kind: UpdateKindSecrets, Payload: payload}, nil
}

// Secrets decodes the payload of an update of kind UpdateKindSecrets.
func (u Update) Secrets() (SecretsUpdate, error) {
	if u.Kind != UpdateKindSecrets {
		return SecretsUpdate{}, fmt.Errorf("agreement %s: update kind is %q, not %q", u.AgreementID, u.Kind, UpdateKindSecrets)
	}
	var su SecretsUpdate
	if err := json.Unmarshal(u.Payload, &su); err != nil {
		return SecretsUpdate{}, fmt.Errorf("agreement %s: decoding secrets update: %w", u.AgreementID, jsonError(err))
	}
	return su, nil
}

// Reply is an agent's answer to a proposal or update.
type Reply struct {
	Version     int    `json:"version"`
	AgreementID string `json:"agreementId"`
	// Accepted is true when the agent applied the message.
	Accepted bool `json:"accepted"`
	// Reason says why the agent rejected the message; empty when accepted.
	Reason string `json:"reason,omitempty"`
}

// SecretNames returns the service secret names of ss, sorted.
func (ss ServiceSecrets) SecretNames() []string { return slices.Sorted(maps.Keys(ss.Secrets)) }

// jsonError strips anything quoting the input from a JSON decoding error.
func jsonError(err error) error {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Errorf("JSON syntax error at byte %d", e.Offset)
	case *json.UnmarshalTypeError:
		return fmt.Errorf("field %q: expected %s, got JSON %s", e.Field, e.Type, e.Value)
	}
	if err == io.ErrUnexpectedEOF {
		return fmt.Errorf("unexpected end of JSON")
	}
	return err
}
