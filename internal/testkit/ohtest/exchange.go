package ohtest

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kinds of exchange identity, as Request.Kind names them.
const (
	KindUser  = "user"
	KindNode  = "node"
	KindAgbot = "agbot"
)

// Exchange is a stub Open Horizon exchange: the routes that
// vault-exchange-auth and anax's agbot secure API (its secrets routes)
// call, answered with the status codes and bodies of the real exchange
// (exchange-api), over the identities a test adds. It authenticates with
// HTTP basic auth "org/id:password-or-token", as the real one does.
//
// Routes, under URL (".../v1"):
//
//	GET /admin/version              unauthenticated; 200, the version as text
//	GET /orgs/{org}/users/{user}    the user itself, or an admin of its org
//	GET /orgs/{org}/agbots/{agbot}  the agbot itself, or any user of the org
//	GET /orgs/{org}/nodes/{node}    the node itself, any user of the org, any agbot
//
// A found identity is 200 with {"users"|"agbots"|"nodes": {"org/id": {...}},
// "lastIndex": 0}, credentials shown as "********"; a missing one, to a
// caller allowed to see it, 404 with an empty map; no or wrong credentials
// 401 {"code": "invalid-credentials", ...}; a caller not allowed 403
// {"code": "access-denied", ...}; any other route 404.
//
// Every request is recorded (Requests): method, path, the identity it
// authenticated as, never a credential. All methods are safe for
// concurrent use.
type Exchange struct {
	// URL is the exchange's API root, http://127.0.0.1:<port>/v1, without
	// a trailing slash (vault-exchange-auth's config "url" form; anax's
	// ExchangeURL setting wants URL + "/").
	URL string

	mux *http.ServeMux

	mu     sync.Mutex
	users  map[string]*userEntry // by "org/id"
	nodes  map[string]string     // "org/id" -> token
	agbots map[string]string     // "org/id" -> token
	reqs   []Request
}

type userEntry struct {
	password string
	admin    bool
}

// Request is one request the stub exchange received.
type Request struct {
	// Method and Path are the request's (the path as sent, /v1/...).
	Method, Path string
	// Claimed is the "org/id" the request's basic auth named, empty
	// without one.
	Claimed string
	// Identity is the "org/id" the request authenticated as, empty when
	// it carried no credentials or wrong ones; Kind is KindUser, KindNode
	// or KindAgbot then.
	Identity, Kind string
	// Status is the HTTP status the stub answered.
	Status int
}

// Version is what GET /admin/version answers.
const Version = "2.124.0"

// StartExchange starts a stub exchange on 127.0.0.1 and stops it when t
// ends.
func StartExchange(t testing.TB) *Exchange {
	t.Helper()
	e := NewExchange()
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	e.URL = srv.URL + apiRoot
	return e
}

// apiRoot is the path under which the exchange serves its API.
const apiRoot = "/v1"

// NewExchange returns a stub exchange that is not listening, for a test
// serving it itself (set URL then).
func NewExchange() *Exchange {
	e := &Exchange{users: map[string]*userEntry{}, nodes: map[string]string{}, agbots: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+apiRoot+"/admin/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		_, _ = w.Write([]byte(Version))
	})
	mux.HandleFunc("GET "+apiRoot+"/orgs/{org}/users/{id}", e.getUser)
	mux.HandleFunc("GET "+apiRoot+"/orgs/{org}/agbots/{id}", e.getAgbot)
	mux.HandleFunc("GET "+apiRoot+"/orgs/{org}/nodes/{id}", e.getNode)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, apiResponse{Code: "not-found", Msg: "not found"})
	})
	e.mux = mux
	return e
}

// AddUser adds (or replaces) user org/user with its password; admin makes
// it an admin of org.
func (e *Exchange) AddUser(org, user, password string, admin bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.users[org+"/"+user] = &userEntry{password: password, admin: admin}
}

// SetAdmin changes whether user org/user is an admin of org; it reports
// whether the user exists.
func (e *Exchange) SetAdmin(org, user string, admin bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	u, ok := e.users[org+"/"+user]
	if ok {
		u.admin = admin
	}
	return ok
}

// AddAgbot adds (or replaces) agbot org/id with its token.
func (e *Exchange) AddAgbot(org, id, token string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.agbots[org+"/"+id] = token
}

// AddNode adds (or replaces) node org/id with its token.
func (e *Exchange) AddNode(org, id, token string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nodes[org+"/"+id] = token
}

// Requests returns the requests received so far, oldest first.
func (e *Exchange) Requests() []Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Request(nil), e.reqs...)
}

// caller is who a request authenticated as.
type caller struct {
	claimed  string // from the header, "" without one
	id, kind string // "" when not authenticated
	admin    bool
}

func (c caller) org() string {
	org, _, _ := strings.Cut(c.id, "/")
	return org
}

type callerKey struct{}

// ServeHTTP implements http.Handler: it authenticates the request, serves
// it and records it.
func (e *Exchange) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := e.authenticate(r)
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	e.mux.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reqs = append(e.reqs, Request{Method: r.Method, Path: r.URL.Path, Claimed: c.claimed, Identity: c.id, Kind: c.kind, Status: sw.status})
}

// authenticate checks basic auth "org/id:secret" against users, nodes and
// agbots, in that order.
func (e *Exchange) authenticate(r *http.Request) caller {
	id, secret, ok := r.BasicAuth()
	if !ok {
		return caller{}
	}
	c := caller{claimed: id}
	if org, rest, found := strings.Cut(id, "/"); !found || org == "" || rest == "" || secret == "" {
		return c
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if u, ok := e.users[id]; ok && same(u.password, secret) {
		c.id, c.kind, c.admin = id, KindUser, u.admin
		return c
	}
	if tok, ok := e.nodes[id]; ok && same(tok, secret) {
		c.id, c.kind = id, KindNode
		return c
	}
	if tok, ok := e.agbots[id]; ok && same(tok, secret) {
		c.id, c.kind = id, KindAgbot
	}
	return c
}

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// apiResponse is the exchange's error body.
type apiResponse struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

// allow answers 401 or 403 and reports false unless the request's caller
// authenticated and may: the rule for the target org/id.
func allow(w http.ResponseWriter, r *http.Request, may func(c caller, org, target string) bool) (target string, ok bool) {
	c, _ := r.Context().Value(callerKey{}).(caller)
	org := r.PathValue("org")
	target = org + "/" + r.PathValue("id")
	switch {
	case c.id == "":
		writeJSON(w, http.StatusUnauthorized, apiResponse{Code: "invalid-credentials", Msg: "invalid credentials"})
		return "", false
	case !may(c, org, target):
		writeJSON(w, http.StatusForbidden, apiResponse{Code: "access-denied", Msg: "access denied: " + c.id + " may not read " + target})
		return "", false
	}
	return target, true
}

// lastUpdated is the timestamp the stub reports for every resource, in the
// exchange's format.
var lastUpdated = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format("2006-01-02T15:04:05.000Z[UTC]")

const hidden = "********"

func (e *Exchange) getUser(w http.ResponseWriter, r *http.Request) {
	target, ok := allow(w, r, func(c caller, org, target string) bool {
		return c.kind == KindUser && (c.id == target || c.admin && c.org() == org)
	})
	if !ok {
		return
	}
	e.mu.Lock()
	u, found := e.users[target]
	var admin bool
	if found {
		admin = u.admin
	}
	e.mu.Unlock()
	body := map[string]any{"users": map[string]any{}, "lastIndex": 0}
	if !found {
		writeJSON(w, http.StatusNotFound, body)
		return
	}
	body["users"] = map[string]any{target: map[string]any{
		"password": hidden, "admin": admin, "hubAdmin": false, "email": "",
		"lastUpdated": lastUpdated, "updatedBy": target,
	}}
	writeJSON(w, http.StatusOK, body)
}

func (e *Exchange) getAgbot(w http.ResponseWriter, r *http.Request) {
	target, ok := allow(w, r, func(c caller, org, target string) bool {
		return c.kind == KindAgbot && c.id == target || c.kind == KindUser && c.org() == org
	})
	if !ok {
		return
	}
	e.mu.Lock()
	_, found := e.agbots[target]
	e.mu.Unlock()
	body := map[string]any{"agbots": map[string]any{}, "lastIndex": 0}
	if !found {
		writeJSON(w, http.StatusNotFound, body)
		return
	}
	_, name, _ := strings.Cut(target, "/")
	body["agbots"] = map[string]any{target: map[string]any{
		"token": hidden, "name": name, "owner": "", "msgEndPoint": "",
		"lastHeartbeat": lastUpdated, "publicKey": "",
	}}
	writeJSON(w, http.StatusOK, body)
}

func (e *Exchange) getNode(w http.ResponseWriter, r *http.Request) {
	target, ok := allow(w, r, func(c caller, org, target string) bool {
		return c.kind == KindNode && c.id == target || c.kind == KindUser && c.org() == org || c.kind == KindAgbot
	})
	if !ok {
		return
	}
	e.mu.Lock()
	_, found := e.nodes[target]
	e.mu.Unlock()
	body := map[string]any{"nodes": map[string]any{}, "lastIndex": 0}
	if !found {
		writeJSON(w, http.StatusNotFound, body)
		return
	}
	_, name, _ := strings.Cut(target, "/")
	body["nodes"] = map[string]any{target: map[string]any{
		"token": hidden, "name": name, "owner": "", "nodeType": "device",
		"pattern": "", "registeredServices": []any{}, "msgEndPoint": "",
		"softwareVersions": map[string]any{}, "lastHeartbeat": lastUpdated,
		"publicKey": "", "arch": "amd64", "userInput": []any{},
		"heartbeatIntervals": map[string]any{"minInterval": 0, "maxInterval": 0, "intervalAdjustment": 0},
		"ha_group":           "", "lastUpdated": lastUpdated,
	}}
	writeJSON(w, http.StatusOK, body)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
