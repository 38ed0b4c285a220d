package main

import (
	"errors"
	"net/http"
	"strings"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
)

// Paths of the status routes.
const (
	statusHealthPath     = "/admin/health"
	statusAgreementsPath = "/admin/agreements/"
)

// statusHandler shows the delivery engine's state to the operator (admin
// token), names and reasons only, never a value:
//
//	GET /admin/health            delivery.Health: counts, store and state problems, and per
//	                             reason code the agreements held back (Health.Reasons)
//	GET /admin/agreements/{id}   delivery.Status of one agreement, with its Reason
type statusHandler struct {
	engine *delivery.Engine
	token  string
}

func (h *statusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case !bearerIs(r, h.token):
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong admin token"})
	case r.Method != http.MethodGet:
		w.Header().Set("Allow", http.MethodGet)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "only GET"})
	case r.URL.Path == statusHealthPath:
		writeJSON(w, http.StatusOK, h.engine.Health(r.Context()))
	default:
		id, _ := strings.CutPrefix(r.URL.Path, statusAgreementsPath)
		st, err := h.engine.Status(r.Context(), id)
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
