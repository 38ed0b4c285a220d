package testkit

import (
	"net/http"
	"sync"
)

// PathTrick is a non-canonical spelling of a secret's path, which a mux
// or router in front of a handler may clean into another name.
type PathTrick struct {
	// Name names the trick: "a//b", "a/../b", "./b", "%2F", "%2e%2e",
	// "trailing slash", "?x=1".
	Name string
	// Rel is the path as sent, relative to the API's secret route (after
	// ".../secrets/").
	Rel string
	// Cleaned is the name a cleaning router, or hzn's query split, would
	// act on instead: one of PathTrickVictims.
	Cleaned string
}

// PathTrickVictims are the names the tricks clean into: a store under
// test holds them, and a trick must leave them as they were.
var PathTrickVictims = []string{"b", "a/b"}

// PathTricks are the tricks of every test that a handler serves exactly
// the name sent or refuses it: hzn sends a name as given, so that
// "hzn secretsmanager secret remove 'a/../b'" is "DELETE .../secrets/a/../b".
var PathTricks = []PathTrick{
	{Name: "a//b", Rel: "a//b", Cleaned: "a/b"},
	{Name: "a/../b", Rel: "a/../b", Cleaned: "b"},
	{Name: "./b", Rel: "./b", Cleaned: "b"},
	{Name: "%2F", Rel: "a%2Fb", Cleaned: "a/b"},
	{Name: "%2e%2e", Rel: "a/%2e%2e/b", Cleaned: "b"},
	{Name: "%2E%2E/", Rel: "a/%2E%2E/b", Cleaned: "b"},
	{Name: "trailing slash", Rel: "b/", Cleaned: "b"},
	{Name: "?x=1", Rel: "b?x=1", Cleaned: "b"},
	{Name: "?", Rel: "b?", Cleaned: "b"},
}

// Redirects records the redirects a client followed.
type Redirects struct {
	mu   sync.Mutex
	seen []string
}

// Client returns an http.Client that follows redirects as Go's default
// client does (as Open Horizon's hzn does: the same method and body
// after a 307 or 308, GET after a 301, 302 or 303, up to 10), recording
// each: "<method of the redirected request> <URL it went to> (after
// <status>)".
func (rd *Redirects) Client() *http.Client {
	return &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		rd.mu.Lock()
		defer rd.mu.Unlock()
		status := 0
		if req.Response != nil {
			status = req.Response.StatusCode
		}
		rd.seen = append(rd.seen, via[len(via)-1].Method+" "+via[len(via)-1].URL.String()+" → "+req.Method+" "+req.URL.String()+" ("+http.StatusText(status)+")")
		if len(via) >= 10 {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// Seen returns the redirects followed so far.
func (rd *Redirects) Seen() []string {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return append([]string(nil), rd.seen...)
}
