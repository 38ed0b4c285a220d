package agentapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// For every path trick and method, sent by a client that follows
// redirects as Go's does (as a service's Go client, or hzn, does), in both
// profiles: mounted as the server's handler the handler answers 400 and
// never redirects; mounted (against its documentation) on an
// http.ServeMux pattern, which redirects, it still refuses what the
// client sends after the redirect. Either way no other secret's value is
// answered and no other secret is acknowledged.
func TestNonCanonicalPaths(t *testing.T) {
	profiles := []struct {
		name        string
		openHorizon bool
		base        string
		user, token string
		instance    string
		victim      string // an updated secret of the instance
		value       string // its value
	}{
		{name: "design", base: "/secrets/", user: "a", token: "token-a", instance: "a", victim: "password", value: "rotated-A"},
		{name: "Open Horizon", openHorizon: true, base: "/api/v1/secrets/", user: essID, token: "token-hello", instance: "hello", victim: "hw_who", value: "Everyone"},
	}
	for _, p := range profiles {
		for _, serveMux := range []bool{false, true} {
			t.Run(p.name+map[bool]string{false: " as the server's handler", true: " on http.ServeMux"}[serveMux], func(t *testing.T) {
				var f *apiFixture
				if p.openHorizon {
					f = newOHFixture(t, agentapi.HandlerOptions{})
				} else {
					f = newAPIFixture(t, agentapi.HandlerOptions{})
				}
				url := f.server.URL
				if serveMux {
					mux := http.NewServeMux()
					mux.Handle(p.base, f.server.Config.Handler)
					srv := httptest.NewServer(mux)
					t.Cleanup(srv.Close)
					url = srv.URL
				}
				updated := instanceInfo(t, f.store, p.instance).Updated
				require.Contains(t, updated, p.victim)
				var rd testkit.Redirects
				client := rd.Client()
				for _, trick := range testkit.PathTricks {
					rel := strings.Replace(trick.Rel, "b", p.victim, 1)
					for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
						target := url + p.base + rel
						if method == "POST" && !strings.Contains(rel, "?") {
							target += "?received=true"
						}
						req, err := http.NewRequest(method, target, nil)
						require.NoError(t, err)
						req.SetBasicAuth(p.user, p.token)
						resp, err := client.Do(req)
						require.NoError(t, err)
						body, err := io.ReadAll(resp.Body)
						require.NoError(t, err)
						require.NoError(t, resp.Body.Close())
						assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s: %s", method, rel, body)
						assert.NotContains(t, string(body), p.value, "%s %s", method, rel)
						assert.Equal(t, updated, instanceInfo(t, f.store, p.instance).Updated, "%s %s acknowledged nothing", method, rel)
					}
				}
				if !serveMux {
					assert.Empty(t, rd.Seen(), "no redirect is ever issued")
				}
			})
		}
	}
}

// A query string is refused on GET, and on POST unless it is received
// alone: a name holding '?' sent unescaped does not name its prefix.
func TestQueryStrings(t *testing.T) {
	f := newAPIFixture(t, agentapi.HandlerOptions{})
	tests := []struct {
		method, path string
		status       int
	}{
		{"GET", "/secrets/password?x=1", 400},
		{"GET", "/secrets/password?", 400},
		{"GET", "/secrets?x=1", 400},
		{"POST", "/secrets/password?received=true&x=1", 400},
		{"POST", "/secrets/password?x=1", 400},
		{"GET", "/secrets/password", 200},
		{"POST", "/secrets/password?received=true", 201},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, f.server.URL+tt.path, nil)
			require.NoError(t, err)
			req.SetBasicAuth("a", "token-a")
			resp, err := f.server.Client().Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, tt.status, resp.StatusCode)
		})
	}
}
