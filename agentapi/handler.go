package agentapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/reqpath"
)

// defaultMaxBodyBytes is the default limit on request bodies, 4 KiB.
const defaultMaxBodyBytes = 4 << 10

// HandlerOptions configures the handler NewHandler returns.
type HandlerOptions struct {
	// OpenHorizon selects the routes, bodies and status codes of the API
	// Open Horizon's agent ships (open-horizon/anax resource/secret_api.go),
	// which services such as open-horizon/examples' helloSecretWorld call:
	//
	//	GET  /api/v1/secrets                       200 ["<name>",...]; 404 (empty body) if none updated
	//	GET  /api/v1/secrets/{name}                200 {"key":"…","value":"…"}; 404 not a secret of the caller
	//	POST /api/v1/secrets/{name}?received=true  201; 404 not a secret of the caller
	//
	// 403 with the body "Unauthorized" for missing or bad credentials; 400
	// for an empty or nested name and for a received parameter that is not
	// true (strconv.ParseBool: "true", "1", "t", "T", "TRUE", "True");
	// 405 for other methods; error bodies are plain text sentences. A raw
	// or value-only secret is answered, as anax answers the key/value it
	// received, with the key it was delivered with (its "key", or the name
	// of its one key; kept in the instance's metadata, across restarts) and
	// the file's text as the value. A JSON secret's file is mapped onto
	// {"key","value"}: a file holding {"key":…,"value":…} (what anax
	// writes) gives those two, one entry gives its name and value, several
	// entries give an empty key and the file's text as the value. A binary
	// raw file cannot be carried and is answered 500. Unlike anax, a POST without received=true is answered 400 (anax
	// answers 200 and records nothing) and a storage failure never leaves a
	// request half answered.
	//
	// False (the default) serves the API of the edgesecrets design, the
	// design profile:
	//
	//	GET  /secrets                       200 ["<name>",...]; 404 if none updated
	//	GET  /secrets/{name}                200 {"<name>":{"details":"<base64 of the file>"}}
	//	POST /secrets/{name}?received=true  201
	//
	// 401 for missing or bad credentials, 400 for a name that is not one of
	// the caller's secrets, JSON error bodies {"error":"<sentence>"}.
	OpenHorizon bool
	// Authenticate checks the HTTP Basic credentials a service presents
	// and returns the instance they belong to, or false. Required.
	//
	// A TokenTable's Authenticate method takes the instance id as the user
	// id and the instance's token as the password. Open Horizon's agent
	// gives each service container ESS credentials instead, a file
	// {"id":…,"token":…} mounted at $HZN_ESS_AUTH: the id is the service's
	// (its URL, the same for every instance of the service) and the token is
	// the instance's own; the agent finds the instance by the token
	// (open-horizon/anax resource/secret_api.go, FindMSSInstWithESSToken, and
	// resource/authentication_manager.go). An embedder that keeps such
	// credentials supplies its own function over them.
	//
	// The function must compare tokens in constant time and be safe for
	// concurrent use; the instance id returned must be one the Store knows.
	Authenticate func(ctx context.Context, user, password string) (instanceID string, ok bool)
	// Prefix is the path the API is mounted under, without a trailing
	// slash: with "/api", the design profile serves /api/secrets and
	// /api/secrets/{name}, the Open Horizon profile /api/api/v1/secrets...
	// Default: "" (the design API at /secrets, Open Horizon's at
	// /api/v1/secrets). Mounting the handler with http.StripPrefix works as
	// well; an http.ServeMux pattern does not (see the package
	// documentation, "Serving the API").
	Prefix string
	// MaxBodyBytes limits request bodies (the API reads none; a larger one
	// is answered 413). Zero means 4096 bytes (4 KiB).
	MaxBodyBytes int64
	// Logger receives instance ids, routes, secret names and status codes,
	// never values or tokens; a failed authentication is logged without the
	// user id it presented. Default: discard.
	Logger *slog.Logger
}

// handler serves the service-facing secrets API for the instances of a
// Store, in one of two profiles (HandlerOptions.OpenHorizon).
type handler struct {
	store       *Store
	auth        func(ctx context.Context, user, password string) (string, bool)
	openHorizon bool
	dialect     dialect
	prefix      string
	maxBody     int64
	log         *slog.Logger
}

// NewHandler returns the service-facing secrets API for the instances of
// store, in one of two profiles (HandlerOptions.OpenHorizon). See the
// package documentation for the routes and status codes.
func NewHandler(store *Store, opts HandlerOptions) (http.Handler, error) {
	switch {
	case store == nil:
		return nil, fmt.Errorf("agentapi: handler: %w: store is nil", edgesecrets.ErrInvalid)
	case opts.Authenticate == nil:
		return nil, fmt.Errorf("agentapi: handler: %w: HandlerOptions.Authenticate is nil (a TokenTable's Authenticate, for instance)", edgesecrets.ErrInvalid)
	case opts.Prefix != "" && (!strings.HasPrefix(opts.Prefix, "/") || strings.HasSuffix(opts.Prefix, "/")):
		return nil, fmt.Errorf("agentapi: handler: %w: prefix %q must start and not end with a slash", edgesecrets.ErrInvalid, opts.Prefix)
	case opts.MaxBodyBytes < 0:
		return nil, fmt.Errorf("agentapi: handler: %w: MaxBodyBytes is negative", edgesecrets.ErrInvalid)
	}
	h := &handler{store: store, auth: opts.Authenticate, openHorizon: opts.OpenHorizon, dialect: dialectOf(opts.OpenHorizon), prefix: opts.Prefix, maxBody: opts.MaxBodyBytes, log: opts.Logger}
	if h.maxBody == 0 {
		h.maxBody = defaultMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// errorResponse is the body of every error answer.
type errorResponse struct {
	Error string `json:"error"`
}

const secretsPath = "/secrets"

// receivedParam is the query parameter of an acknowledgement,
// POST .../secrets/{name}?received=true.
const receivedParam = "received"

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The path as the service sent it, whatever is in front: a
	// non-canonical one may not be served as another name (reqpath).
	// Credentials come first, as in both profiles: a caller without them
	// is refused by the profile, before any name is read.
	if err := cmp.Or(reqpath.Check(r), checkQuery(r)); err != nil {
		if id, ok := h.authenticate(r); ok {
			h.dialect.fail(h, w, r, id, http.StatusBadRequest, err.Error())
			return
		}
	}
	if h.openHorizon {
		h.serveOpenHorizon(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, h.prefix)
	if !ok || (rest != secretsPath && !strings.HasPrefix(rest, secretsPath+"/")) {
		h.fail(w, r, "", http.StatusNotFound, "no such API path; the API serves "+h.prefix+secretsPath)
		return
	}
	id, ok := h.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="secrets", charset="UTF-8"`)
		h.fail(w, r, "", http.StatusUnauthorized, "missing or bad credentials: use HTTP Basic with the instance id and token")
		return
	}
	if !h.readBody(w, r) {
		h.fail(w, r, id, http.StatusRequestEntityTooLarge, h.tooLarge())
		return
	}
	if rest == secretsPath {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			h.fail(w, r, id, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed; use GET")
			return
		}
		h.listUpdated(w, r, id)
		return
	}
	name := rest[len(secretsPath)+1:]
	switch r.Method {
	case http.MethodGet:
		h.getSecret(w, r, id, name)
	case http.MethodPost:
		h.acknowledge(w, r, id, name)
	default:
		w.Header().Set("Allow", http.MethodGet+", "+http.MethodPost)
		h.fail(w, r, id, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed; use GET or POST")
	}
}

// checkQuery refuses a query string other than POST's received
// parameter: a service that sends a secret name holding '?' unescaped
// ("q?x=1") names "q" in the path, and must not be answered about it.
func checkQuery(r *http.Request) error {
	if !reqpath.HasQuery(r) {
		return nil
	}
	if r.Method == http.MethodPost {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err == nil && len(q) == 1 && q.Has(receivedParam) {
			return nil
		}
		return errors.New("the request has a query string other than received=true (a '?' in a secret name must be sent escaped)")
	}
	return errors.New("the request has a query string, which the route does not take (a '?' in a secret name must be sent escaped)")
}

// authenticate checks the HTTP Basic credentials and returns the instance
// id. The presented user id is never logged: a client may have swapped the
// id and token fields.
func (h *handler) authenticate(r *http.Request) (string, bool) {
	user, password, ok := r.BasicAuth()
	if !ok || user == "" {
		return "", false
	}
	id, ok := h.auth(r.Context(), user, password)
	return id, ok && id != ""
}

// readBody consumes the request body within the limit (the API uses
// none) and reports whether it fit.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) bool {
	if r.ContentLength > h.maxBody {
		return false
	}
	_, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, h.maxBody))
	var tooLarge *http.MaxBytesError
	return !errors.As(err, &tooLarge)
}

func (h *handler) tooLarge() string {
	return fmt.Sprintf("request body is larger than %d bytes", h.maxBody)
}

// listUpdated serves GET /secrets.
func (h *handler) listUpdated(w http.ResponseWriter, r *http.Request, id string) {
	info, _ := h.store.Instance(id)
	if len(info.Updated) == 0 {
		h.fail(w, r, id, http.StatusNotFound, "no secrets have been updated")
		return
	}
	h.reply(w, r, id, "", http.StatusOK, info.Updated)
}

// getSecret serves GET /secrets/{name}.
func (h *handler) getSecret(w http.ResponseWriter, r *http.Request, id, name string) {
	content, err := h.store.ReadSecret(r.Context(), id, name)
	if err != nil {
		h.secretError(w, r, id, name, err)
		return
	}
	writeJSON(w, http.StatusOK, secretBody(name, content))
	h.log.Debug("secrets API", "instance", id, "method", r.Method, "secret", name, "status", http.StatusOK)
}

// secretBody is the body of GET /secrets/{name},
// {"<name>":{"details":"<base64 of content>"}}, built directly: this is the
// API's hot path.
func secretBody(name string, content []byte) []byte {
	quoted, _ := json.Marshal(name) // a string always encodes
	b := make([]byte, 0, len(quoted)+base64.StdEncoding.EncodedLen(len(content))+16)
	b = append(b, '{')
	b = append(b, quoted...)
	b = append(b, `:{"details":"`...)
	b = base64.StdEncoding.AppendEncode(b, content)
	return append(b, `"}}`...)
}

// dialect is what the profiles' answers to the routes they share differ in.
type dialect struct {
	// fail writes an error answer.
	fail func(h *handler, w http.ResponseWriter, r *http.Request, id string, status int, msg string)
	// notMine is the answer for a name that is not a secret of the caller.
	notMine func(name string) (status int, msg string)
	// received reports whether the received parameter says true.
	received func(v string) bool
}

// dialectOf returns the dialect of the Open Horizon profile or of the
// design's.
func dialectOf(openHorizon bool) dialect {
	if openHorizon {
		// anax's answers, resource/secret_api.go lines 237-250, 311-312.
		return dialect{
			fail:     (*handler).failText,
			notMine:  func(string) (int, string) { return http.StatusNotFound, ohSecretNotFound },
			received: func(v string) bool { b, err := strconv.ParseBool(v); return err == nil && b },
		}
	}
	return dialect{
		fail: (*handler).fail,
		notMine: func(name string) (int, string) {
			return http.StatusBadRequest, fmt.Sprintf("%s is not a secret of this service", quoteName(name))
		},
		received: func(v string) bool { return v == "true" },
	}
}

// acknowledge serves POST .../secrets/{name}?received=true.
func (h *handler) acknowledge(w http.ResponseWriter, r *http.Request, id, name string) {
	if v := r.URL.Query()[receivedParam]; len(v) != 1 || !h.dialect.received(v[0]) {
		h.dialect.fail(h, w, r, id, http.StatusBadRequest, "query parameter received must be true, once")
		return
	}
	if err := h.store.Acknowledge(r.Context(), id, name); err != nil {
		h.secretError(w, r, id, name, err)
		return
	}
	h.log.Debug("secrets API", "instance", id, "method", r.Method, "secret", name, "status", http.StatusCreated)
	w.WriteHeader(http.StatusCreated)
}

// secretError answers a failed read or acknowledgement of name.
func (h *handler) secretError(w http.ResponseWriter, r *http.Request, id, name string, err error) {
	switch {
	case errors.Is(err, edgesecrets.ErrInvalid), errors.Is(err, edgesecrets.ErrNotFound):
		status, msg := h.dialect.notMine(name)
		h.dialect.fail(h, w, r, id, status, msg)
	default:
		h.log.Error("secrets API: storage failure", "instance", id, "secret", name, "err", err)
		h.dialect.fail(h, w, r, id, http.StatusInternalServerError, "the agent could not read its secret storage")
	}
}

// reply writes a JSON answer.
func (h *handler) reply(w http.ResponseWriter, r *http.Request, id, name string, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		h.fail(w, r, id, http.StatusInternalServerError, "encoding the answer failed")
		return
	}
	writeJSON(w, status, b)
	h.log.Debug("secrets API", "instance", id, "method", r.Method, "secret", name, "status", status)
}

// fail writes a JSON error answer.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, id string, status int, msg string) {
	b, _ := json.Marshal(errorResponse{Error: msg})
	writeJSON(w, status, b)
	h.log.Debug("secrets API", "instance", id, "method", r.Method, "status", status, "error", msg)
}

// Header values of every answer, shared (net/http only reads them).
var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
	headerNoSniff = []string{"nosniff"}
)

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	hdr := w.Header()
	hdr["Content-Type"] = headerJSON
	hdr["Cache-Control"] = headerNoStore
	hdr["X-Content-Type-Options"] = headerNoSniff
	w.WriteHeader(status)
	_, _ = w.Write(body) // a failed write means the client is gone: nothing left to tell it
}
