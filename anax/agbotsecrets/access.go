package agbotsecrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/open-horizon/anax/exchange"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// maxExchangeAnswer bounds the exchange's answer about one user.
const maxExchangeAnswer = 1 << 20

// access is how one user's request reaches the store: on Vault a store
// acting with the user's own token (caller nil: Vault's ACL decides); on
// any other store the agbot's, with the caller whose role the library's
// policy checks first.
type access struct {
	store  *secretstore.Store
	caller *secretsapi.Caller
	user   string // the exchange user, "org/user", for anax's errors
	done   func()
}

// allowed reports whether the policy lets the caller do a on n in org;
// always true on Vault, whose ACL decides when the request is made.
func (a *access) allowed(org string, n vaultName, act secretsapi.Action) bool {
	return a.caller == nil || secretsapi.Authorize(*a.caller, org, n.VaultSecretName, act)
}

// asUser returns the access of user (an exchange id, "org/user") with
// token. Release it with done.
func (p *Plugin) asUser(ctx context.Context, user, token string) (*access, error) {
	st := p.agbotStore()
	if st == nil {
		return nil, &secrets.SecretsProviderUnavailable{ProviderError: errors.New("the secrets plugin is not logged in to the secret store")}
	}
	us, err := vault.AsCaller(ctx, st, vault.Caller{ID: user, Token: edgesecrets.Sensitive(token), Mount: p.opts.UserAuthMount})
	switch {
	case err == nil:
		return &access{store: us, user: user, done: func() { p.noteUserAnswer(us); _ = us.Close() }}, nil
	case !errors.Is(err, errors.ErrUnsupported):
		return nil, p.callerError(err, user)
	}
	c, err := p.exchangeCaller(ctx, user, token)
	if err != nil {
		return nil, err
	}
	return &access{store: st, caller: &c, user: user, done: func() {}}, nil
}

// exchangeCaller asks the exchange, with the user's own credentials, who
// user is (anax's secure API reads the same route, GET
// orgs/{org}/users/{user}): its organisation and admin flag. The answer is
// not kept, so a changed password or role counts at the next request, as
// with Vault's login.
func (p *Plugin) exchangeCaller(ctx context.Context, user, token string) (secretsapi.Caller, error) {
	org, id, ok := strings.Cut(user, "/")
	if !ok || org == "" || id == "" || strings.Contains(id, "/") {
		return secretsapi.Caller{}, &secrets.Unauthenticated{LoginError: fmt.Errorf("agbot unable to login user %s: the exchange id is not org/user", user), ExchangeUser: user}
	}
	if p.opts.ExchangeURL == "" {
		return secretsapi.Caller{}, &secrets.Unauthenticated{LoginError: fmt.Errorf("agbot unable to login user %s: the plugin has no exchange URL", user), ExchangeUser: user}
	}
	target := p.opts.ExchangeURL + "orgs/" + url.PathEscape(org) + "/users/" + url.PathEscape(id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return secretsapi.Caller{}, &secrets.Unauthenticated{LoginError: fmt.Errorf("agbot unable to login user %s: the exchange URL is malformed", user), ExchangeUser: user}
	}
	req.SetBasicAuth(user, token)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		p.log.Warn("the exchange did not answer", "user", user, "err", redactURLError(err))
		return secretsapi.Caller{}, &secrets.SecretsProviderUnavailable{ProviderError: errors.New("the exchange did not answer; try again later")}
	}
	defer func() { _ = resp.Body.Close() }() // read in full or dropped: nothing to report
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode >= 500:
		p.log.Warn("the exchange failed", "user", user, "status", resp.StatusCode)
		return secretsapi.Caller{}, &secrets.SecretsProviderUnavailable{ProviderError: fmt.Errorf("the exchange answered HTTP %d; try again later", resp.StatusCode)}
	default:
		return secretsapi.Caller{}, loginFailed(user, resp.StatusCode)
	}
	var users exchange.GetUsersResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxExchangeAnswer)).Decode(&users); err != nil {
		p.log.Warn("the exchange's answer about a user is not JSON", "user", user, "err", describeJSONError(err))
		return secretsapi.Caller{}, &secrets.SecretsProviderUnavailable{ProviderError: errors.New("the exchange's answer could not be read")}
	}
	def, ok := users.Users[user]
	if !ok {
		return secretsapi.Caller{}, loginFailed(user, http.StatusNotFound)
	}
	role := secretsapi.RoleUser
	if def.Admin {
		role = secretsapi.RoleAdmin
	}
	return secretsapi.Caller{Org: org, ID: id, Role: role}, nil
}

// redactURLError drops the URL of a client error (it could carry a
// query); the cause stays.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
