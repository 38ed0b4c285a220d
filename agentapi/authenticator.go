package agentapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
)

// Authenticator checks the HTTP Basic credentials a service presents to
// the secrets API and returns the instance they belong to, or false.
//
// Open Horizon's agent gives each service container ESS credentials, a
// file {"id":…,"token":…} mounted at $HZN_ESS_AUTH: the id is the service's
// (its URL, the same for every instance of the service) and the token is
// the instance's own; the agent finds the instance by the token
// (open-horizon/anax resource/secret_api.go, FindMSSInstWithESSToken, and
// resource/authentication_manager.go). An embedder that keeps such
// credentials implements Authenticator over them; one that gives each
// instance its instance id as the user id uses Tokens (TokenAuthenticator).
//
// Implementations must compare tokens in constant time and be safe for
// concurrent use; the instance id returned must be one the Store knows.
type Authenticator interface {
	Authenticate(ctx context.Context, user, password string) (instanceID string, ok bool)
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(ctx context.Context, user, password string) (instanceID string, ok bool)

// Authenticate implements Authenticator.
func (f AuthenticatorFunc) Authenticate(ctx context.Context, user, password string) (string, bool) {
	return f(ctx, user, password)
}

// TokenAuthenticator authenticates callers whose user id is their instance
// id and whose password is the instance's token in t. The comparison takes
// the same time whatever the tokens are, and whether or not the id is
// known; an empty token never authenticates.
func TokenAuthenticator(t Tokens) Authenticator { return tokenAuthenticator{t} }

type tokenAuthenticator struct{ tokens Tokens }

func (a tokenAuthenticator) Authenticate(ctx context.Context, user, password string) (string, bool) {
	want, known := a.tokens.Token(ctx, user)
	known = known && want != ""
	got, exp := sha256.Sum256([]byte(password)), sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(got[:], exp[:]) == 1 && known {
		return user, true
	}
	return "", false
}
