package agbot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/httpmetrics"
	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// Paths of the Agbot's routes besides the secrets-manager API's.
const (
	// IdentityPath prefixes the identity API (identity.Issuer.Handler);
	// an agent's identity.ClientOptions.BaseURL is <agbot URL>/identity.
	IdentityPath = "/identity/"
	// RelayPath prefixes the relay's routes (relay.Server).
	RelayPath = "/relay/"
	// HealthPath is GET /admin/health: delivery.Health, for
	// administrators.
	HealthPath = "/admin/health"
	// AgreementsPath prefixes GET /admin/agreements/{id}: delivery.Status
	// of one agreement, with the reason it is held back, for
	// administrators.
	AgreementsPath = "/admin/agreements/"
	// ListPath is GET /admin/agreements?condition=&reason=&after=&limit=:
	// a delivery.Page of the agreements not in sync (or in the condition
	// or waiting for the reason asked), with why each waits, for
	// administrators.
	ListPath = "/admin/agreements"
	// ReleasePath is POST /admin/cancellations/release: releases the
	// cancellations the budget held (delivery.Engine.ReleaseHeld), once an
	// administrator checked that the secrets are really gone.
	ReleasePath = "/admin/cancellations/release"
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
		case p == HealthPath, p == ListPath, p == ReleasePath, strings.HasPrefix(p, AgreementsPath):
			a.serveStatus(w, r)
		default:
			fallback.ServeHTTP(w, r)
		}
	})
	h, err := secretsapi.NewHandler(secretsapi.Options{
		Store:         a.opts.Delivery.Store,
		Authenticate:  a.opts.Authenticate,
		Resolver:      a.opts.Resolver,
		Configuration: a.opts.Configuration,
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
	case strings.HasPrefix(p, "/org/"):
		return "/org/{org}/secrets/{name...}"
	case strings.HasPrefix(p, "/secrets/"):
		return "/secrets/{name...}"
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
	case strings.HasPrefix(p, AgreementsPath):
		return AgreementsPath + "{id}"
	case p == "/health", p == "/allsecrets", p == HealthPath, p == ListPath, p == ReleasePath, p == "/metrics":
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

// serveStatus answers the status routes, names and reasons only, never a
// value:
//
//	GET /admin/health            delivery.Health: counts, store and state problems, and per
//	                             reason code the agreements held back
//	GET /admin/agreements/{id}   delivery.Status of one agreement, with its Reason
//	GET /admin/agreements        a delivery.Page of the agreements not in sync, by condition or reason
//	POST /admin/cancellations/release  releases the held cancellations: {"released": n}
func (a *Agbot) serveStatus(w http.ResponseWriter, r *http.Request) {
	_, err := a.admin(r)
	method := http.MethodGet
	if r.URL.Path == ReleasePath {
		method = http.MethodPost
	}
	switch {
	case errors.Is(err, identity.ErrUnauthenticated):
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong credentials"})
	case err != nil:
		writeJSON(w, http.StatusForbidden, map[string]string{"error": err.Error()})
	case r.Method != method:
		w.Header().Set("Allow", method)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "only " + method})
	case r.URL.Path == HealthPath:
		writeJSON(w, http.StatusOK, a.engine.Health(r.Context()))
	case r.URL.Path == ReleasePath:
		n, err := a.engine.ReleaseHeld(r.Context())
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"released": n, "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"released": n})
	case r.URL.Path == ListPath || r.URL.Path == AgreementsPath:
		opts, err := listOptions(r.URL.Query())
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, a.engine.Agreements(r.Context(), opts))
	default:
		id := strings.TrimPrefix(r.URL.Path, AgreementsPath)
		st, err := a.engine.Status(r.Context(), id)
		switch {
		case errors.Is(err, delivery.ErrNotFound):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no agreement " + id})
		case err != nil:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, st)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client is gone
}

// listOptions reads the listing's query: condition, reason, after, limit.
func listOptions(q url.Values) (delivery.ListOptions, error) {
	opts := delivery.ListOptions{
		Condition: delivery.Condition(q.Get("condition")),
		Reason:    delivery.ReasonCode(q.Get("reason")),
		After:     q.Get("after"),
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return opts, fmt.Errorf("limit %.32q: want a number from 1 to 1000", s)
		}
		opts.Limit = n
	}
	for k := range q {
		switch k {
		case "condition", "reason", "after", "limit":
		default:
			return opts, fmt.Errorf("unknown query parameter %.32q: want condition, reason, after or limit", k)
		}
	}
	if err := opts.Check(); err != nil {
		return opts, err
	}
	return opts, nil
}
