package agbot

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/httpmetrics"
	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// Paths of the Agbot's routes besides package secretsapi's.
const (
	// IdentityPath prefixes the identity API (identity.Issuer.Handler);
	// an agent's identity.ClientOptions.BaseURL is <agbot URL>/identity.
	IdentityPath = "/identity/"
	// RelayPath prefixes the relay's routes (relay.Server).
	RelayPath = "/relay/"
)

// newHandler builds the Agbot's HTTP surface. The secrets-manager API's
// handler is in front (secretsapi.Options.Fallback): it refuses a
// non-canonical path with 400 before anything routes it, and the rest is
// routed by prefix, never through http.ServeMux, which answers a
// non-canonical path ("a/../b", "a//b") with a redirect to the cleaned
// one that Go's client, hzn's, follows with the same method and body.
func (a *Agbot) newHandler() (http.Handler, error) {
	identityAPI := http.StripPrefix(strings.TrimSuffix(IdentityPath, "/"), a.issuer.Handler(a.authorizeRevoke))
	fallback := a.opts.Fallback
	if fallback == nil {
		fallback = http.NotFoundHandler()
	}
	rest := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, IdentityPath):
			identityAPI.ServeHTTP(w, r)
		case strings.HasPrefix(p, RelayPath):
			a.relay.ServeHTTP(w, r)
		default:
			fallback.ServeHTTP(w, r)
		}
	})
	h, err := secretsapi.NewHandler(secretsapi.Options{
		Store:         a.opts.Delivery.Store,
		Authenticate:  a.opts.Authenticate,
		Resolver:      a.opts.Resolver,
		Configuration: a.opts.Configuration,
		Operations:    a.engine,
		// anax's liveHealth.lastDBHeartbeat: the engine's last state success.
		LastDBHeartbeat: func() time.Time { return a.engine.Health(context.Background()).LastStateSuccess },
		Fallback:        rest,
		Logger:          a.log,
	})
	if err != nil {
		return nil, err
	}
	return httpmetrics.Wrap(h, httpmetrics.Options{MeterProvider: a.opts.Delivery.MeterProvider, Scope: meterName, Route: route})
}

// meterName is the instrumentation scope of the Agbot's instruments.
const meterName = "github.com/edgesecrets/edgesecrets/agbot"

// route names a request's route for the request metrics, from a bounded
// set: never an organisation, a secret name or an id.
func route(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, secretsapi.OrgPath):
		return secretsapi.OrgPath + "{org}/secrets/{name...}"
	case strings.HasPrefix(p, secretsapi.SecretsPath):
		return secretsapi.SecretsPath + "{name...}"
	case strings.HasPrefix(p, "/deploycheck/"):
		return "/deploycheck/{check}"
	case p == IdentityPath+"instance":
		return p // registrations
	case strings.HasPrefix(p, IdentityPath+"instance/"):
		return IdentityPath + "instance/{identity...}" // renewals (POST), revocations (DELETE)
	case strings.HasPrefix(p, IdentityPath):
		return IdentityPath + "{route...}"
	case strings.HasPrefix(p, RelayPath):
		return RelayPath + "{route...}"
	case strings.HasPrefix(p, secretsapi.AgreementsPath+"/"):
		return secretsapi.AgreementsPath + "/{id}"
	case p == secretsapi.HealthPath, p == secretsapi.AdminHealthPath, p == secretsapi.AgreementsPath, p == secretsapi.ReleasePath, p == "/metrics":
		return p
	}
	return "other"
}

// errNotAdmin refuses a caller who is not an administrator.
var errNotAdmin = errors.New("an administrator's credentials are required")

// admin returns the request's caller, by Options.Authenticate, when it
// is an administrator.
func (a *Agbot) admin(r *http.Request) (secretsapi.Caller, error) {
	creds, ok := secretsapi.ReadCredentials(r)
	if !ok {
		return secretsapi.Caller{}, identity.ErrUnauthenticated
	}
	caller, err := a.opts.Authenticate(r.Context(), creds)
	switch {
	case err != nil:
		return secretsapi.Caller{}, identity.ErrUnauthenticated
	case caller.Role != secretsapi.RoleAdmin:
		return secretsapi.Caller{}, errNotAdmin
	}
	return caller, nil
}

// authorizeRevoke lets an administrator of the instance's organisation
// revoke its identity.
func (a *Agbot) authorizeRevoke(r *http.Request, id identity.Identity) error {
	caller, err := a.admin(r)
	if err == nil && caller.Org != id.Org {
		err = errors.New("an administrator of another organisation")
	}
	return err
}
