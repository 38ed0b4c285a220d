package vault_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

func parse(t *testing.T, js string) (secretstore.Config, error) {
	t.Helper()
	return secretstore.ParseConfig(strings.NewReader(js))
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	_, err := parse(t, `{"type":"vault","vault":{
		"address":"ftp://x","mount":"a/../b","kvVersion":"3","parentPath":"//",
		"caBundle":"not pem","caFile":"/x.pem","timeout":"-1s","maxAttempts":99,
		"rateLimit":-1,"rateBurst":-2,
		"auth":{"method":"approle","secretID":"s3cr3t-id","secretIDFile":"/f","tokenFile":"/t","jwtEnv":"J"}}}`)
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	var ce *secretstore.ConfigError
	require.ErrorAs(t, err, &ce)
	want := []string{
		"vault.address must be an http:// or https:// URL",
		"vault.mount:",
		`vault.kvVersion must be "1", "2" or "auto"`,
		"vault.parentPath:",
		"vault.caBundle and caFile are exclusive",
		"vault.caBundle holds no PEM certificate",
		"vault.timeout must not be negative",
		"vault.maxAttempts must be between 1 and 20 (0 means the default)",
		"vault.rateLimit must not be negative",
		"vault.rateBurst must not be negative",
		"vault.auth.roleID is required for method approle",
		"vault.auth.method approle needs exactly one of secretID, secretIDFile, secretIDEnv",
		"vault.auth.tokenFile is not used by method approle",
		"vault.auth.jwtEnv is not used by method approle",
	}
	msg := err.Error()
	for _, w := range want {
		assert.Contains(t, msg, w)
	}
	assert.Len(t, ce.Problems, len(want), "one problem per mistake:\n%s", msg)
	assert.NotContains(t, msg, "s3cr3t-id", "a secret ID never appears in an error")
}

// The openhorizon method's problems are all reported, and its token is
// never repeated.
func TestConfigOpenHorizonProblems(t *testing.T) {
	_, err := parse(t, `{"type":"vault","vault":{"address":"http://h",
		"auth":{"method":"openhorizon","exchangeID":"agbot1","exchangeToken":"exch-t0ken","exchangeTokenEnv":"T","secretIDFile":"/f","mount":"a/../b"}}}`)
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	var ce *secretstore.ConfigError
	require.ErrorAs(t, err, &ce)
	want := []string{
		`vault.auth.exchangeID: "agbot1" is not of the form "org/id"`,
		"vault.auth.method openhorizon needs exactly one of exchangeToken, exchangeTokenFile, exchangeTokenEnv",
		"vault.auth.secretIDFile is not used by method openhorizon (it belongs to approle)",
		"vault.auth.mount:",
	}
	require.Len(t, ce.Problems, len(want), "one problem per mistake:\n%s", err)
	for i, w := range want {
		assert.Contains(t, ce.Problems[i], w)
	}
	assert.NotContains(t, err.Error(), "exch-t0ken", "the exchange token never appears in an error")
}

// Several mistakes in several sections of one config (the top level, the
// vault section, its auth section), unknown fields among them: every one
// is reported, each naming where it is. An unknown field hides nothing.
func TestConfigReportsEveryProblemInEverySection(t *testing.T) {
	_, err := parse(t, `{"type":"vault","defaultScope":"../up","defualtScope":"org1","vaultt":{},
		"vault":{"adress":"https://v:8200","kvVersion":"3","timeout":"soon","maxAttempts":99,"rateLimit":"fast",
			"auth":{"method":"token","tokn":"t0k3n-value","roleID":"r","mount":"/"}}}`)
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	var ce *secretstore.ConfigError
	require.ErrorAs(t, err, &ce)
	want := []string{
		`defaultScope: scope "../up": name has a ".." path segment`,
		`unknown field "defualtScope" (did you mean "defaultScope"?)`,
		`unknown field "vaultt" (did you mean "vault"?)`,
		`vault: unknown field "adress" (did you mean "address"?)`,
		`vault.timeout must be a duration string such as "30s"`,
		`vault: field "rateLimit": expected float64, got JSON string`,
		`vault.auth: unknown field "tokn" (did you mean "token"?)`,
		"vault.address is required",
		`vault.kvVersion must be "1", "2" or "auto"`,
		"vault.maxAttempts must be between 1 and 20 (0 means the default)",
		"vault.auth.method token needs exactly one of token, tokenFile, tokenEnv",
		"vault.auth.mount is not used by method token",
		"vault.auth.roleID is not used by method token (it belongs to approle)",
		"vault.auth.mount: path is empty",
		`vault.scope "../up": name has a ".." path segment`,
	}
	assert.ElementsMatch(t, want, ce.Problems, "every problem, once:\n%s", err)
	assert.NotContains(t, err.Error(), "t0k3n-value", "no value of a field is repeated")
}

func TestConfigValidateTable(t *testing.T) {
	ok := `"address":"https://vault.example:8200","auth":{"method":"token","tokenEnv":"VAULT_TOKEN"}`
	for _, tc := range []struct {
		name, section string
		problem       string // "" = valid
	}{
		{"minimal token", ok, ""},
		{"token file", `"address":"http://127.0.0.1:8200","auth":{"method":"token","tokenFile":"/run/token"}`, ""},
		{"approle", `"address":"http://h","auth":{"method":"approle","roleID":"r","secretIDFile":"/f","wrappedSecretID":true,"mount":"ar"}`, ""},
		{"kubernetes", `"address":"http://h","auth":{"method":"kubernetes","role":"agbot"}`, ""},
		{"jwt", `"address":"http://h","auth":{"method":"jwt","jwtFile":"/jwt"}`, ""},
		{"all options", `"address":"https://h","mount":"/kv/","kvVersion":"2","parentPath":"edge/secrets","namespace":"team/a","tlsServerName":"vault.internal","timeout":"5s","maxAttempts":1,"rateLimit":2.5,"rateBurst":3,"auth":{"method":"token","tokenEnv":"T"}`, ""},
		{"address missing", `"auth":{"method":"token","tokenEnv":"T"}`, "vault.address is required"},
		{"auth missing", `"address":"http://h"`, "vault.auth.method is required"},
		{"unknown method", `"address":"http://h","auth":{"method":"ldap"}`, `vault.auth.method "ldap" is not one of`},
		{"two token sources", `"address":"http://h","auth":{"method":"token","token":"x","tokenEnv":"T"}`, "needs exactly one of token, tokenFile, tokenEnv"},
		{"kubernetes without role", `"address":"http://h","auth":{"method":"kubernetes"}`, "vault.auth.role is required for method kubernetes"},
		{"role on approle", `"address":"http://h","auth":{"method":"approle","roleID":"r","secretIDEnv":"S","role":"x"}`, "vault.auth.role is not used by method approle"},
		{"jwt without source", `"address":"http://h","auth":{"method":"jwt","role":"r"}`, "needs exactly one of jwtFile, jwtEnv"},
		{"mount on token", `"address":"http://h","auth":{"method":"token","tokenEnv":"T","mount":"x"}`, "vault.auth.mount is not used by method token"},
		{"tls on http", `"address":"http://h","tlsServerName":"x",` + `"auth":{"method":"token","tokenEnv":"T"}`, "need an https:// address"},
		{"burst without rate", `"address":"http://h","rateBurst":2,"auth":{"method":"token","tokenEnv":"T"}`, "vault.rateBurst needs rateLimit"},
		{"namespace escapes", `"address":"http://h","namespace":"a/../b","auth":{"method":"token","tokenEnv":"T"}`, "vault.namespace:"},
		{"bad timeout", `"address":"http://h","timeout":"soon","auth":{"method":"token","tokenEnv":"T"}`, `timeout must be a duration string such as "30s"`},
		{"unknown field", `"address":"http://h","adress":"x","auth":{"method":"token","tokenEnv":"T"}`, `unknown field "adress"`},
		{"openhorizon", `"address":"http://h","auth":{"method":"openhorizon","exchangeID":"myorg/agbot1","exchangeTokenFile":"/run/agbot-token"}`, ""},
		{"openhorizon token env, own mount", `"address":"http://h","auth":{"method":"openhorizon","mount":"oh","exchangeID":"myorg/agbot1","exchangeTokenEnv":"T"}`, ""},
		{"openhorizon without id", `"address":"http://h","auth":{"method":"openhorizon","exchangeToken":"x"}`, `vault.auth.exchangeID: required for method openhorizon`},
		{"openhorizon id without org", `"address":"http://h","auth":{"method":"openhorizon","exchangeID":"agbot1","exchangeTokenEnv":"T"}`, `vault.auth.exchangeID: "agbot1" is not of the form "org/id"`},
		{"openhorizon id with two slashes", `"address":"http://h","auth":{"method":"openhorizon","exchangeID":"a/b/c","exchangeTokenEnv":"T"}`, `"a/b/c" is not of the form "org/id"`},
		{"openhorizon id with empty org", `"address":"http://h","auth":{"method":"openhorizon","exchangeID":"/agbot1","exchangeTokenEnv":"T"}`, `"/agbot1" is not of the form "org/id"`},
		{"openhorizon without token", `"address":"http://h","auth":{"method":"openhorizon","exchangeID":"o/a"}`, "vault.auth.method openhorizon needs exactly one of exchangeToken, exchangeTokenFile, exchangeTokenEnv"},
		{"openhorizon two tokens", `"address":"http://h","auth":{"method":"openhorizon","exchangeID":"o/a","exchangeToken":"x","exchangeTokenFile":"/f"}`, "needs exactly one of exchangeToken, exchangeTokenFile, exchangeTokenEnv"},
		{"openhorizon with a token field", `"address":"http://h","auth":{"method":"openhorizon","exchangeID":"o/a","exchangeTokenEnv":"T","tokenFile":"/t"}`, "vault.auth.tokenFile is not used by method openhorizon (it belongs to token)"},
		{"exchange field on approle", `"address":"http://h","auth":{"method":"approle","roleID":"r","secretIDEnv":"S","exchangeID":"o/a"}`, "vault.auth.exchangeID is not used by method approle (it belongs to openhorizon)"},
		{"role on openhorizon", `"address":"http://h","auth":{"method":"openhorizon","exchangeID":"o/a","exchangeTokenEnv":"T","role":"r"}`, "vault.auth.role is not used by method openhorizon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, `{"type":"vault","defaultScope":"org1","vault":{`+tc.section+`}}`)
			if tc.problem == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), tc.problem)
		})
	}
}

func TestSensitiveNeverPrints(t *testing.T) {
	const token = "hvs.CAESIsuper-secret-token"
	a := vault.Auth{Method: "token", Token: edgesecrets.Sensitive(token)}
	cfg := vault.Config{Address: "http://h", Auth: a}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", cfg, "token", a.Token)
	js, err := json.Marshal(cfg)
	require.NoError(t, err)
	for _, out := range []string{
		fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v %s %q %x", cfg, cfg, cfg, a.Token, a.Token, a.Token),
		fmt.Sprintf("%#v", a), string(js), logged.String(),
	} {
		assert.NotContains(t, out, token)
		assert.NotContains(t, out, "super-secret")
	}
	assert.Contains(t, string(js), edgesecrets.Redacted)
	assert.Equal(t, "", edgesecrets.Sensitive("").String(), "an empty value prints empty, so 'not set' stays visible")
}

func TestOpenReportsMissingCredentialWithoutVault(t *testing.T) {
	cfg, err := parse(t, `{"type":"vault","vault":{"address":"http://127.0.0.1:1","auth":{"method":"approle","roleID":"r","secretIDFile":"/nonexistent/secret-id"}}}`)
	require.NoError(t, err)
	_, err = secretstore.Open(t.Context(), cfg, secretstore.OpenOptions{})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.Contains(t, err.Error(), "auth.secretIDFile")
	assert.Contains(t, err.Error(), "/nonexistent/secret-id")

	t.Setenv("EMPTY_TOKEN_FOR_TEST", "")
	_, err = vault.New(t.Context(), vault.Config{Address: "http://127.0.0.1:1", Auth: vault.Auth{Method: "token", TokenEnv: "EMPTY_TOKEN_FOR_TEST"}}, vault.Options{})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.Contains(t, err.Error(), "EMPTY_TOKEN_FOR_TEST is empty")
}

func TestOpenUnreachableServerIsUnavailable(t *testing.T) {
	_, err := vault.New(t.Context(), vault.Config{
		Address: "http://127.0.0.1:1", MaxAttempts: 1,
		Auth: vault.Auth{Method: "token", Token: "tok-never-printed"},
	}, vault.Options{})
	require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	assert.Contains(t, err.Error(), "cannot reach vault at http://127.0.0.1:1")
	assert.NotContains(t, err.Error(), "tok-never-printed")
	assert.False(t, errors.Is(err, edgesecrets.ErrPermission))
}

// FuzzConfig feeds arbitrary JSON to the vault section decoder and
// validator: it must never panic, errors match ErrInvalid, and a credential
// planted in the input never appears in the error.
func FuzzConfig(f *testing.F) {
	f.Add(`{"address":"http://h","auth":{"method":"token","token":"x"}}`)
	f.Add(`{"address":"https://h","caBundle":"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----","auth":{"method":"approle","roleID":"r","secretID":"x"}}`)
	f.Add(`{"timeout":"1h","maxAttempts":"x","auth":{"method":"jwt","jwtEnv":"E","token":"x"}}`)
	f.Add(`{"auth":{"method":"token","token":7}}`)
	f.Add(`{"auth":"token"}`)
	f.Add(`[]`)
	f.Add(`{"address":"http://h","auth":{"method":"openhorizon","exchangeID":"o/a","exchangeToken":"x"}}`)
	const canary = "CANARY-7f3a9q"
	validate := func(t *testing.T, section []byte) error {
		cfg := secretstore.Config{Type: "vault", Sections: map[string]json.RawMessage{"vault": section}}
		err := cfg.Validate()
		if err != nil && !errors.Is(err, edgesecrets.ErrInvalid) {
			t.Fatalf("validation error does not match ErrInvalid: %v", err)
		}
		return err
	}
	f.Fuzz(func(t *testing.T, section string) {
		validate(t, []byte(section))
		var m map[string]any
		if json.Unmarshal([]byte(section), &m) != nil {
			return
		}
		auth, ok := m["auth"].(map[string]any)
		if !ok {
			auth = map[string]any{}
			m["auth"] = auth
		}
		auth["token"], auth["secretID"], auth["exchangeToken"] = canary, canary, canary
		planted, err := json.Marshal(m)
		if err != nil {
			return
		}
		if err := validate(t, planted); err != nil && strings.Contains(err.Error(), canary) {
			t.Fatalf("error echoes a credential: %v", err)
		}
	})
}
