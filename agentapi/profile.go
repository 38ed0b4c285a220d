package agentapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/edgesecrets/edgesecrets/ohsecret"
)

// ohSecretsPath is the Open Horizon profile's list route, relative to the
// handler's prefix (anax resource/secret_api.go, getSecretsURL).
const ohSecretsPath = "/api/v1/secrets"

// The bodies anax writes (resource/secret_api.go lines 41, 250, 312).
const (
	ohUnauthorized   = "Unauthorized"
	ohSecretNotFound = "Secret not found."
)

// serveOpenHorizon serves the Open Horizon profile (HandlerOptions.OpenHorizon). The order of the checks is
// anax's: for the list, the method before the credentials (secret_api.go
// lines 112-127); for a secret, the credentials, then the name, then the
// method (lines 162-192, 332-338).
func (h *handler) serveOpenHorizon(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, h.prefix)
	if !ok || (rest != ohSecretsPath && !strings.HasPrefix(rest, ohSecretsPath+"/")) {
		h.failText(w, r, "", http.StatusNotFound, "no such API path; the API serves "+h.prefix+ohSecretsPath)
		return
	}
	if rest == ohSecretsPath && r.Method != http.MethodGet {
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
	if rest == ohSecretsPath {
		h.ohListUpdated(w, r, id)
		return
	}
	name := rest[len(ohSecretsPath)+1:]
	switch {
	case name == "":
		h.failText(w, r, id, http.StatusBadRequest, "the secret name is missing: use "+h.prefix+ohSecretsPath+"/<secret name>")
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
func (h *handler) ohListUpdated(w http.ResponseWriter, r *http.Request, id string) {
	info, _ := h.store.Instance(id)
	if len(info.Updated) == 0 {
		h.failText(w, r, id, http.StatusNotFound, "")
		return
	}
	b, _ := json.MarshalIndent(info.Updated, "", "  ") // strings always encode
	writeJSON(w, http.StatusOK, b)
	h.log.Debug("secrets API", "instance", id, "method", r.Method, "status", http.StatusOK)
}

// ohGetSecret serves GET /api/v1/secrets/{name}: for a secret whose file
// holds one value (raw, value_only), the key it was delivered with (kept in
// the instance's metadata) and the file's content as the value, as anax
// answers the key/value it received (resource/secret_api.go lines 300-311);
// for a JSON file, the body ohsecret.FromFile maps it to.
func (h *handler) ohGetSecret(w http.ResponseWriter, r *http.Request, id, name string) {
	m, content, err := h.store.readSecret(r.Context(), id, name)
	if err != nil {
		h.secretError(w, r, id, name, err)
		return
	}
	defer clear(content)
	var d ohsecret.Details
	if key, single := m.ohKey(name); single {
		d, err = ohsecret.FromValue(key, content)
	} else {
		d, err = ohsecret.FromFile(content)
	}
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
func (h *handler) failText(w http.ResponseWriter, r *http.Request, id string, status int, msg string) {
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
