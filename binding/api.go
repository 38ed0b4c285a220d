package binding

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Paths of the agbot existence API.
const (
	// SecretsPath prefixes GET /secrets/<vault-secret-name>.
	SecretsPath = "/secrets/"
	// HealthPath is GET /health.
	HealthPath = "/health"
)

// Error codes in the API's JSON error bodies {"error": "...", "code": "..."}.
const (
	// APIErrUnauthorized (401): the authentication hook refused the caller.
	APIErrUnauthorized = "unauthorized"
	// APIErrInvalidName (400): the vault secret name breaks the naming
	// rules, or the store does not accept it.
	APIErrInvalidName = "invalid_name"
	// APIErrNoStore (503): the hub has no secret store configured.
	APIErrNoStore = "no_store"
	// APIErrStoreUnavailable (503): the store did not answer; retry shortly.
	APIErrStoreUnavailable = "store_unavailable"
	// APIErrStoreForbidden (503): the store refused the agbot's
	// credentials; retrying does not help.
	APIErrStoreForbidden = "store_forbidden"
	// APIErrInternal (500): an unexpected store error.
	APIErrInternal = "internal"
	// APIErrNotFound (404): no such resource (not a secret's absence,
	// which is 404 {"exists":false}).
	APIErrNotFound = "not_found"
	// APIErrMethod (405): only GET (and HEAD) are served.
	APIErrMethod = "method_not_allowed"
)

// Existence is the body of a 200 or 404 answer to GET /secrets/<name>.
type Existence struct {
	Exists bool `json:"exists"`
}

// APIError is the body of every other error answer.
type APIError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Health is the body of GET /health.
type Health struct {
	// LastVaultInteraction is the last time, in Unix seconds, the agbot
	// successfully talked to the secret store (an answer, including "not
	// found", counts). 0 means never: no store is configured, or there has
	// been no successful interaction since the agbot started.
	LastVaultInteraction int64 `json:"lastVaultInteraction"`
}

// LastVaultInteractionTime returns LastVaultInteraction as a time, or the
// zero time when it is 0.
func (h Health) LastVaultInteractionTime() time.Time {
	if h.LastVaultInteraction == 0 {
		return time.Time{}
	}
	return time.Unix(h.LastVaultInteraction, 0)
}

// Caller is the identity the authentication hook established.
type Caller struct {
	// Org is the organisation whose secrets the caller asks about; vault
	// secret names are looked up under "<Org>/" in the store.
	Org string
	// Name identifies the caller in logs (a user or node id).
	Name string
}

// Authenticator authenticates a request to the existence API. It returns an
// error to refuse the request (401). Its error is not sent to the client nor
// logged, so it may say anything.
type Authenticator func(r *http.Request) (Caller, error)

// HandlerOptions configure a Handler.
type HandlerOptions struct {
	// Store is the agbot's secret store; nil means the hub has no vault and
	// every existence check answers 503.
	Store secretstore.Store
	// Authenticate is the pluggable caller authentication. Required.
	Authenticate Authenticator
	// LastVaultInteraction feeds /health. Default: Store's LastSuccess
	// method when it has one (a *secretstore.Monitor does); pass
	// monitor.LastSuccess when the monitor is wrapped by other middleware.
	LastVaultInteraction func() time.Time
	// Logger receives a line per request naming the caller and the vault
	// secret, never a value. Default: discard.
	Logger *slog.Logger
}

// Handler serves the agbot existence API with Go 1.22 routing:
//
//	GET /secrets/{name...}  200 {"exists":true} | 404 {"exists":false}
//	                        400 invalid name | 401 refused by the hook
//	                        503 no store, or the store unavailable or refusing the agbot
//	GET /health             200 {"lastVaultInteraction": <unix seconds>} (no authentication)
//
// Other methods get 405 and unknown paths 404, all with JSON error bodies.
// Existence is checked with Stat, so no secret value is ever read.
type Handler struct {
	mux  *http.ServeMux
	opts HandlerOptions
	log  *slog.Logger
}

// NewHandler returns the API handler.
func NewHandler(opts HandlerOptions) (*Handler, error) {
	if opts.Authenticate == nil {
		return nil, errors.New("binding: NewHandler needs an Authenticate hook")
	}
	if opts.LastVaultInteraction == nil {
		if ls, ok := opts.Store.(interface{ LastSuccess() time.Time }); ok {
			opts.LastVaultInteraction = ls.LastSuccess
		}
	}
	h := &Handler{mux: http.NewServeMux(), opts: opts, log: opts.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.mux.HandleFunc("GET "+SecretsPath+"{name...}", h.secret)
	h.mux.HandleFunc(SecretsPath+"{name...}", methodNotAllowed)
	h.mux.HandleFunc("GET "+HealthPath, h.health)
	h.mux.HandleFunc(HealthPath, methodNotAllowed)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, APIError{Error: "no such resource", Code: APIErrNotFound})
	})
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func methodNotAllowed(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", "GET, HEAD")
	writeJSON(w, http.StatusMethodNotAllowed, APIError{Error: "only GET is allowed", Code: APIErrMethod})
}

func (h *Handler) secret(w http.ResponseWriter, r *http.Request) {
	caller, err := h.opts.Authenticate(r)
	if err == nil && safename.Check(caller.Org) != nil {
		err = errors.New("no valid organisation")
	}
	if err != nil {
		h.log.Info("secret existence request refused", "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, APIError{Error: "authentication failed", Code: APIErrUnauthorized})
		return
	}
	log := h.log.With("org", caller.Org, "caller", caller.Name)
	name, err := ParseVaultSecretName(r.PathValue("name"))
	if err != nil {
		log.Info("secret existence request with an invalid name", "error", err)
		writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: APIErrInvalidName})
		return
	}
	log = log.With("vaultSecret", name.String())
	checker := &StoreChecker{store: h.opts.Store, org: caller.Org}
	exists, err := checker.SecretExists(r.Context(), name)
	switch {
	case r.Context().Err() != nil:
		return // the caller went away; nobody reads an answer
	case err == nil:
		log.Debug("secret existence checked", "exists", exists)
		status := http.StatusOK
		if !exists {
			status = http.StatusNotFound
		}
		writeJSON(w, status, Existence{Exists: exists})
	case errors.Is(err, errNoStore):
		log.Warn("secret existence request, but no secret store is configured")
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: errNoStore.Error(), Code: APIErrNoStore})
	case errors.Is(err, secretstore.ErrInvalid):
		log.Info("secret existence request refused by the store", "error", err)
		writeJSON(w, http.StatusBadRequest, APIError{Error: "the store does not accept this vault secret name", Code: APIErrInvalidName})
	case errors.Is(err, secretstore.ErrPermission):
		log.Warn("the store refused the agbot's existence check", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: "the secret store refused the agbot's credentials", Code: APIErrStoreForbidden})
	case errors.Is(err, secretstore.ErrUnavailable):
		log.Warn("secret store unavailable for an existence check", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: "the secret store is unavailable", Code: APIErrStoreUnavailable})
	default:
		log.Error("secret existence check failed", "error", err)
		writeJSON(w, http.StatusInternalServerError, APIError{Error: "the existence check failed", Code: APIErrInternal})
	}
}

func (h *Handler) health(w http.ResponseWriter, _ *http.Request) {
	var hl Health
	if h.opts.LastVaultInteraction != nil {
		if t := h.opts.LastVaultInteraction(); !t.IsZero() {
			hl.LastVaultInteraction = t.Unix()
		}
	}
	writeJSON(w, http.StatusOK, hl)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // our own fixed types; cannot happen
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding failed","code":"internal"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
