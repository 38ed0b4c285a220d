package secretsapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// refusalMessage is the text of a refusal: the JSON string of Open
// Horizon's routes, the error of the design route's ErrorBody.
func refusalMessage(t *testing.T, body string) string {
	t.Helper()
	var msg string
	if json.Unmarshal([]byte(body), &msg) == nil {
		return msg
	}
	var e secretsapi.ErrorBody
	require.NoError(t, json.Unmarshal([]byte(body), &e), "%s", body)
	return e.Error
}

// No refusal holds a percent sign, which hzn's printf of the text takes
// for a verb (a refusal of "pct%2Fenc" printed "(%!F(MISSING),
// %!C(MISSING))"): escapes are told in words, a percent sign of a name
// quoted as \u0025.
func TestRefusalsHaveNoPercent(t *testing.T) {
	long := strings.Repeat("p", 508) // a name of 509 bytes, a store path over 512
	tests := []struct {
		name, method, path, as string
		status                 int
		want                   string // in the text
	}{
		{"escaped slash", "GET", "/org/myorg/secrets/pct%2Fenc", "myorg/admin", 400, "an escaped slash or backslash"},
		{"escaped slash, lower case", "LIST", "/org/myorg/secrets/pct%2fenc", "myorg/admin", 400, "an escaped slash or backslash"},
		{"escaped backslash", "PUT", "/org/myorg/secrets/a%5Cb", "myorg/admin", 400, "an escaped slash or backslash"},
		{"escaped slash in the organisation", "GET", "/org/my%2Forg/secrets/x", "myorg/admin", 400, "an escaped slash"},
		{"escaped slash on the design route", "GET", "/secrets/a%2Fb", "myorg/admin", 400, "an escaped slash"},
		{"escaped dots", "GET", "/org/myorg/secrets/a/%2e%2e/b", "myorg/admin", 400, `".." segment`},
		{"escaped dot", "DELETE", "/org/myorg/secrets/%2E/b", "myorg/admin", 400, `"." segment`},
		{"query", "PUT", "/org/myorg/secrets/b?x=%25", "myorg/admin", 400, "query string"},
		{"name with an escaped percent sign, refused", "GET", "/org/myorg/secrets/100%25", "myorg/alice", 403, `"100\u0025"`},
		{"another user's name with a percent sign", "DELETE", "/org/myorg/secrets/user/bob/a%25b", "myorg/alice", 403, `"/user/bob/a\u0025b"`},
		{"organisation with a percent sign", "LIST", "/org/my%25org/secrets", "myorg/admin", 403, `"my\u0025org"`},
		{"name with a percent sign, too long", "GET", "/org/myorg/secrets/%25" + long, "myorg/admin", 400, "longer than 512 bytes"},
		{"name with a percent sign, too long, design route", "GET", "/secrets/%25" + long, "myorg/admin", 400, "longer than 512 bytes"},
		{"name with a percent sign, missing", "GET", "/org/myorg/secrets/%25%25", "myorg/admin", 404, `"\u0025\u0025"`},
		{"method with a percent sign", "GE%T", "/org/myorg/secrets/db", "myorg/admin", 405, `GE\u0025T`},
		{"bad credentials", "GET", "/org/myorg/secrets/100%25", "", 401, "No exchange user id"},
	}
	f := newFixture(t, secretsapi.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.path, tt.as, "")
			assert.Equal(t, tt.status, r.status, r.body)
			assert.NotContains(t, r.body, "%")
			msg := refusalMessage(t, r.body)
			assert.NotContains(t, msg, "%")
			assert.Contains(t, msg, tt.want)
		})
	}
	// Every path trick, by every method hzn sends.
	for _, trick := range testkit.PathTricks {
		for _, method := range trickMethods {
			r := f.do(t, method, "/org/myorg/secrets/"+trick.Rel, "myorg/admin", "")
			assert.Equal(t, http.StatusBadRequest, r.status, "%s %s", method, trick.Name)
			assert.NotContains(t, refusalMessage(t, r.body), "%", "%s %s", method, trick.Name)
		}
	}
	assert.Empty(t, f.store.Calls("put", ""), "nothing written")
	assert.Empty(t, f.store.Calls("delete", ""), "nothing deleted")
}

// A malformed escape never reaches a handler through net/http's server,
// which refuses the request line; one that reaches it all the same (a
// server in front that passes it on) is refused without a percent sign.
func TestMalformedEscapeRefusal(t *testing.T) {
	h, err := secretsapi.NewHandler(secretsapi.Options{Authenticate: authenticate})
	require.NoError(t, err)
	for _, target := range []string{"/org/myorg/secrets/a%zz", "/org/myorg/secrets/a%", "/secrets/a%2"} {
		req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/org/myorg/secrets/a"}, RequestURI: target, Header: http.Header{}, Body: http.NoBody}
		req.SetBasicAuth("myorg/admin", accounts["myorg/admin"].password)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		body, err := io.ReadAll(w.Result().Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, w.Code, target)
		assert.NotContains(t, string(body), "%", target)
		assert.Contains(t, refusalMessage(t, string(body)), "a malformed escape (a percent sign not followed by two hexadecimal digits)", target)
	}
}
