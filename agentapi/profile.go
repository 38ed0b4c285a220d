package agentapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/edgesecrets/edgesecrets/internal/ohsecret"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Profile selects the wire form of the service-facing API.
type Profile int

const (
	// ProfileDesign is the API of the edgesecrets design:
	//
	//	GET  /secrets                       200 ["<name>",...]; 404 if none updated
	//	GET  /secrets/{name}                200 {"<name>":{"details":"<base64 of the file>"}}
	//	POST /secrets/{name}?received=true  201
	//
	// 401 for missing or bad credentials, 400 for a name that is not one of
	// the caller's secrets, JSON error bodies {"error":"<sentence>"}.
	ProfileDesign Profile = iota
	// ProfileOpenHorizon is the API Open Horizon's agent ships
	// (open-horizon/anax resource/secret_api.go), which services such as
	// open-horizon/examples' helloSecretWorld call:
	//
	//	GET  /api/v1/secrets                       200 ["<name>",...]; 404 (empty body) if none updated
	//	GET  /api/v1/secrets/{name}                200 {"key":"…","value":"…"}; 404 not a secret of the caller
	//	POST /api/v1/secrets/{name}?received=true  201; 404 not a secret of the caller
	//
	// 403 with the body "Unauthorized" for missing or bad credentials; 400
	// for an empty or nested name and for a received parameter that is not
	// true (strconv.ParseBool: "true", "1", "t", "T", "TRUE", "True");
	// 405 for other methods; error bodies are plain text sentences. A
	// secret's file content is mapped onto {"key","value"}: a file holding
	// {"key":…,"value":…} (what anax writes) gives those two, a JSON object
	// with one entry gives its name and value, any other text file (several
	// entries, a raw or value-only secret) gives an empty key and the file's
	// text as the value; a binary raw file cannot be carried and is answered
	// 500. Unlike anax, a POST without received=true is answered 400 (anax
	// answers 200 and records nothing) and a storage failure never leaves a
	// request half answered.
	ProfileOpenHorizon
)

// String returns "design" or "openhorizon".
func (p Profile) String() string {
	switch p {
	case ProfileDesign:
		return "design"
	case ProfileOpenHorizon:
		return "openhorizon"
	}
	return "Profile(" + strconv.Itoa(int(p)) + ")"
}

// ParseProfile parses "design" or "openhorizon", the forms String returns.
func ParseProfile(s string) (Profile, error) {
	switch s {
	case "design":
		return ProfileDesign, nil
	case "openhorizon":
		return ProfileOpenHorizon, nil
	}
	return 0, fmt.Errorf("agentapi: %w: profile %q: want design or openhorizon", secretstore.ErrInvalid, s)
}

// OpenHorizonPath is the Open Horizon profile's list route, relative to
// the handler's prefix (anax resource/secret_api.go, getSecretsURL).
const OpenHorizonPath = "/api/v1/secrets"

// The bodies anax writes (resource/secret_api.go lines 41, 250, 312).
const (
	ohUnauthorized   = "Unauthorized"
	ohSecretNotFound = "Secret not found."
)

// serveOpenHorizon serves ProfileOpenHorizon. The order of the checks is
// anax's: for the list, the method before the credentials (secret_api.go
// lines 112-127); for a secret, the credentials, then the name, then the
// method (lines 162-192, 332-338).
func (h *Handler) serveOpenHorizon(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, h.prefix)
	if !ok || (rest != OpenHorizonPath && !strings.HasPrefix(rest, OpenHorizonPath+"/")) {
		h.failText(w, r, "", http.StatusNotFound, "no such API path; the API serves "+h.prefix+OpenHorizonPath)
		return
	}
	if rest == OpenHorizonPath && r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		h.failText(w, r, "", http.StatusMethodNotAllowed, "")
		return
	}
	id, ok := h.authenticate(r)
	if !ok {
		h.failText(w, r, "", http.StatusForbidden, ohUnauthorized)
		return
	}
	if !h.readBody(w, r) {
		h.failText(w, r, id, http.StatusRequestEntityTooLarge, h.tooLarge())
		return
	}
	if rest == OpenHorizonPath {
		h.ohListUpdated(w, r, id)
		return
	}
	name := rest[len(OpenHorizonPath)+1:]
	switch {
	case name == "":
		h.failText(w, r, id, http.StatusBadRequest, "the secret name is missing: use "+h.prefix+OpenHorizonPath+"/<secret name>")
		return
	case strings.Contains(name, "/"):
		h.failText(w, r, id, http.StatusBadRequest, "a secret name is a single path element")
		return
	}
	switch r.Method {
	case http.MethodGet:
		h.ohGetSecret(w, r, id, name)
	case http.MethodPost:
		h.acknowledge(w, r, id, name)
	default:
		w.Header().Set("Allow", http.MethodGet+", "+http.MethodPost)
		h.failText(w, r, id, http.StatusMethodNotAllowed, "")
	}
}

// ohListUpdated serves GET /api/v1/secrets: the names, indented as anax
// indents them, or 404 with no body.
func (h *Handler) ohListUpdated(w http.ResponseWriter, r *http.Request, id string) {
	info, _ := h.store.Instance(id)
	if len(info.Updated) == 0 {
		h.failText(w, r, id, http.StatusNotFound, "")
		return
	}
	b, _ := json.MarshalIndent(info.Updated, "", "  ") // strings always encode
	writeJSON(w, http.StatusOK, b)
	h.log.Debug("secrets API", "instance", id, "method", r.Method, "status", http.StatusOK)
}

// ohGetSecret serves GET /api/v1/secrets/{name}.
func (h *Handler) ohGetSecret(w http.ResponseWriter, r *http.Request, id, name string) {
	content, err := h.store.ReadSecret(r.Context(), id, name)
	if err != nil {
		h.secretError(w, r, id, name, err)
		return
	}
	d, err := ohsecret.FromFile(content)
	if err != nil {
		h.log.Warn("secrets API: secret cannot be served as key/value", "instance", id, "secret", name, "err", err)
		h.failText(w, r, id, http.StatusInternalServerError, fmt.Sprintf("secret %s: %s", quoteName(name), err))
		return
	}
	writeJSON(w, http.StatusOK, d.Marshal())
	h.log.Debug("secrets API", "instance", id, "method", r.Method, "secret", name, "status", http.StatusOK)
}

// failText writes a plain-text answer, as anax does: an empty msg writes no
// body; other sentences end in a newline, except the 403 body, which anax
// writes bare.
func (h *Handler) failText(w http.ResponseWriter, r *http.Request, id string, status int, msg string) {
	hdr := w.Header()
	hdr["Cache-Control"] = headerNoStore
	hdr["X-Content-Type-Options"] = headerNoSniff
	if msg != "" {
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(status)
	switch msg {
	case "":
	case ohUnauthorized:
		_, _ = w.Write([]byte(msg)) // a failed write means the client is gone
	default:
		_, _ = w.Write([]byte(msg + "\n")) // a failed write means the client is gone
	}
	h.log.Debug("secrets API", "instance", id, "method", r.Method, "status", status, "error", msg)
}
