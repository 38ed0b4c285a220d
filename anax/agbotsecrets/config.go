package agbotsecrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// maxConfigFileSize bounds the plugin's config file, as
// secretstore.ParseConfig bounds a store config.
const maxConfigFileSize = 1 << 20

// fileConfig is the plugin's config file (see the package documentation).
type fileConfig struct {
	Store         secretstore.Config
	ChangeFile    string
	UserAuthMount string
}

// errConfig marks every problem of the plugin's config.
var errConfig = errors.New("agbotsecrets: config")

// readConfigFile reads and decodes the plugin's config file.
func readConfigFile(path string) (fileConfig, error) {
	if path == "" {
		return fileConfig{}, fmt.Errorf("%w: AgreementBot.SecretsProviderConfig is not set: it names the plugin's JSON config file, {\"store\": {...}, \"changeFile\": \"...\"}", errConfig)
	}
	data, err := readBounded(path, maxConfigFileSize)
	if err != nil {
		return fileConfig{}, fmt.Errorf("%w: reading AgreementBot.SecretsProviderConfig %s: %w", errConfig, path, err)
	}
	cfg, err := decodeConfig(data)
	if err != nil {
		return fileConfig{}, fmt.Errorf("%w (file %s)", err, path)
	}
	return cfg, nil
}

// decodeConfig decodes the plugin's config: a JSON object with "store"
// (required), "changeFile" and "userAuthMount". Errors match errConfig and
// never quote the input, which may hold a credential.
func decodeConfig(data []byte) (fileConfig, error) {
	bad := func(format string, args ...any) (fileConfig, error) {
		return fileConfig{}, fmt.Errorf("%w: "+format, append([]any{errConfig}, args...)...)
	}
	if len(data) > maxConfigFileSize {
		return bad("larger than %d bytes", maxConfigFileSize)
	}
	var raw struct {
		Store         json.RawMessage `json:"store"`
		ChangeFile    *string         `json:"changeFile"`
		UserAuthMount *string         `json:"userAuthMount"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return bad("not a JSON object with \"store\", \"changeFile\" and \"userAuthMount\": %s", describeJSONError(err))
	}
	if dec.More() {
		return bad("data after the JSON object")
	}
	if len(raw.Store) == 0 || string(raw.Store) == "null" {
		return bad("\"store\" is missing: give a secretstore config, {\"type\": \"vault\", \"vault\": {...}}")
	}
	// Validated by storeConfig, once the agbot's credentials are in.
	var store secretstore.Config
	if err := json.Unmarshal(raw.Store, &store); err != nil {
		return bad("\"store\": %s", describeJSONError(err))
	}
	cfg := fileConfig{Store: store}
	if raw.ChangeFile != nil {
		if *raw.ChangeFile == "" {
			return bad("\"changeFile\" is empty: leave it out to keep the change clock in memory")
		}
		cfg.ChangeFile = *raw.ChangeFile
	}
	if raw.UserAuthMount != nil {
		cfg.UserAuthMount = *raw.UserAuthMount
	}
	return cfg, nil
}

// describeJSONError describes a decoding error without quoting the input.
func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("member %q must be %s, not %s", te.Field, te.Type, te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends early"
	}
	// DisallowUnknownFields: `json: unknown field "x"` names a member,
	// never a value.
	return err.Error()
}

// storeConfig returns the store config of the plugin's file, with the
// agbot's credentials filled in (withAgbotCredentials), validated as
// secretstore.ParseConfig validates.
func storeConfig(cfg secretstore.Config, id string, token edgesecrets.Sensitive) (secretstore.Config, error) {
	out, err := withAgbotCredentials(cfg, id, token)
	if err != nil {
		return cfg, err
	}
	if err := out.Validate(); err != nil {
		return cfg, fmt.Errorf("%w: \"store\": %w", errConfig, err)
	}
	return out, nil
}

// withAgbotCredentials returns cfg with the agbot's exchange credentials
// filled in when its backend is Vault with auth method "openhorizon" and
// no exchangeID: the agbot logs in to Vault as itself, as anax's Vault
// plugin does.
func withAgbotCredentials(cfg secretstore.Config, id string, token edgesecrets.Sensitive) (secretstore.Config, error) {
	raw, ok := cfg.Sections["vault"]
	if cfg.Type != "vault" || !ok || id == "" {
		return cfg, nil
	}
	var section map[string]json.RawMessage
	if err := json.Unmarshal(raw, &section); err != nil {
		return cfg, fmt.Errorf("%w: \"store\".vault: %s", errConfig, describeJSONError(err))
	}
	var auth map[string]json.RawMessage
	if a, ok := section["auth"]; ok {
		if err := json.Unmarshal(a, &auth); err != nil {
			return cfg, fmt.Errorf("%w: \"store\".vault.auth: %s", errConfig, describeJSONError(err))
		}
	}
	var method string
	if m, ok := auth["method"]; ok {
		_ = json.Unmarshal(m, &method) // a non-string is Validate's to report
	}
	if method != "openhorizon" {
		return cfg, nil
	}
	if _, given := auth["exchangeID"]; given {
		return cfg, nil
	}
	auth["exchangeID"], _ = json.Marshal(id) // strings always encode
	_, t1 := auth["exchangeToken"]
	_, t2 := auth["exchangeTokenFile"]
	_, t3 := auth["exchangeTokenEnv"]
	if !t1 && !t2 && !t3 {
		auth["exchangeToken"], _ = json.Marshal(string(token))
	}
	section["auth"], _ = json.Marshal(auth)
	out := cfg
	out.Sections = make(map[string]json.RawMessage, len(cfg.Sections))
	for k, v := range cfg.Sections {
		out.Sections[k] = v
	}
	out.Sections["vault"], _ = json.Marshal(section)
	return out, nil
}
