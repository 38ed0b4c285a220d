package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// The agbot's handler, driven as hzn drives it (admin credentials, a
// client following redirects as Go's does): every path trick, with every
// method hzn sends on a secret's path, is answered 400 and leaves the
// store as it was, and nothing the agbot serves ever redirects: the
// secrets routes, and the identity, relay and admin routes behind them.
// (Issue 23 item 1: behind http.ServeMux, "hzn secretsmanager secret
// remove -f 'zzz/../dot.name'" deleted "dot.name".)
func TestAgbotHandlerNeverServesAnotherName(t *testing.T) {
	const org, token = "myorg", "admin-token"
	store := memory.New()
	for _, name := range append([]string{"dot.name", "zzz/dot.name"}, testkit.PathTrickVictims...) {
		put(t, store, org+"/"+name, "value of "+name)
	}
	reached := map[string]string{}
	record := func(what string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached[what] = r.Method + " " + r.URL.Path
			w.WriteHeader(http.StatusNoContent)
		})
	}
	h, err := agbotAPI(store, org, token, record("identity"), record("relay"), record("status"), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	before := testkit.StoreSnapshot(t, store)
	var rd testkit.Redirects
	client := rd.Client()
	send := func(method, path string) (int, string) {
		var body io.Reader
		if method == "PUT" || method == "POST" {
			body = strings.NewReader(`{"key":"k","value":"written by a trick"}`)
		}
		req, err := http.NewRequest(method, srv.URL+path, body)
		require.NoError(t, err)
		req.SetBasicAuth(org+"/admin", token) // hzn -u myorg/admin:<token>
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	tricks := []string{"zzz/../dot.name"}
	for _, trick := range testkit.PathTricks {
		tricks = append(tricks, trick.Rel)
	}
	for _, rel := range tricks {
		for _, method := range []string{"GET", "LIST", "PUT", "POST", "DELETE"} {
			status, body := send(method, "/org/"+org+"/secrets/"+rel)
			assert.Equal(t, http.StatusBadRequest, status, "%s %s: %s", method, rel, body)
			assert.Equal(t, before, testkit.StoreSnapshot(t, store), "%s %s: the store holds what it held", method, rel)
		}
	}
	// The routes behind the secrets handler: a non-canonical path never
	// reaches them, nor is it redirected into the secrets routes.
	for _, p := range []string{"/admin/secrets/myorg/zzz/../dot.name", "/admin/secrets/myorg//b", "/admin/secrets/myorg%2Fb",
		"/relay/../org/myorg/secrets/b", "/identity//instance", "/x/%2e%2e/org/myorg/secrets/dot.name"} {
		for _, method := range []string{"GET", "PUT", "POST", "DELETE"} {
			status, body := send(method, p)
			assert.Equal(t, http.StatusBadRequest, status, "%s %s: %s", method, p, body)
		}
	}
	assert.Empty(t, reached, "no non-canonical path reached the routes behind")
	assert.Equal(t, before, testkit.StoreSnapshot(t, store))
	assert.Empty(t, rd.Seen(), "nothing the agbot serves redirects")

	// Canonical paths reach their routes, once.
	for _, p := range []string{"/identity/instance", "/relay/messages", "/identity", "/relay"} {
		status, _ := send("POST", p)
		assert.Contains(t, []int{http.StatusNoContent, http.StatusNotFound}, status, p)
	}
	assert.Equal(t, map[string]string{"identity": "POST /instance", "relay": "POST /relay/messages"}, reached)
	status, _ := send("DELETE", "/org/"+org+"/secrets/dot.name")
	assert.Equal(t, http.StatusNoContent, status, "the name sent is the name deleted")
	after := testkit.StoreSnapshot(t, store)
	delete(before, org+"/dot.name")
	assert.Equal(t, before, after)
	assert.Empty(t, rd.Seen(), "nothing the agbot serves redirects")
}
