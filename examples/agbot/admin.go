package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Limits of the admin API and the preload file.
const (
	maxAdminBody    = 64 << 10
	maxPreloadFile  = 1 << 20
	adminPathPrefix = "/admin/secrets/"
)

// adminHandler is the demo's stand-in for a store administrator's own
// tools (the Vault CLI, the AWS console): it writes and deletes secrets in
// the agbot's store, so a rotation can be shown with the memory store.
// It never returns a value.
//
//	PUT    /admin/secrets/{name...}  body {"<key>": "<value>", ...}  → 200 {"changed": bool}
//	DELETE /admin/secrets/{name...}                                 → 204
//
// Every request needs "Authorization: Bearer <admin token>".
type adminHandler struct {
	store *secretstore.Store
	token string
	log   *slog.Logger
}

func (h *adminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !bearerIs(r, h.token) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong admin token"})
		return
	}
	name := strings.TrimPrefix(r.URL.Path, adminPathPrefix)
	switch r.Method {
	case http.MethodPut:
		data, err := decodeData(http.MaxBytesReader(w, r.Body, maxAdminBody), maxAdminBody)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
			return
		}
		changed, err := h.store.Put(r.Context(), &secretstore.Secret{Name: name, Data: data}, secretstore.PutOptions{})
		if err != nil {
			h.storeError(w, err)
			return
		}
		h.log.Info("admin wrote a secret", slog.String("secret", name), slog.Any("keys", data.Keys()), slog.Bool("changed", changed))
		writeJSON(w, http.StatusOK, map[string]bool{"changed": changed})
	case http.MethodDelete:
		err := h.store.Delete(r.Context(), name)
		if err != nil {
			h.storeError(w, err)
			return
		}
		h.log.Info("admin deleted a secret", slog.String("secret", name))
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "PUT, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use PUT or DELETE"})
	}
}

// storeError answers a store error with its status. Store errors name the
// operation and the secret, never a value.
func (h *adminHandler) storeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch edgesecrets.KindOf(err) {
	case edgesecrets.ErrInvalid: //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
		status = http.StatusBadRequest
	case edgesecrets.ErrPermission:
		status = http.StatusForbidden
	case edgesecrets.ErrConflict:
		status = http.StatusConflict
	case edgesecrets.ErrUnavailable:
		status = http.StatusServiceUnavailable
	}
	h.log.Warn("admin request failed", slog.String("err", err.Error()))
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// decodeData decodes a secret's data given as a JSON object of strings.
// Errors never quote the input.
func decodeData(r io.Reader, limit int) (edgesecrets.Data, error) {
	var m map[string]string
	if err := jsonproblem.Decode(r, limit, &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, errors.New("want a JSON object with at least one key")
	}
	data := edgesecrets.Data{}
	for k, v := range m {
		if k == "" {
			return nil, errors.New("a key is empty")
		}
		data[k] = []byte(v)
	}
	return data, nil
}

// preload writes the secrets of a preload file into store:
//
//	{"<store name>": {"<key>": "<value>", ...}, ...}
func preload(ctx context.Context, store *secretstore.Store, path string, log *slog.Logger) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := jsonproblem.Decode(bytes.NewReader(b), maxPreloadFile, &raw); err != nil {
		return fmt.Errorf("preload file %s: %w", path, err)
	}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		data, err := decodeData(bytes.NewReader(raw[name]), maxPreloadFile)
		if err != nil {
			return fmt.Errorf("preload file %s: secret %q: %w", path, name, err)
		}
		if _, err := store.Put(ctx, &secretstore.Secret{Name: name, Data: data}, secretstore.PutOptions{}); err != nil {
			return fmt.Errorf("preload file %s: %w", path, err)
		}
		log.Info("preloaded a secret", slog.String("secret", name), slog.Any("keys", data.Keys()))
	}
	return nil
}

// bearerIs reports, in constant time, whether r carries "Authorization:
// Bearer <token>".
func bearerIs(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client is gone
}
