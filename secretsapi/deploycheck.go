package secretsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
	"github.com/edgesecrets/edgesecrets/internal/ohversion"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// deployCheckRequest is the body of GET /deploycheck/secretbindingcompatible,
// the fields of anax's compcheck.SecretBindingCheck this agbot reads
// (open-horizon/anax compcheck/secretbinding_check.go lines 20-32). Other
// fields are ignored, as anax ignores them.
type deployCheckRequest struct {
	NodeID           string            `json:"node_id"`
	NodeArch         string            `json:"node_arch"`
	NodeOrg          string            `json:"node_org"`
	BusinessPolicyID string            `json:"business_policy_id"`
	BusinessPolicy   json.RawMessage   `json:"business_policy"`
	PatternID        string            `json:"pattern_id"`
	Pattern          json.RawMessage   `json:"pattern"`
	Services         []json.RawMessage `json:"service"`
}

// deployCheckResponse is anax's compcheck.CompCheckOutput
// (compcheck/comp_check.go lines 147-151) with our full report added.
type deployCheckResponse struct {
	Compatible bool              `json:"compatible"`
	Reason     map[string]string `json:"reason"`
	// Problems is every problem found, with its code (binding.Report).
	Problems []binding.Problem `json:"problems"`
}

// deployCheck serves GET /deploycheck/secretbindingcompatible: it
// validates the secret bindings of the deployment policy or pattern in the
// body against the service definitions in the body (or from
// Options.Resolver), checking that each bound vault secret exists as the
// caller may see it (the policy's ActionExists). The deployment policy or
// pattern must be in the body: this agbot does not read the exchange.
func (h *handler) deployCheck(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, OPTIONS")
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusOK)
			return
		}
		writeJSON(w, http.StatusMethodNotAllowed, fmt.Sprintf("Method %s is not allowed here; use GET.", r.Method))
		return
	}
	caller, ok := h.authenticate(w, r, ohError)
	if !ok {
		return
	}
	body, err := h.readBody(w, r)
	switch {
	case errors.Is(err, errBodyTooLarge):
		writeJSON(w, http.StatusBadRequest, fmt.Sprintf("Request body is larger than %d bytes.", h.opts.MaxBodyBytes))
		return
	case err != nil:
		writeJSON(w, http.StatusBadRequest, msgBodyUnread)
		return
	case len(bytes.TrimSpace(body)) == 0:
		writeJSON(w, http.StatusBadRequest, "No input found.")
		return
	}
	target, resolver, org, err := h.decodeDeployCheck(caller, body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, err.Error())
		return
	}
	if org != caller.Org {
		writeJSON(w, http.StatusForbidden, fmt.Sprintf("Permission denied, user %q cannot check secrets in organization %q", caller.ID, org))
		return
	}
	var checker binding.ExistenceChecker
	if h.opts.Store != nil {
		checker = callerChecker{h: h, caller: caller, org: org}
	}
	report, err := binding.Validate(r.Context(), target, binding.Options{Resolver: resolver, Checker: checker, Logger: h.log})
	if err != nil {
		if r.Context().Err() == nil {
			h.log.Error("deploycheck failed", "caller", caller.String(), "err", err)
			writeJSON(w, http.StatusInternalServerError, "The secret binding check failed; see the agbot's log.")
		}
		return
	}
	h.log.Info("deploycheck", "caller", caller.String(), "org", org, "compatible", report.Err() == nil, "problems", len(report.Problems))
	writeJSON(w, http.StatusOK, deployCheckAnswer(report))
}

// decodeDeployCheck reads the request: the target with the node's
// architecture applied, the resolver of its services, and the
// organisation whose secrets are checked (node_org, else the caller's).
// Errors are the sentences of the 400 answer.
func (h *handler) decodeDeployCheck(c Caller, body []byte) (binding.Target, binding.Resolver, string, error) {
	var req deployCheckRequest
	if err := json.Unmarshal(body, &req); err != nil {
		//lint:ignore ST1005 anax's exact user-facing message, which clients compare
		return binding.Target{}, nil, "", fmt.Errorf("Input body couldn't be deserialized to SecretBindingCheck object. %s", jsonproblem.Describe(err)) //nolint:staticcheck // ST1005: anax's exact message
	}
	hasPolicy := len(req.BusinessPolicy) > 0 && string(req.BusinessPolicy) != "null"
	hasPattern := len(req.Pattern) > 0 && string(req.Pattern) != "null"
	var target binding.Target
	switch {
	case (hasPolicy || req.BusinessPolicyID != "") && (hasPattern || req.PatternID != ""):
		//lint:ignore ST1005 anax's exact user-facing message, which clients compare
		return target, nil, "", errors.New("Deployment policy and pattern are mutually exclusive.") //nolint:staticcheck // ST1005: anax's exact message
	case hasPolicy:
		p, err := binding.DecodeDeploymentPolicy(bytes.NewReader(req.BusinessPolicy))
		if err != nil {
			return target, nil, "", fmt.Errorf("business_policy: %w", err)
		}
		target = p
	case hasPattern:
		p, err := binding.DecodePattern(bytes.NewReader(req.Pattern))
		if err != nil {
			return target, nil, "", fmt.Errorf("pattern: %w", err)
		}
		target = p
	case req.BusinessPolicyID != "" || req.PatternID != "":
		return target, nil, "", errors.New("give the deployment policy (business_policy) or the pattern (pattern) in the request: this agbot does not read them from the exchange by id")
	default:
		//lint:ignore ST1005 anax's exact user-facing message, which clients compare
		return target, nil, "", errors.New("Neither deployment policy nor pattern is specified.") //nolint:staticcheck // ST1005: anax's exact message
	}
	if req.NodeArch != "" {
		kept := target.Services[:0]
		for _, s := range target.Services {
			if ohversion.ArchMatches(s.Arch, req.NodeArch) {
				s.Arch = req.NodeArch
				kept = append(kept, s)
			}
		}
		if len(kept) == 0 {
			//lint:ignore ST1005 anax's exact user-facing message, which clients compare
			return target, nil, "", fmt.Errorf("No service versions with architecture %s specified in the deployment policy or pattern.", req.NodeArch) //nolint:staticcheck // ST1005: anax's exact message
		}
		target.Services = kept
	}
	defs := make([]*binding.ServiceDefinition, 0, len(req.Services))
	for i, raw := range req.Services {
		d, err := binding.DecodeServiceDefinition(bytes.NewReader(raw))
		if err != nil {
			return target, nil, "", fmt.Errorf("service %d: %w", i+1, err)
		}
		defs = append(defs, d)
	}
	catalog, err := binding.NewCatalog(defs...)
	if err != nil {
		return target, nil, "", fmt.Errorf("service: %w", err)
	}
	resolver := catalog
	if h.opts.Resolver != nil {
		resolver = resolvers{catalog, h.opts.Resolver}
	}
	org := req.NodeOrg
	if org == "" {
		// anax takes the node's organisation from node_id, "<org>/<node>"
		// (compcheck/secretbinding_check.go line 133), else the caller's
		// (agreementbot/secure_api.go line 2324).
		if o, _, found := strings.Cut(req.NodeID, "/"); found {
			org = o
		} else {
			org = c.Org
		}
	}
	return target, resolver, org, nil
}

// resolvers asks each resolver in turn until one knows the service.
type resolvers []binding.Resolver

func (rs resolvers) ServiceVersions(ctx context.Context, q binding.ServiceQuery) ([]*binding.ServiceDefinition, error) {
	for _, r := range rs {
		defs, err := r.ServiceVersions(ctx, q)
		if err != nil || len(defs) > 0 {
			return defs, err
		}
	}
	return nil, nil
}

// callerChecker checks existence as the caller may see it: a secret the
// policy hides from the caller is reported forbidden, whether or not it
// exists.
type callerChecker struct {
	h      *handler
	caller Caller
	org    string
}

func (c callerChecker) SecretExists(ctx context.Context, name binding.VaultSecretName) (bool, error) {
	if !Authorize(c.caller, c.org, name, ActionExists) {
		return false, &secretstore.Error{Op: "stat", Name: name.String(), Kind: edgesecrets.ErrPermission,
			Err: fmt.Errorf("user %q may not check it", c.caller.ID)}
	}
	return c.h.exists(ctx, c.org, name)
}

// deployCheckAnswer turns a report into anax's output: per service
// visited, "Compatible" (with any warnings) or "Secret Binding
// Incompatible: " and the errors (compcheck/secretbinding_check.go lines
// 209-210, 259-270).
func deployCheckAnswer(rep *binding.Report) deployCheckResponse {
	errs, warns := map[string][]string{}, map[string][]string{}
	for _, p := range rep.Problems {
		k := serviceKey(p.Service)
		if p.Severity == "error" {
			errs[k] = append(errs[k], p.Message)
		} else {
			warns[k] = append(warns[k], p.Message)
		}
	}
	out := deployCheckResponse{Compatible: rep.Err() == nil, Reason: map[string]string{}, Problems: rep.Problems}
	if out.Problems == nil {
		out.Problems = []binding.Problem{}
	}
	for _, s := range rep.Services {
		k := serviceKey(s)
		switch {
		case len(errs[k]) > 0:
			out.Reason[k] = "Secret Binding Incompatible: " + strings.Join(errs[k], " ")
		case len(warns[k]) > 0:
			out.Reason[k] = "Compatible, Warning: " + strings.Join(warns[k], " ")
		default:
			out.Reason[k] = "Compatible"
		}
	}
	// Problems of a binding entry on its own name no visited service.
	for k, msgs := range errs {
		if _, ok := out.Reason[k]; !ok {
			out.Reason[k] = "Secret Binding Incompatible: " + strings.Join(msgs, " ")
		}
	}
	return out
}

// serviceKey is anax's service id: "<org>/<url>_<version>_<arch>".
func serviceKey(s agreement.ServiceRef) string {
	return s.Org + "/" + s.URL + "_" + s.Version + "_" + s.Arch
}
