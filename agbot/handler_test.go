package agbot_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// The agbot's handler, driven as hzn drives it (admin credentials, a
// client following redirects as Go's does): every path trick, with every
// method hzn sends on a secret's path, is answered 400 and leaves the
// store as it was, and nothing the agbot serves ever redirects: the
// secrets routes, and the identity, relay and admin routes behind them.
// (Issue 23 item 1: behind http.ServeMux, "hzn secretsmanager secret
// remove -f 'zzz/../dot.name'" deleted "dot.name".)
func TestAgbotHandlerNeverServesAnotherName(t *testing.T) {
	reached := map[string]string{}
	var mu sync.Mutex
	h := newHub(t, func(o *agbot.Options) {
		o.Fallback = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			reached[r.Method+" "+r.URL.Path] = "fallback"
			w.WriteHeader(http.StatusNoContent)
		})
	})
	store := h.store.Inner
	for _, name := range append([]string{"dot.name", "zzz/dot.name"}, testkit.PathTrickVictims...) {
		h.put(org+"/"+name, "value of "+name)
	}
	srv := h.srv
	token := adminToken
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

	// Canonical paths reach their routes: the identity API and the relay
	// answer their own errors, the embedder's routes reach Fallback.
	for _, tc := range []struct{ path, body string }{
		{"/identity/instance", `"error"`},
		{"/relay/messages/1/reply", "message"},
	} {
		status, body := send("POST", tc.path)
		assert.NotEqual(t, http.StatusNoContent, status, tc.path)
		assert.Contains(t, body, tc.body, tc.path)
	}
	assert.Empty(t, reached)
	status, _ := send("POST", "/admin/secrets/x")
	assert.Equal(t, http.StatusNoContent, status)
	assert.Equal(t, map[string]string{"POST /admin/secrets/x": "fallback"}, reached)
	status, _ = send("DELETE", "/org/"+org+"/secrets/dot.name")
	assert.Equal(t, http.StatusNoContent, status, "the name sent is the name deleted")
	after := testkit.StoreSnapshot(t, store)
	delete(before, org+"/dot.name")
	assert.Equal(t, before, after)
	assert.Empty(t, rd.Seen(), "nothing the agbot serves redirects")
}
