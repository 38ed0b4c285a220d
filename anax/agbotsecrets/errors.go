package agbotsecrets

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/open-horizon/anax/agreementbot/secrets"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// Methods named in anax's errors, as its Vault plugin names the requests
// it makes: GET for reads and existence, LIST for listings, POST for
// writes, DELETE.
const (
	methodGet    = http.MethodGet
	methodList   = "LIST"
	methodPost   = http.MethodPost
	methodDelete = http.MethodDelete
)

// errStoreUnavailable is the cause of every SecretsProviderUnavailable: the
// store's own error names its address, which a user need not know (it is
// logged instead).
var errStoreUnavailable = errors.New("the secret store did not answer; try again later")

// vaultResponse is the response body anax's errors carry, in Vault's form
// {"errors": [...]}.
func vaultResponse(msgs ...string) map[string][]string {
	if msgs == nil {
		msgs = []string{}
	}
	return map[string][]string{"errors": msgs}
}

// loginFailed is the Unauthenticated error of a user whose login was
// refused with an HTTP status, in anax's Vault plugin's words.
func loginFailed(user string, status int) error {
	return &secrets.Unauthenticated{
		LoginError:   fmt.Errorf("agbot unable to login user %s, HTTP status code: %v", user, status),
		ExchangeUser: user,
	}
}

// callerError maps vault.AsCaller's error onto anax's: a refused login is
// Unauthenticated, as anax's Vault plugin's loginUser failures are.
func (p *Plugin) callerError(err error, user string) error {
	var le *vault.LoginError
	switch {
	case errors.As(err, &le):
		return loginFailed(user, le.StatusCode)
	case errors.Is(err, edgesecrets.ErrInvalid):
		// A malformed id or an empty token: no login could succeed.
		return &secrets.Unauthenticated{LoginError: fmt.Errorf("agbot unable to login user %s: the exchange id or token is malformed", user), ExchangeUser: user}
	case errors.Is(err, edgesecrets.ErrPermission):
		return loginFailed(user, http.StatusForbidden)
	}
	p.log.Warn("logging a user in to the secret store failed", "user", user, "err", err)
	return &secrets.SecretsProviderUnavailable{ProviderError: errStoreUnavailable}
}

// storeError maps a store's error for a request (method on secretPath, by
// exUser) onto the error anax's Vault plugin returns for Vault's answer of
// the same kind: 404 NoSecretFound, 403 PermissionDenied, 400 BadRequest,
// an outage SecretsProviderUnavailable, anything else Unknown.
func (p *Plugin) storeError(err error, method, secretPath, exUser string) error {
	switch {
	case errors.Is(err, edgesecrets.ErrNotFound):
		return &secrets.NoSecretFound{Response: vaultResponse(), SecretPath: secretPath}
	case errors.Is(err, edgesecrets.ErrPermission):
		return &secrets.PermissionDenied{Response: vaultResponse("permission denied"), HttpMethod: method, SecretPath: secretPath, ExchangeUser: exUser}
	case errors.Is(err, edgesecrets.ErrInvalid):
		// Store errors name the secret and the problem, never a value.
		return &secrets.BadRequest{ResponseCode: http.StatusBadRequest, Response: vaultResponse(err.Error()), HttpMethod: method, SecretPath: secretPath}
	case errors.Is(err, edgesecrets.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		p.log.Warn("the secret store is unavailable", "method", method, "secret", secretPath, "err", err)
		return &secrets.SecretsProviderUnavailable{ProviderError: errStoreUnavailable}
	}
	p.log.Warn("the secret store failed", "method", method, "secret", secretPath, "err", err)
	return &secrets.Unknown{Response: vaultResponse(err.Error()), ResponseCode: http.StatusInternalServerError, HttpMethod: method, SecretPath: secretPath}
}

// denied is the PermissionDenied of a request the library's policy refuses.
func denied(method, secretPath, exUser string) error {
	return &secrets.PermissionDenied{Response: vaultResponse("permission denied"), HttpMethod: method, SecretPath: secretPath, ExchangeUser: exUser}
}

// badName is the BadRequest of a name that is not a vault secret name.
func badName(method, secretPath string, err error) error {
	return &secrets.BadRequest{ResponseCode: http.StatusBadRequest, Response: vaultResponse(err.Error()), HttpMethod: method, SecretPath: secretPath}
}
