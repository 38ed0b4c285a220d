package vault

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/redact"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Auth method names for Auth.Method (documented there).
const (
	methodToken      = "token"
	methodAppRole    = "approle"
	methodKubernetes = "kubernetes"
	methodJWT        = "jwt"
	// methodOpenHorizon is Open Horizon's auth method
	// (open-horizon/vault-exchange-auth), mounted at "openhorizon" in
	// Open Horizon's deployments.
	methodOpenHorizon = "openhorizon"
)

// KV version settings for Config.KVVersion (documented there).
const (
	kvAuto = "auto"
	kv1    = "1"
	kv2    = "2"
)

// Defaults applied by New (documented on the Config fields).
const (
	defaultMount       = "secret"
	defaultTimeout     = 30 * time.Second
	defaultMaxAttempts = 3
	// defaultServiceAccountTokenFile is where Kubernetes mounts a pod's
	// service account token.
	defaultServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	// maxMaxAttempts bounds maxAttempts so a typo cannot make a call retry
	// for hours.
	maxMaxAttempts = 20
)

// Config is the "vault" section of a secretstore config:
//
//	{"type": "vault", "defaultScope": "myorg", "vault": {
//	   "address": "https://vault.example.com:8200", "mount": "secret",
//	   "kvVersion": "auto", "parentPath": "edge",
//	   "caFile": "/etc/edge/vault-ca.pem", "timeout": "30s",
//	   "auth": {"method": "approle", "roleID": "...", "secretIDFile": "/run/secrets/secret-id"}}}
//
// A secret named n lives at <mount>/<parentPath>/<defaultScope>/<n>.
type Config struct {
	// Address is the Vault server's URL (http or https). Required.
	Address string `json:"address"`
	// Mount is the KV secrets engine's mount path. Default "secret".
	Mount string `json:"mount,omitempty"`
	// KVVersion is "1", "2" or "auto" (default): auto asks Vault which
	// version the mount runs.
	KVVersion string `json:"kvVersion,omitempty"`
	// ParentPath is a path inside the mount under which every secret lives.
	ParentPath string `json:"parentPath,omitempty"`
	// Namespace is the Vault Enterprise namespace (X-Vault-Namespace).
	Namespace string `json:"namespace,omitempty"`
	// CABundle is PEM text of the CA certificates that sign the server's
	// certificate. Only these CAs are trusted when set.
	CABundle string `json:"caBundle,omitempty"`
	// CAFile is a file holding such a PEM bundle. Exclusive with CABundle.
	CAFile string `json:"caFile,omitempty"`
	// TLSServerName overrides the name the server certificate must carry
	// (and the SNI sent).
	TLSServerName string `json:"tlsServerName,omitempty"`
	// Timeout bounds each request to Vault, as a Go duration string
	// ("30s"). Default 30s. A caller bounds a whole call, retries
	// included, with its context's deadline.
	Timeout string `json:"timeout,omitempty"`
	// MaxAttempts is the store's attempts per call, retries included,
	// when a call fails with ErrUnavailable (connection errors, sealed,
	// 5xx, 429): 1 to 20; default 3 (1 with Options.Client). The same knob
	// as the other backends'.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// RateLimit caps requests per second to Vault; 0 means no limit.
	RateLimit float64 `json:"rateLimit,omitempty"`
	// RateBurst is the limiter's burst size; default the rate rounded up.
	RateBurst int `json:"rateBurst,omitempty"`
	// Auth says how the store logs in. Required.
	Auth Auth `json:"auth"`

	// Scope is the store's default scope, set from secretstore's
	// defaultScope by Open. Names are relative to ParentPath/Scope.
	Scope string `json:"-"`
}

// Format implements fmt.Formatter: the fields as %v prints them, the token
// and secret id redacted, for every verb, and behind a pointer too.
func (c Config) Format(f fmt.State, _ rune) {
	type plain Config // without this method
	redact.Format(f, plain(c))
}

// Auth configures how the store obtains its Vault token. Each method uses
// its own fields; a field of another method is reported as a problem.
type Auth struct {
	// Method is "token", "approle", "kubernetes", "jwt" or "openhorizon"
	// (Open Horizon's vault-exchange-auth plugin: an exchange user or
	// agbot logs in with its exchange credentials, and Vault gives it
	// that identity's ACL policy).
	Method string `json:"method"`
	// Mount is the auth method's mount path; default the method's name.
	Mount string `json:"mount,omitempty"`

	// Token, TokenFile, TokenEnv (method token, exactly one): the token
	// itself, a file holding it (re-read when the token's renewal ends, so
	// a Vault Agent sink works), or an environment variable holding it.
	Token     edgesecrets.Sensitive `json:"token,omitempty"`
	TokenFile string                `json:"tokenFile,omitempty"`
	TokenEnv  string                `json:"tokenEnv,omitempty"`

	// RoleID (method approle, required) and the secret ID, given by exactly
	// one of SecretID, SecretIDFile, SecretIDEnv. WrappedSecretID says the
	// secret ID is a response-wrapping token to unwrap first.
	RoleID          string                `json:"roleID,omitempty"`
	SecretID        edgesecrets.Sensitive `json:"secretID,omitempty"`
	SecretIDFile    string                `json:"secretIDFile,omitempty"`
	SecretIDEnv     string                `json:"secretIDEnv,omitempty"`
	WrappedSecretID bool                  `json:"wrappedSecretID,omitempty"`

	// Role is the Vault role to log in as (kubernetes: required; jwt:
	// optional when the mount has a default role).
	Role string `json:"role,omitempty"`
	// ServiceAccountTokenFile (method kubernetes) is the service account
	// token's path; default
	// "/var/run/secrets/kubernetes.io/serviceaccount/token", where
	// Kubernetes mounts a pod's token.
	ServiceAccountTokenFile string `json:"serviceAccountTokenFile,omitempty"`
	// JWTFile or JWTEnv (method jwt, exactly one) hold the JWT to present.
	// The file is re-read at every login, so a rotated JWT is picked up.
	JWTFile string `json:"jwtFile,omitempty"`
	JWTEnv  string `json:"jwtEnv,omitempty"`

	// ExchangeID (method openhorizon, required) is the exchange identity
	// to log in as, "org/id": an agbot's id or a user's name, as anax's
	// agbot sends them. Its token or password is given by exactly one of
	// ExchangeToken, ExchangeTokenFile (re-read at every login) and
	// ExchangeTokenEnv. Vault's plugin checks them with the exchange at
	// every login and, for an agbot's token, at every renewal.
	ExchangeID        string                `json:"exchangeID,omitempty"`
	ExchangeToken     edgesecrets.Sensitive `json:"exchangeToken,omitempty"`
	ExchangeTokenFile string                `json:"exchangeTokenFile,omitempty"`
	ExchangeTokenEnv  string                `json:"exchangeTokenEnv,omitempty"`
}

// Format implements fmt.Formatter: the fields as %v prints them, the token
// and secret id redacted, for every verb, and behind a pointer too.
func (a Auth) Format(f fmt.State, _ rune) {
	type plain Auth // without this method
	redact.Format(f, plain(a))
}

// validate checks the config; with a caller's client, the settings the
// client carries must be empty.
func (c Config) validate(ownClient bool) error {
	p := c.problems(ownClient)
	if len(p) == 0 {
		return nil
	}
	return &secretstore.ConfigError{Problems: p}
}

func (c Config) problems(ownClient bool) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, "vault."+fmt.Sprintf(format, args...)) }
	if ownClient {
		c.clientSetProblems(add)
	}
	c.connectionProblems(ownClient, add)
	c.pathProblems(add)
	c.limitProblems(add)
	if !ownClient {
		for _, s := range c.Auth.problems() {
			add("%s", s)
		}
	}
	return p
}

// clientSetProblems reports the settings Options.Client makes: with a
// client of the caller's they must be left empty.
func (c Config) clientSetProblems(add func(format string, args ...any)) {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"address", c.Address != ""}, {"namespace", c.Namespace != ""}, {"caBundle", c.CABundle != ""},
		{"caFile", c.CAFile != ""}, {"tlsServerName", c.TLSServerName != ""}, {"timeout", c.Timeout != ""},
		{"rateLimit", c.RateLimit != 0}, {"rateBurst", c.RateBurst != 0}, {"auth", c.Auth != Auth{}},
	} {
		if f.set {
			add("%s is set by Options.Client: leave it empty", f.name)
		}
	}
}

// connectionProblems checks the address, the TLS settings and the
// timeout.
func (c Config) connectionProblems(ownClient bool, add func(format string, args ...any)) {
	plainHTTP := false
	switch {
	case ownClient:
	case c.Address == "":
		add("address is required")
	default:
		if u, err := url.Parse(c.Address); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("address must be an http:// or https:// URL with a host")
		} else {
			plainHTTP = u.Scheme == "http"
		}
	}
	if c.CABundle != "" && c.CAFile != "" {
		add("caBundle and caFile are exclusive; set one")
	}
	if c.CABundle != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(c.CABundle)) {
		add("caBundle holds no PEM certificate")
	}
	if plainHTTP && (c.CABundle != "" || c.CAFile != "" || c.TLSServerName != "") {
		add("caBundle, caFile and tlsServerName need an https:// address")
	}
	if c.Timeout != "" {
		if d, err := time.ParseDuration(c.Timeout); err != nil {
			add(`timeout must be a duration string such as "30s"`)
		} else if d < 0 {
			add("timeout must not be negative")
		}
	}
}

// pathProblems checks the mount, the KV version, the parent path, the
// namespace and the scope.
func (c Config) pathProblems(add func(format string, args ...any)) {
	if c.Mount != "" && validPath(c.Mount) != nil {
		add("mount: %v", validPath(c.Mount))
	}
	switch c.KVVersion {
	case "", kvAuto, kv1, kv2:
	default:
		add(`kvVersion must be "1", "2" or "auto"`)
	}
	if c.ParentPath != "" && validPath(c.ParentPath) != nil {
		add("parentPath: %v", validPath(c.ParentPath))
	}
	if c.Namespace != "" && validPath(c.Namespace) != nil {
		add("namespace: %v", validPath(c.Namespace))
	}
	if sc := strings.Trim(c.Scope, "/"); sc != "" {
		if err := secretstore.ValidateName(sc); err != nil {
			add("scope %q: %v", c.Scope, err)
		}
	}
}

// limitProblems checks the attempts and the rate limit.
func (c Config) limitProblems(add func(format string, args ...any)) {
	if c.MaxAttempts < 0 || c.MaxAttempts > maxMaxAttempts {
		add("maxAttempts must be between 1 and %d (0 means the default)", maxMaxAttempts)
	}
	if c.RateLimit < 0 {
		add("rateLimit must not be negative")
	}
	if c.RateBurst < 0 {
		add("rateBurst must not be negative")
	}
	if c.RateBurst > 0 && c.RateLimit == 0 {
		add("rateBurst needs rateLimit")
	}
}

// authField is one method-specific Auth field: its JSON name, the method
// using it, and whether it is set.
type authField struct {
	name, method string
	set          bool
}

// fields lists the method-specific fields, so fields of another method
// are reported.
func (a Auth) fields() []authField {
	return []authField{
		{"token", methodToken, a.Token != ""},
		{"tokenFile", methodToken, a.TokenFile != ""},
		{"tokenEnv", methodToken, a.TokenEnv != ""},
		{"roleID", methodAppRole, a.RoleID != ""},
		{"secretID", methodAppRole, a.SecretID != ""},
		{"secretIDFile", methodAppRole, a.SecretIDFile != ""},
		{"secretIDEnv", methodAppRole, a.SecretIDEnv != ""},
		{"wrappedSecretID", methodAppRole, a.WrappedSecretID},
		{"serviceAccountTokenFile", methodKubernetes, a.ServiceAccountTokenFile != ""},
		{"jwtFile", methodJWT, a.JWTFile != ""},
		{"jwtEnv", methodJWT, a.JWTEnv != ""},
		{"exchangeID", methodOpenHorizon, a.ExchangeID != ""},
		{"exchangeToken", methodOpenHorizon, a.ExchangeToken != ""},
		{"exchangeTokenFile", methodOpenHorizon, a.ExchangeTokenFile != ""},
		{"exchangeTokenEnv", methodOpenHorizon, a.ExchangeTokenEnv != ""},
	}
}

func (a Auth) problems() []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, "auth."+fmt.Sprintf(format, args...)) }
	exactlyOne := func(what string, set ...bool) {
		n := 0
		for _, s := range set {
			if s {
				n++
			}
		}
		if n != 1 {
			add("method %s needs exactly one of %s", a.Method, what)
		}
	}
	switch a.Method {
	case "":
		add("method is required: token, approle, kubernetes, jwt or openhorizon")
		return p
	case methodToken:
		exactlyOne("token, tokenFile, tokenEnv", a.Token != "", a.TokenFile != "", a.TokenEnv != "")
		if a.Mount != "" {
			add("mount is not used by method token")
		}
	case methodAppRole:
		if a.RoleID == "" {
			add("roleID is required for method approle")
		}
		exactlyOne("secretID, secretIDFile, secretIDEnv", a.SecretID != "", a.SecretIDFile != "", a.SecretIDEnv != "")
	case methodKubernetes:
		if a.Role == "" {
			add("role is required for method kubernetes")
		}
	case methodJWT:
		exactlyOne("jwtFile, jwtEnv", a.JWTFile != "", a.JWTEnv != "")
	case methodOpenHorizon:
		if err := checkExchangeID(a.ExchangeID); err != nil {
			add("exchangeID: %v", err)
		}
		exactlyOne("exchangeToken, exchangeTokenFile, exchangeTokenEnv", a.ExchangeToken != "", a.ExchangeTokenFile != "", a.ExchangeTokenEnv != "")
	default:
		add("method %q is not one of token, approle, kubernetes, jwt, openhorizon", a.Method)
		return p
	}
	if a.Role != "" && a.Method != methodKubernetes && a.Method != methodJWT {
		add("role is not used by method %s", a.Method)
	}
	for _, f := range a.fields() {
		if f.set && f.method != a.Method {
			add("%s is not used by method %s (it belongs to %s)", f.name, a.Method, f.method)
		}
	}
	if a.Mount != "" && validPath(a.Mount) != nil {
		add("mount: %v", validPath(a.Mount))
	}
	return p
}

// checkExchangeID checks an Open Horizon exchange identity: "org/id", both
// parts non-empty, as vault-exchange-auth requires.
func checkExchangeID(id string) error {
	switch org, rest, ok := strings.Cut(id, "/"); {
	case id == "":
		return errors.New(`required for method openhorizon: the exchange identity "org/id"`)
	case !ok || org == "" || rest == "" || strings.Contains(rest, "/"):
		return fmt.Errorf(`%q is not of the form "org/id"`, id)
	case strings.TrimSpace(id) != id:
		return fmt.Errorf("%q has surrounding space", id)
	}
	return nil
}

// validPath checks a configured path (mount, parentPath, namespace):
// surrounding slashes are allowed, the rest must be a valid secret name, so
// it cannot escape upwards or hold empty segments.
func validPath(p string) error {
	t := strings.Trim(p, "/")
	if t == "" {
		return errors.New("path is empty")
	}
	return secretstore.ValidateName(t)
}
