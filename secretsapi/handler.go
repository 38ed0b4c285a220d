package secretsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/reqpath"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// defaultMaxBodyBytes bounds request bodies by default, 4 MiB: a secret of
// up to 2 MiB, or a deploycheck request with its service definitions.
const defaultMaxBodyBytes = 4 << 20

// Options configure the handler NewHandler returns.
type Options struct {
	// Store is the agbot's secret store, used with the agbot's own
	// credentials once the policy allows a request. Nil means the hub has
	// no secret store: every secrets request answers 503.
	Store *secretstore.Store
	// Authenticate is the authentication hook, asked about every request
	// but /health: it verifies the credentials the request carries (Open
	// Horizon checks them with the exchange, GET /orgs/{org}/users/{user})
	// and says who the caller is. Any error refuses the request (401); the
	// error is neither sent nor logged, so it may say anything. It must be
	// safe for concurrent use. Required.
	Authenticate func(ctx context.Context, c Credentials) (Caller, error)
	// Resolver supplies the service definitions a deploycheck request does
	// not carry (an exchange client). Optional: without it, deploycheck
	// requests must carry every service definition.
	Resolver binding.Resolver
	// LastVaultInteraction feeds /health. Default: Store.LastSuccess.
	LastVaultInteraction func() time.Time
	// LastDBHeartbeat feeds /health's lastDBHeartbeat: the agbot's last
	// database heartbeat, for an agbot that keeps one. Default: 0 (none).
	LastDBHeartbeat func() time.Time
	// Configuration is /health's "configuration". Arch defaults to
	// runtime.GOARCH.
	Configuration HealthConfiguration
	// MaxBodyBytes bounds request bodies (400 beyond, naming the store's
	// limit per secret, Store.MaxValueBytes). Zero means 4 MiB: a
	// secret of up to 2 MiB, or a deploycheck request with its service
	// definitions. The rest of a larger body is read and dropped before
	// the 400, so that a client still sending it reads the answer, up to
	// 8 × MaxBodyBytes (at least 8 MiB) in all; beyond, the answer closes
	// the connection.
	MaxBodyBytes int64
	// Operations, when set, is served on the operator routes
	// (AdminHealthPath, AgreementsPath, ReleasePath) to administrators
	// (RoleAdmin): the agbot's delivery engine. Nil leaves those paths to
	// Fallback.
	Operations Operations
	// Fallback serves every request outside the API's routes (/org/...,
	// /secrets/..., /health, /deploycheck/secretbindingcompatible), which
	// are answered 404 without it. With it, the handler is meant to be the
	// server's own handler (http.Server.Handler), in front of any mux:
	// it refuses a non-canonical path with 400 before any handler behind
	// it, a mux that would clean and redirect it included, sees the
	// request. See the package documentation, "Mounting".
	Fallback http.Handler
	// Logger receives one line per write and delete (caller and secret
	// name, never the value), per refused request and per store failure.
	// Default: discard.
	Logger *slog.Logger
}

// handler serves the agbot's secret APIs.
type handler struct {
	opts Options
	log  *slog.Logger
}

// NewHandler returns the handler of the agbot's secret APIs. See the
// package documentation for the routes, the status codes and the
// authorization policy.
func NewHandler(opts Options) (http.Handler, error) {
	if opts.Authenticate == nil {
		return nil, fmt.Errorf("secretsapi: %w: Options.Authenticate is nil", edgesecrets.ErrInvalid)
	}
	if opts.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("secretsapi: %w: Options.MaxBodyBytes is negative", edgesecrets.ErrInvalid)
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = defaultMaxBodyBytes
	}
	if opts.LastVaultInteraction == nil && opts.Store != nil {
		opts.LastVaultInteraction = opts.Store.LastSuccess
	}
	if opts.Configuration.Arch == "" {
		opts.Configuration.Arch = runtime.GOARCH
	}
	h := &handler{opts: opts, log: opts.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The path as the client sent it, whatever is in front: a
	// non-canonical one may not be served as another name (reqpath).
	if err := reqpath.Check(r); err != nil {
		h.badPath(w, r, err)
		return
	}
	p := r.URL.Path
	operator := h.opts.Operations != nil && isOperatorPath(p)
	ours := operator || p == HealthPath || p == DeployCheckPath || strings.HasPrefix(p, SecretsPath) || strings.HasPrefix(p, OrgPath)
	if !ours && h.opts.Fallback != nil {
		h.opts.Fallback.ServeHTTP(w, r)
		return
	}
	if (strings.HasPrefix(p, SecretsPath) || strings.HasPrefix(p, OrgPath)) && reqpath.HasQuery(r) {
		// hzn sends a name holding '?' unescaped: "q?x=1" is the path
		// "q" and a query; serving "q" would act on another name.
		h.badPath(w, r, errors.New(`the request has a query string, which no secret route takes (a '?' in a secret name must be sent escaped)`))
		return
	}
	if wait, ok := preferredWait(r.Header); ok && p != HealthPath {
		// The caller waits this long (RFC 7240): answer 503 by then
		// rather than an answer it no longer reads.
		ctx, cancel := context.WithTimeoutCause(r.Context(), wait, errWaitElapsed)
		defer cancel()
		r = r.WithContext(ctx)
		w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(wait/time.Second)))
	}
	switch {
	case p == HealthPath:
		h.health(w, r)
	case strings.HasPrefix(p, SecretsPath):
		h.designExists(w, r, strings.TrimPrefix(p, SecretsPath))
	case strings.HasPrefix(p, OrgPath):
		h.manage(w, r)
	case p == DeployCheckPath:
		h.deployCheck(w, r)
	case operator:
		h.operate(w, r)
	default:
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: "no such resource", Code: CodeNotFound})
	}
}

// badPath answers 400 to a request whose path is not canonical or that
// carries a query on a secret route, in the route's error body.
func (h *handler) badPath(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Info("secrets API request with a non-canonical path refused", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.EscapedPath(), "problem", err.Error())
	problem := pathProblem(err)
	if strings.HasPrefix(path.Clean(r.URL.Path)+"/", SecretsPath) {
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: problem, Code: CodeInvalidName})
		return
	}
	writeJSON(w, http.StatusBadRequest, "Incorrect secret name provided: "+problem+".")
}

// authenticate runs the hook and checks what it returns. On failure it
// answers 401 itself, with body(msg).
func (h *handler) authenticate(w http.ResponseWriter, r *http.Request, body func(msg, code string) any) (Caller, bool) {
	cred, ok := ReadCredentials(r)
	if !ok {
		h.log.Info("secrets API request without credentials", "remote", r.RemoteAddr, "path", r.URL.Path)
		writeJSON(w, http.StatusUnauthorized, body("Unauthorized. No exchange user id is supplied.", CodeUnauthorized))
		return Caller{}, false
	}
	c, err := h.opts.Authenticate(r.Context(), cred)
	if err == nil {
		if err = c.check(); err != nil {
			h.log.Error("the authentication hook returned an invalid caller", "err", err)
		}
	}
	if err != nil {
		// Neither the hook's error nor the credentials are logged.
		h.log.Info("secrets API request refused by the authentication hook", "remote", r.RemoteAddr, "path", r.URL.Path)
		writeJSON(w, http.StatusUnauthorized, body("Failed to authenticate the user with the Exchange.", CodeUnauthorized))
		return Caller{}, false
	}
	return c, true
}

// designError is the design route's error body.
func designError(msg, code string) any { return ErrorBody{Error: msg, Code: code} }

// designExists serves GET /secrets/{name...}: existence of a secret of the
// caller's organisation, with Stat only.
func (h *handler) designExists(w http.ResponseWriter, r *http.Request, raw string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: "only GET is allowed", Code: CodeMethod})
		return
	}
	caller, ok := h.authenticate(w, r, designError)
	if !ok {
		return
	}
	if h.opts.Store == nil {
		writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: msgNoStore, Code: CodeNoStore})
		return
	}
	name, err := binding.ParseVaultSecretName(raw)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: err.Error(), Code: CodeInvalidName})
		return
	}
	log := h.log.With("caller", caller.String(), "vaultSecret", name.String())
	if !Authorize(caller, caller.Org, name, ActionExists) {
		log.Info("secret existence check refused by the policy")
		writeJSON(w, http.StatusForbidden, ErrorBody{Error: deniedMessage(caller, ActionExists, target{org: caller.Org, name: name}), Code: CodeForbidden})
		return
	}
	exists, err := h.exists(r.Context(), caller.Org, name)
	if err != nil {
		h.storeFailure(w, r, log, err, designError)
		return
	}
	log.Debug("secret existence checked", "exists", exists)
	status := http.StatusOK
	if !exists {
		status = http.StatusNotFound
	}
	writeJSON(w, status, Existence{Exists: exists})
}

// exists checks a secret with Stat, never reading its value
// (binding.NewStoreChecker).
func (h *handler) exists(ctx context.Context, org string, name binding.VaultSecretName) (bool, error) {
	c, err := binding.NewStoreChecker(h.opts.Store, org)
	if err != nil {
		return false, &secretstore.Error{Op: "stat", Name: name.String(), Kind: edgesecrets.ErrInvalid, Err: err}
	}
	return c.SecretExists(ctx, name)
}

// Messages of anax's agbot (agreementbot/secure_api.go lines 1094-1104).
const (
	msgNoStore     = "There is no secrets provider configured, secrets are unavailable."
	msgUnavailable = "The secrets provider is not ready. The caller should retry this API call a small number of times with a short delay between calls to ensure that the secrets provider is unavailable."
)

// errWaitElapsed ends a request's context when the wait its caller
// preferred has elapsed.
var errWaitElapsed = errors.New("the wait the caller preferred elapsed")

// maxPreferredWait caps a Prefer: wait the handler honours.
const maxPreferredWait = 10 * time.Minute

// preferredWait returns the wait a request's Prefer header asks for
// (RFC 7240: "Prefer: wait=<seconds>", among other preferences), when it
// asks for one of at least a second.
func preferredWait(hdr http.Header) (time.Duration, bool) {
	for _, v := range hdr.Values("Prefer") {
		for pref := range strings.SplitSeq(v, ",") {
			token, value, ok := strings.Cut(strings.TrimSpace(pref), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(token), "wait") {
				continue
			}
			secs, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 32)
			if err != nil || secs == 0 {
				return 0, false
			}
			return min(time.Duration(secs)*time.Second, maxPreferredWait), true
		}
	}
	return 0, false
}

// storeFailure answers a store error: 503 when the store is unavailable or
// refuses the agbot, or did not answer within the wait the caller
// preferred; 400 when it refuses the name; 500 otherwise.
func (h *handler) storeFailure(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, body func(msg, code string) any) {
	waited := errors.Is(context.Cause(r.Context()), errWaitElapsed)
	switch {
	case r.Context().Err() != nil && !waited:
		// The caller went away; nobody reads an answer.
	case errors.Is(err, edgesecrets.ErrUnavailable) || waited:
		log.Warn("secret store unavailable", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, body(msgUnavailable, CodeStoreUnavailable))
	case errors.Is(err, edgesecrets.ErrPermission):
		log.Warn("the secret store refused the agbot's credentials", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, body("The secrets provider refused the agbot's credentials.", CodeStoreForbidden))
	case errors.Is(err, edgesecrets.ErrInvalid):
		log.Info("the secret store refused the request", "err", err)
		// The store's errors name the operation, the secret and the rule
		// broken (a name, a size limit), never a value.
		writeJSON(w, http.StatusBadRequest, body(fmt.Sprintf("The secrets provider refused the request: %s.", err), CodeInvalidName))
	default:
		log.Error("secret store failure", "err", err)
		writeJSON(w, http.StatusInternalServerError, body("The secrets provider failed; see the agbot's log.", CodeInternal))
	}
}

// deniedMessage is anax's refusal (agreementbot/secure_api.go errCheck,
// lines 1182-1187 at commit 2f3fa5a): the verb of the route's action
// ("read", "list", "create", "remove"), the name as anax builds it
// (anaxName), "secrets" for the organisation's own directory and for
// allsecrets.
func deniedMessage(c Caller, a Action, t target) string {
	name := anaxName(t)
	if t.all || name == "" {
		return fmt.Sprintf("Permission denied, user %q cannot %s secrets in organization %q", c.ID, a.verb(), t.org)
	}
	return fmt.Sprintf("Permission denied, user %q cannot %s secret %q in organization %q", c.ID, a.verb(), name, t.org)
}

// anaxName is a target's name as anax's messages give it (secure_api.go
// errCheck, lines 1168-1176): an organisation secret as written, a user
// or node secret or directory with a leading slash ("/user/alice/db",
// "/node/n1"), the organisation's directory "".
func anaxName(t target) string {
	if t.all {
		return ""
	}
	s := t.name.String()
	if t.name.User != "" || t.name.Node != "" {
		return "/" + strings.TrimSuffix(s, "/")
	}
	return s
}

// health serves GET /health in anax's shape (agreementbot/api.go lines
// 678-700; apicommon/status.go Info).
func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: "only GET is allowed", Code: CodeMethod})
		return
	}
	cfg := h.opts.Configuration
	live := LiveHealth{
		LastDBHeartbeat:      unixSeconds(h.opts.LastDBHeartbeat),
		LastVaultInteraction: unixSeconds(h.opts.LastVaultInteraction),
	}
	writeJSON(w, http.StatusOK, Health{Configuration: &cfg, LiveHealth: &live})
}

func unixSeconds(f func() time.Time) uint64 {
	if f == nil {
		return 0
	}
	t := f()
	if t.IsZero() || t.Unix() < 0 {
		return 0
	}
	return uint64(t.Unix())
}

// writeJSON writes v as JSON, newline-terminated as anax's writeResponse
// (agreementbot/api.go lines 1158-1168) writes it. A message, a string
// body (every JSON string the API answers is one) or an ErrorBody's text,
// goes without a percent sign (refusalText).
func writeJSON(w http.ResponseWriter, status int, v any) {
	switch m := v.(type) {
	case string:
		v = refusalText(m)
	case ErrorBody:
		m.Error = refusalText(m.Error)
		v = m
	}
	b, err := json.Marshal(v)
	if err != nil { // our own types; cannot happen
		status, b = http.StatusInternalServerError, []byte(`"Internal server error"`)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // a failed write means the client is gone: nothing left to tell it
}
