package identity

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/edgesecrets/edgesecrets"
)

// handler serves the hub's identity API (Issuer.Handler).
type handler struct {
	issuer    *Issuer
	authorize func(*http.Request, Identity) error
	log       *slog.Logger
}

// Handler returns the http.Handler serving the Issuer's identity API:
//
//	POST   /instance                                          register → 201, Location, the new certificate
//	POST   /instance/{provider}/{org}/{node}/{instanceId}     refresh  → 200, the new certificate
//	DELETE /instance/{provider}/{org}/{node}/{instanceId}     revoke   → 204
//
// authorizeRevoke decides whether the caller of DELETE may revoke id:
// return nil to allow, an error matching ErrUnauthenticated for 401, any
// other error for 403. Its error is logged, not sent. When nil, revocation
// over HTTP is disabled (403).
//
// A certificate answer is JSON {"provider","org","node","instanceId",
// "certificate" (PEM),"caCertificates" (PEM),"serial","notAfter"}. Errors
// are JSON {"error":"<message>","reason":"revoked"|"expired"|"replayed"|"unknown"}
// with 400 (bad input), 401 (no proof), 403 (refused), 404 (no such
// instance, with reason "unknown", or path), 405 (method), 409 (concurrent update, or reason
// "replayed": a request whose proof was already used), 413 (body over
// 64 KiB), 503 (store or signer failed). Messages never carry key
// material, attestation data or plug-in error text; the full error goes to
// the Issuer's Logger. Mount it at the root or under a prefix with
// http.StripPrefix; Client calls it.
func (is *Issuer) Handler(authorizeRevoke func(r *http.Request, id Identity) error) http.Handler {
	return &handler{issuer: is, authorize: authorizeRevoke, log: is.log}
}

const instancePath = "/instance"

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	if path == instancePath {
		if r.Method != http.MethodPost {
			h.methodNotAllowed(w, r, http.MethodPost)
			return
		}
		h.register(w, r)
		return
	}
	rest, ok := strings.CutPrefix(path, instancePath+"/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 4 {
		h.fail(w, r, http.StatusNotFound, newError(opDecode, Identity{}, edgesecrets.ErrNotFound, "no such resource", nil))
		return
	}
	id := Identity{Provider: parts[0], Org: parts[1], Node: parts[2], InstanceID: parts[3]}
	switch r.Method {
	case http.MethodPost:
		h.refresh(w, r, id)
	case http.MethodDelete:
		h.revoke(w, r, id)
	default:
		h.methodNotAllowed(w, r, http.MethodPost+", "+http.MethodDelete)
	}
}

func (h *handler) register(w http.ResponseWriter, r *http.Request) {
	req, err := decodeRegisterBody(r.Body)
	if err == nil {
		var resp *responseBody
		if resp, err = h.issuer.register(r.Context(), req); err == nil {
			w.Header().Set("Location", mountPrefix(r)+resp.path())
			h.reply(w, http.StatusCreated, resp)
			return
		}
	}
	h.fail(w, r, statusOf(err), err)
}

func (h *handler) refresh(w http.ResponseWriter, r *http.Request, id Identity) {
	if err := id.Validate(); err != nil {
		h.fail(w, r, http.StatusBadRequest, withOp(err, opRefresh))
		return
	}
	req, err := decodeRefreshBody(r.Body)
	if err == nil {
		var resp *responseBody
		if resp, err = h.issuer.refresh(r.Context(), id, req); err == nil {
			h.reply(w, http.StatusOK, resp)
			return
		}
	}
	h.fail(w, r, statusOf(err), withInstance(err, id))
}

func (h *handler) revoke(w http.ResponseWriter, r *http.Request, id Identity) {
	if err := id.Validate(); err != nil {
		h.fail(w, r, http.StatusBadRequest, withOp(err, opRevoke))
		return
	}
	if h.authorize == nil {
		h.fail(w, r, http.StatusForbidden, newError(opRevoke, id, ErrForbidden, "revocation over HTTP is not enabled on this hub", nil))
		return
	}
	if err := h.authorize(r, id); err != nil {
		kind, reason, status := ErrForbidden, "the caller may not revoke this instance", http.StatusForbidden
		if errors.Is(err, ErrUnauthenticated) {
			kind, reason, status = ErrUnauthenticated, "the caller is not authenticated", http.StatusUnauthorized
		}
		h.fail(w, r, status, newError(opRevoke, id, kind, reason, err))
		return
	}
	if err := h.issuer.Revoke(r.Context(), id); err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	h.fail(w, r, http.StatusMethodNotAllowed, newError(opDecode, Identity{}, edgesecrets.ErrInvalid, "method "+clip(r.Method)+" not allowed; use "+allow, nil))
}

// mountPrefix returns the path prefix the handler is mounted under (what
// http.StripPrefix removed), so Location is right for the caller.
func mountPrefix(r *http.Request) string {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return ""
	}
	prefix, _ := strings.CutSuffix(u.EscapedPath(), instancePath)
	return prefix
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error string `json:"error"`
	// Reason is "revoked", "expired", "replayed" or "unknown" (no record
	// for the instance) when the refusal is for that reason.
	Reason string `json:"reason,omitempty"`
}

const (
	reasonRevoked  = "revoked"
	reasonExpired  = "expired"
	reasonReplayed = "replayed"
	reasonUnknown  = "unknown"
)

func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	// The full error, cause included, goes to the hub's log only.
	h.log.Log(r.Context(), level, "identity: request refused", "method", r.Method, "path", clip(r.URL.EscapedPath()), "status", status, "error", err)
	body := errorBody{Error: publicMessage(err)}
	switch {
	case errors.Is(err, ErrRevoked):
		body.Reason = reasonRevoked
	case errors.Is(err, ErrExpired):
		body.Reason = reasonExpired
	case errors.Is(err, ErrUnknownInstance):
		body.Reason = reasonUnknown
	case errors.Is(err, ErrReplayed):
		body.Reason = reasonReplayed
	}
	h.reply(w, status, body)
}

func (h *handler) reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// statusOf returns the HTTP status the handler answers err with.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, edgesecrets.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, edgesecrets.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, edgesecrets.ErrConflict), errors.Is(err, ErrReplayed):
		return http.StatusConflict
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, edgesecrets.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
