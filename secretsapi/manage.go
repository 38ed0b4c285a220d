package secretsapi

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/ohsecret"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Methods of the Open Horizon routes (agreementbot/secure_api.go lines
// 195-203).
const (
	allowDir  = "LIST, OPTIONS"
	allowName = "GET, LIST, PUT, POST, DELETE, OPTIONS"
)

// ohError is the body of the Open Horizon routes' errors: a JSON string,
// as anax's writeResponse writes its messages (and hzn unquotes them,
// cli/secrets_manager/secrets_manager.go lines 132-135).
func ohError(msg, _ string) any { return msg }

// manage serves the Open Horizon secrets-manager routes under /org/. The
// checks run in this order, so that nothing a caller may not see decides
// an answer: route (404), OPTIONS (200, before credentials), credentials
// (401), store configured (503), name (400), method (405), policy (403),
// and only then the store.
func (h *handler) manage(w http.ResponseWriter, r *http.Request) {
	t, perr := parseOrgPath(r.URL.Path)
	if errors.Is(perr, errNoRoute) {
		writeJSON(w, http.StatusNotFound, "404 page not found")
		return
	}
	allowed := allowName
	if perr == nil && t.dir {
		allowed = allowDir
	}
	if r.Method == http.MethodOptions && perr == nil {
		w.Header().Set("Allow", allowed)
		w.WriteHeader(http.StatusOK)
		return
	}
	caller, ok := h.authenticate(w, r, ohError)
	if !ok {
		return
	}
	defer h.dropUnread(w, r)
	if h.opts.Store == nil {
		h.log.Warn("secrets request, but no secret store is configured", "caller", caller.String())
		writeJSON(w, http.StatusServiceUnavailable, msgNoStore)
		return
	}
	if perr != nil {
		writeJSON(w, http.StatusBadRequest, fmt.Sprintf("Incorrect secret name provided: %s.", perr))
		return
	}
	act, ok := actionOf(r.Method, t)
	if !ok {
		w.Header().Set("Allow", allowed)
		writeJSON(w, http.StatusMethodNotAllowed, fmt.Sprintf("Method %s is not allowed here; use %s.", r.Method, allowed))
		return
	}
	log := h.log.With("caller", caller.String(), "org", t.org, "vaultSecret", t.String(), "action", act.String())
	// allsecrets lists whatever the caller may list, name by name; the
	// caller must still be allowed to list its organisation's secrets.
	scopeName := t.name
	if t.all {
		scopeName = binding.VaultSecretName{}
	}
	if !Authorize(caller, t.org, scopeName, act) {
		log.Info("secrets request refused by the policy")
		writeJSON(w, http.StatusForbidden, deniedMessage(caller, act, t))
		return
	}
	if act == ActionList {
		h.list(w, r, log, caller, t)
		return
	}
	path, err := t.name.StorePath(t.org)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, fmt.Sprintf("Incorrect secret name provided: %s.", err))
		return
	}
	switch act {
	case ActionExists:
		exists, err := h.exists(r.Context(), t.org, t.name)
		if err != nil {
			h.storeFailure(w, r, log, err, ohError)
			return
		}
		writeJSON(w, http.StatusOK, Existence{Exists: exists})
	case ActionRead:
		h.read(w, r, log, t, path)
	case ActionWrite:
		h.write(w, r, log, path)
	case ActionDelete:
		h.delete(w, r, log, t, path)
	}
}

// actionOf maps a method on a target to the action it is.
func actionOf(method string, t target) (Action, bool) {
	if t.dir {
		return ActionList, method == MethodList
	}
	switch method {
	case MethodList:
		return ActionExists, true
	case http.MethodGet:
		return ActionRead, true
	case http.MethodPut, http.MethodPost:
		return ActionWrite, true
	case http.MethodDelete:
		return ActionDelete, true
	}
	return 0, false
}

// list serves LIST on a directory: the names under it, relative to it;
// /allsecrets: every name of the organisation the caller may list,
// relative to the organisation (anax: relative names, secure_api.go
// listVaultSecret, lines 2247-2272; agreementbot/secrets/vault/vault.go
// ListOrgNodeSecrets trims the directory).
func (h *handler) list(w http.ResponseWriter, r *http.Request, log *slog.Logger, c Caller, t target) {
	prefix := t.storePrefix()
	full, err := h.opts.Store.List(r.Context(), prefix)
	if err != nil {
		h.storeFailure(w, r, log, err, ohError)
		return
	}
	names := []string{}
	for _, p := range full {
		rel := strings.TrimPrefix(p, t.org+"/")
		n, err := binding.ParseVaultSecretName(rel)
		switch {
		case err != nil:
			log.Debug("store name that is not a vault secret name skipped", "name", p)
		case t.all:
			if Authorize(c, t.org, n, ActionList) {
				names = append(names, rel)
			}
		case t.name.String() == "":
			// The organisation's own secrets, not those under user/ and
			// node/ (vault.go listSecrets filters them out at the top).
			if n.User == "" && n.Node == "" {
				names = append(names, rel)
			}
		default:
			names = append(names, strings.TrimPrefix(p, prefix))
		}
	}
	log.Debug("secrets listed", "count", len(names))
	writeJSON(w, http.StatusOK, names)
}

// read serves GET on a secret: {"key":…,"value":…}.
func (h *handler) read(w http.ResponseWriter, r *http.Request, log *slog.Logger, t target, path string) {
	s, err := h.opts.Store.Get(r.Context(), path)
	if errors.Is(err, edgesecrets.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, notFoundMessage(t))
		return
	}
	if err != nil {
		h.storeFailure(w, r, log, err, ohError)
		return
	}
	d, err := ohsecret.FromData(s.Data)
	if err != nil {
		log.Warn("secret cannot be served as key/value", "err", err)
		writeJSON(w, http.StatusInternalServerError, fmt.Sprintf("Secret %q cannot be returned as a key and a value: %s.", t.String(), err))
		return
	}
	log.Info("secret read")
	writeJSON(w, http.StatusOK, d)
}

// write serves PUT and POST on a secret: the body {"key":…,"value":…}
// becomes the secret's data. Its labels (Vault custom_metadata, AWS tags)
// are kept.
func (h *handler) write(w http.ResponseWriter, r *http.Request, log *slog.Logger, path string) {
	limit := h.opts.Store.MaxValueBytes()
	body, err := h.readBody(w, r)
	switch {
	case errors.Is(err, errBodyTooLarge):
		log.Info("secret write refused: body too large", "contentLength", r.ContentLength)
		writeJSON(w, http.StatusBadRequest, h.bodyTooLarge(limit))
		return
	case err != nil:
		log.Info("secret write refused: the body could not be read", "err", err)
		writeJSON(w, http.StatusBadRequest, msgBodyUnread)
		return
	}
	d, err := ohsecret.Decode(bytes.NewReader(body), len(body))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, fmt.Sprintf("Request body parse error, %s.", err))
		return
	}
	// The backend's limit, checked before anything is written (Store.Put
	// checks it too).
	if size := len(ohsecret.KeyMember) + len(d.Key) + len(ohsecret.ValueMember) + len(d.Value); limit > 0 && size > limit {
		log.Info("secret write refused: over the store's limit", "bytes", size, "limit", limit)
		writeJSON(w, http.StatusBadRequest, fmt.Sprintf("The secret is %d bytes, over the secrets provider's limit of %d bytes per secret.", size, limit))
		return
	}
	var labels map[string]string
	meta, err := h.opts.Store.Stat(r.Context(), path)
	switch {
	case err == nil:
		labels = meta.Labels
	case !errors.Is(err, edgesecrets.ErrNotFound):
		h.storeFailure(w, r, log, err, ohError)
		return
	}
	changed, err := h.opts.Store.Put(r.Context(), &secretstore.Secret{Name: path, Data: d.Data(), Labels: labels}, secretstore.PutOptions{})
	if err != nil {
		h.storeFailure(w, r, log, err, ohError)
		return
	}
	log.Info("secret written", "changed", changed)
	writeJSON(w, http.StatusCreated, "Secret created/updated.")
}

// delete serves DELETE on a secret: 404 when it does not exist, as anax
// answers (agreementbot/secrets/vault/vault.go deleteSecret lists it
// first).
func (h *handler) delete(w http.ResponseWriter, r *http.Request, log *slog.Logger, t target, path string) {
	exists, err := h.exists(r.Context(), t.org, t.name)
	if err != nil {
		h.storeFailure(w, r, log, err, ohError)
		return
	}
	if !exists {
		writeJSON(w, http.StatusNotFound, notFoundMessage(t))
		return
	}
	if err := h.opts.Store.Delete(r.Context(), path); err != nil {
		h.storeFailure(w, r, log, err, ohError)
		return
	}
	log.Info("secret deleted")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// bodyTooLarge is the 400 answer to a body over Options.MaxBodyBytes. hzn
// handles 201, 400, 401, 403 and 503 on a write and prints a 400's text
// (cli/secrets_manager/secrets_manager.go lines 247-256 at commit
// 2f3fa5a), not 413; the text names the store's limit per secret when it
// has one.
func (h *handler) bodyTooLarge(limit int) string {
	if limit > 0 {
		return fmt.Sprintf("Request body is larger than %d bytes; the secrets provider takes secrets of up to %d bytes.", h.opts.MaxBodyBytes, limit)
	}
	return fmt.Sprintf("Request body is larger than %d bytes.", h.opts.MaxBodyBytes)
}

// notFoundMessage is anax's (secure_api.go errCheck, lines 1209-1214).
func notFoundMessage(t target) string {
	return fmt.Sprintf("No secret(s) found under secret name %q", anaxName(t))
}
