package secretsapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// Routes of the operator API, served for administrators (RoleAdmin) when
// Options.Operations is set: names, conditions and reasons, never a value.
const (
	// AdminHealthPath is GET /admin/health: delivery.Health, counts,
	// store and state problems, and per reason code the agreements held
	// back.
	AdminHealthPath = "/admin/health"
	// AgreementsPath is GET /admin/agreements?condition=&reason=&after=&limit=:
	// a delivery.Page of the agreements not in sync (or in the condition
	// or waiting for the reason asked), with why each waits; and, with an
	// id after it, GET /admin/agreements/{id}: delivery.Status of one
	// agreement, with the reason it is held back.
	AgreementsPath = "/admin/agreements"
	// ReleasePath is POST /admin/cancellations/release: releases the
	// cancellations the budget held (delivery.Engine.ReleaseHeld), once an
	// administrator checked that the secrets are really gone; answers
	// {"released": n}.
	ReleasePath = "/admin/cancellations/release"
)

// Operations is what the operator routes report and do; a
// *delivery.Engine is one.
type Operations interface {
	Health(ctx context.Context) delivery.Health
	Agreements(ctx context.Context, opts delivery.ListOptions) delivery.Page
	Status(ctx context.Context, id string) (delivery.Status, error)
	ReleaseHeld(ctx context.Context) (int, error)
}

// isOperatorPath reports whether p is one of the operator routes.
func isOperatorPath(p string) bool {
	return p == AdminHealthPath || p == AgreementsPath || p == ReleasePath || strings.HasPrefix(p, AgreementsPath+"/")
}

// errNotAdmin refuses a caller who is not an administrator.
var errNotAdmin = errors.New("an administrator's credentials are required")

// errUnauthenticated refuses a request without credentials the
// authentication hook accepts.
var errUnauthenticated = errors.New("missing or wrong credentials")

// admin returns the request's caller, by Options.Authenticate, when it is
// an administrator.
func (h *handler) admin(r *http.Request) (Caller, error) {
	creds, ok := ReadCredentials(r)
	if !ok {
		return Caller{}, errUnauthenticated
	}
	c, err := h.opts.Authenticate(r.Context(), creds)
	if err == nil {
		err = c.check()
	}
	switch {
	case err != nil: // neither the hook's error nor the credentials are told
		return Caller{}, errUnauthenticated
	case c.Role != RoleAdmin:
		return Caller{}, errNotAdmin
	}
	return c, nil
}

// operate answers the operator routes (see AdminHealthPath,
// AgreementsPath, ReleasePath).
func (h *handler) operate(w http.ResponseWriter, r *http.Request) {
	ops, p := h.opts.Operations, r.URL.Path
	method := http.MethodGet
	if p == ReleasePath {
		method = http.MethodPost
	}
	caller, err := h.admin(r)
	switch {
	case errors.Is(err, errUnauthenticated):
		writeJSON(w, http.StatusUnauthorized, operatorError(err.Error()))
		return
	case err != nil:
		writeJSON(w, http.StatusForbidden, operatorError(err.Error()))
		return
	case r.Method != method:
		w.Header().Set("Allow", method)
		writeJSON(w, http.StatusMethodNotAllowed, operatorError("only "+method))
		return
	}
	switch p {
	case AdminHealthPath:
		writeJSON(w, http.StatusOK, ops.Health(r.Context()))
	case ReleasePath:
		n, err := ops.ReleaseHeld(r.Context())
		h.log.Info("held cancellations released", "caller", caller.String(), "released", n)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"released": n, "error": refusalText(err.Error())})
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"released": n})
	case AgreementsPath, AgreementsPath + "/":
		opts, err := listOptions(r.URL.Query())
		if err != nil {
			writeJSON(w, http.StatusBadRequest, operatorError(err.Error()))
			return
		}
		writeJSON(w, http.StatusOK, ops.Agreements(r.Context(), opts))
	default:
		id := strings.TrimPrefix(p, AgreementsPath+"/")
		st, err := ops.Status(r.Context(), id)
		switch {
		case errors.Is(err, state.ErrNotFound):
			writeJSON(w, http.StatusNotFound, operatorError("no agreement "+id))
		case err != nil:
			writeJSON(w, http.StatusServiceUnavailable, operatorError(err.Error()))
		default:
			writeJSON(w, http.StatusOK, st)
		}
	}
}

// operatorError is an operator route's error body, {"error": msg}, msg
// without a percent sign (refusalText).
func operatorError(msg string) map[string]string {
	return map[string]string{"error": refusalText(msg)}
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
