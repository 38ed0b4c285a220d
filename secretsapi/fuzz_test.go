package secretsapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// fuzzHandler is a handler over the fixture's secrets, for fuzzing without
// a server.
func fuzzHandler(f *testing.F) (http.Handler, *mock.Store) {
	inner := memory.New()
	for name, value := range fixtureSecrets {
		_, err := inner.Put(context.Background(), &secretstore.Secret{Name: name, Data: ohData("name", value)}, secretstore.PutOptions{})
		require.NoError(f, err)
	}
	store := mock.NewStore(inner)
	h, err := secretsapi.NewHandler(secretsapi.Options{Store: store.Store, Authenticate: authenticate, MaxBodyBytes: 1 << 10})
	require.NoError(f, err)
	return h, store
}

// FuzzManage sends arbitrary methods, paths and bodies as alice, a user:
// every answer is one of the API's, no value but alice's own ever comes
// back, and nothing but alice's own secrets is ever written or deleted.
func FuzzManage(f *testing.F) {
	for _, s := range []struct{ method, path, body string }{
		{"LIST", "/org/myorg/secrets", ""}, {"LIST", "/org/myorg/allsecrets", ""}, {"GET", "/org/myorg/secrets/user/alice/token", ""},
		{"GET", "/org/myorg/secrets/user/bob/token", ""}, {"PUT", "/org/myorg/secrets/user/alice/x", `{"key":"k","value":"v"}`},
		{"DELETE", "/org/myorg/secrets/user/bob/token", ""}, {"LIST", "/org/myorg/secrets/user/bob", ""}, {"GET", "/secrets/user/bob/token", ""},
		{"GET", "/org/myorg/secrets/user/alice/../bob/token", ""}, {"PUT", "/org/myorg/secrets/hw-secret-name", `{"key":"k","value":"v"}`},
		{"GET", "/deploycheck/secretbindingcompatible", `{"pattern":{"services":[]}}`}, {"GET", "/health", ""}, {"OPTIONS", "/org/x/secrets", ""},
		{"GET", "/org/myorg/secrets/100%", ""}, {"DELETE", "/org/my%org/secrets/user/bob/%", ""}, {"GE%T", "/org/myorg/secrets/x", ""},
		{"GET", "/secrets/user/bob/%", ""}, {"PUT", "/org/myorg/secrets/user/alice/%", `{"key":"%","value":%}`},
	} {
		f.Add(s.method, s.path, s.body)
	}
	h, store := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, method, path, body string) {
		req := &http.Request{Method: method, URL: &url.URL{Path: path}, Header: http.Header{}, Body: http.NoBody}
		if body != "" {
			req.Body = httpBody(body)
		}
		req = req.WithContext(context.Background())
		req.SetBasicAuth("myorg/alice", "alice-pw")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		answer := w.Body.String()
		for name, value := range fixtureSecrets {
			if !strings.HasPrefix(name, "myorg/user/alice/") {
				assert.NotContains(t, answer, value, "%s %q", method, path)
			}
		}
		switch w.Code {
		case 200, 201, 204, 400, 401, 403, 404, 405: // never 413, which hzn does not handle
		default:
			t.Fatalf("status %d outside the API for %s %q", w.Code, method, path)
		}
		if w.Code >= 400 {
			assert.NotContains(t, answer, "%", "hzn prints a refusal through a printf: %s %q", method, path)
		}
		for _, c := range store.Calls("", "") {
			if c.Op == "put" || c.Op == "delete" {
				require.True(t, strings.HasPrefix(c.Name, "myorg/user/alice/"), "%s %s by alice", c.Op, c.Name)
			}
		}
	})
}

type stringBody struct{ *strings.Reader }

func (stringBody) Close() error { return nil }

func httpBody(s string) stringBody { return stringBody{strings.NewReader(s)} }

// FuzzDeployCheck: any deploycheck body gets one of the route's answers,
// and a 200 is anax's output.
func FuzzDeployCheck(f *testing.F) {
	for _, s := range []string{
		`{"business_policy":{"service":{"name":"s","org":"myorg","arch":"*","serviceVersions":[{"version":"1.0.0"}]},"secretBinding":[{"serviceOrgid":"myorg","serviceUrl":"s","serviceArch":"amd64","serviceVersionRange":"[0.0.0,INFINITY)","secrets":[{"a":"user/bob/token"}]}]},"service":[{"org":"myorg","url":"s","version":"1.0.0","arch":"amd64","secrets":{"a":{}},"deployment":{"services":{"c":{}}}}]}`,
		`{"pattern":{"services":[{"serviceUrl":"s","serviceOrgid":"myorg","serviceArch":"amd64","serviceVersions":[{"version":"1"}]}]},"node_arch":"arm"}`,
		`{"node_id":"otherorg/n","pattern":{}}`, `{"pattern_id":"x"}`, `[]`, `{"service":[1]}`,
	} {
		f.Add(s)
	}
	h, _ := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body string) {
		req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/deploycheck/secretbindingcompatible"}, Header: http.Header{}, Body: httpBody(body)}
		req = req.WithContext(context.Background())
		req.SetBasicAuth("myorg/alice", "alice-pw")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case 200:
			var a deployCheckAnswer
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &a))
			assert.NotNil(t, a.Reason)
		case 400, 403:
			var msg string
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &msg))
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
		for name, value := range fixtureSecrets {
			if !strings.HasPrefix(name, "myorg/user/alice/") {
				assert.NotContains(t, w.Body.String(), value)
			}
		}
	})
}
