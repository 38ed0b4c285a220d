package secretsapi_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// trickMethods are the methods hzn sends on a secret's path
// (cli/secrets_manager/secrets_manager.go: LIST for list and add's check,
// GET for read, PUT for add, DELETE for remove) and POST, which anax takes
// as PUT.
var trickMethods = []string{"GET", "LIST", "PUT", "POST", "DELETE"}

// seededStore is a memory store holding the fixture's secrets and the
// names the path tricks clean into.
func seededStore(t *testing.T) *secretstore.Store {
	t.Helper()
	store := memory.New()
	for name, value := range fixtureSecrets {
		_, err := store.Put(t.Context(), &secretstore.Secret{Name: name, Data: ohData("name", value)}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	for _, v := range testkit.PathTrickVictims {
		_, err := store.Put(t.Context(), &secretstore.Secret{Name: "myorg/" + v, Data: ohData("name", "victim "+v)}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	return store
}

// sendAsHzn sends method to url as hzn does (Basic "<org>/<user>:<pw>",
// a JSON body {"key","value"} on a write, with GetBody so that a 307 or
// 308 is followed with it), with a client following redirects as Go's
// does, and returns the final status and body.
func sendAsHzn(t *testing.T, client *http.Client, method, url string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == "PUT" || method == "POST" {
		body = strings.NewReader(`{"key":"k","value":"written by a trick"}`)
	}
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	req.SetBasicAuth("myorg/admin", accounts["myorg/admin"].password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// For every path trick and method, sent by a client that follows
// redirects as Go's (hzn's) does: the handler mounted the documented way,
// as the server's handler with the rest of the server behind it
// (Options.Fallback), answers 400 with anax's body (a JSON string), never
// redirects, and the store holds exactly what it held. (Issue 23 item 1:
// on http.ServeMux, "DELETE /org/o/secrets/zzz/../dot.name" deleted
// "dot.name".)
func TestNonCanonicalPathsAsServerHandler(t *testing.T) {
	store := seededStore(t)
	other := http.NewServeMux()
	other.HandleFunc("/other/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "other") })
	h, err := secretsapi.NewHandler(secretsapi.Options{Store: store, Authenticate: authenticate, Fallback: other})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	before := testkit.StoreSnapshot(t, store)
	var rd testkit.Redirects
	client := rd.Client()
	for _, trick := range testkit.PathTricks {
		for _, method := range trickMethods {
			t.Run(trick.Name+" "+method, func(t *testing.T) {
				status, body := sendAsHzn(t, client, method, srv.URL+"/org/myorg/secrets/"+trick.Rel)
				assert.Equal(t, http.StatusBadRequest, status, body)
				var msg string
				require.NoError(t, json.Unmarshal([]byte(body), &msg), "anax's error body is a JSON string: %s", body)
				assert.Contains(t, msg, "Incorrect secret name provided: ")
				assert.Equal(t, before, testkit.StoreSnapshot(t, store), "the store holds what it held")
			})
		}
	}
	assert.Empty(t, rd.Seen(), "no redirect is ever issued")
	// The rest of the server is reached through the handler, and a
	// non-canonical path to it is refused before the mux behind can
	// clean and redirect it: here into the secrets routes.
	status, body := sendAsHzn(t, client, "GET", srv.URL+"/other/x")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "other", body)
	for _, p := range []string{"/other/../org/myorg/secrets/b", "/other//x", "/x/%2e%2e/org/myorg/secrets/b"} {
		for _, method := range trickMethods {
			status, _ := sendAsHzn(t, client, method, srv.URL+p)
			assert.Equal(t, http.StatusBadRequest, status, "%s %s", method, p)
		}
	}
	assert.Empty(t, rd.Seen(), "no redirect is ever issued")
	assert.Equal(t, before, testkit.StoreSnapshot(t, store))
}

// Mounted against the documentation on an http.ServeMux pattern, the
// mux cleans and redirects before the handler runs; the handler still
// refuses what Go's client (hzn) sends after the redirect, which carries
// the non-canonical path as its Referer: the store is untouched.
func TestNonCanonicalPathsBehindServeMux(t *testing.T) {
	store := seededStore(t)
	h, err := secretsapi.NewHandler(secretsapi.Options{Store: store, Authenticate: authenticate})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/org/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	before := testkit.StoreSnapshot(t, store)
	var rd testkit.Redirects
	client := rd.Client()
	for _, trick := range testkit.PathTricks {
		for _, method := range trickMethods {
			t.Run(trick.Name+" "+method, func(t *testing.T) {
				status, body := sendAsHzn(t, client, method, srv.URL+"/org/myorg/secrets/"+trick.Rel)
				assert.Equal(t, http.StatusBadRequest, status, body)
				assert.Equal(t, before, testkit.StoreSnapshot(t, store), "the store holds what it held")
			})
		}
	}
	assert.NotEmpty(t, rd.Seen(), "http.ServeMux redirects; the handler is mounted against its documentation here")
}

// A name sent canonically, with the characters the tricks use escaped, is
// the exact name acted on.
func TestEscapedNameIsTheNameSent(t *testing.T) {
	store := seededStore(t)
	h, err := secretsapi.NewHandler(secretsapi.Options{Store: store, Authenticate: authenticate})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	before := testkit.StoreSnapshot(t, store)
	var rd testkit.Redirects
	status, body := sendAsHzn(t, rd.Client(), "PUT", srv.URL+"/org/myorg/secrets/q%3Fx=1")
	require.Equal(t, http.StatusCreated, status, body)
	after := testkit.StoreSnapshot(t, store)
	assert.Contains(t, after, "myorg/q?x=1")
	delete(after, "myorg/q?x=1")
	assert.True(t, maps.Equal(before, after), "nothing but the name sent changed")
}
