package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// A release that fails part way reports how many it released, and exits 3.
func TestReleaseFailingPartWayReportsTheCount(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != releasePath || r.Header.Get("Authorization") != "Bearer a-token" {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"released":2,"error":"delivery: state unavailable"}`))
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, map[string]string{envAgbotURL: srv.URL, envAdminToken: "a-token"}, "release")
	assert.Equal(t, exitUnreachable, code)
	assert.Equal(t, "released 2 held cancellation(s) before the agbot failed\n", out)
	assert.Contains(t, errOut, "POST /admin/cancellations/release: the agbot answered 503 (delivery: state unavailable)")
}

// An answer that is not the operator API's exits 3 and names the route,
// without repeating the answer.
func TestForeignAnswerExits3(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html>not-the-api</html>"))
	}))
	defer srv.Close()
	code, _, errOut := runCLI(t, map[string]string{envAgbotURL: srv.URL, envAdminToken: "a-token"}, "health")
	assert.Equal(t, exitUnreachable, code)
	assert.Contains(t, errOut, "GET /admin/health: the answer is not the operator API's (invalid JSON at byte 1); check -agbot")
	assert.NotContains(t, errOut, "not-the-api")
}

// errorText reads any answer body: a short, valid text, never a panic.
func FuzzErrorText(f *testing.F) {
	f.Add([]byte(`{"error":"no agreement x"}`))
	f.Add([]byte(`{"code":"store_forbidden"}`))
	f.Add([]byte(`{"error":"` + strings.Repeat("é", 400) + `"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := errorText(body)
		if len(s) > maxShownError+len("...") {
			t.Fatalf("%d bytes shown", len(s))
		}
		if utf8.Valid(body) && !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 from a valid body: %q", s)
		}
	})
}
