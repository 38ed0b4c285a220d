package secretsapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// The Open Horizon routes are checked against open-horizon/anax
// agreementbot/secure_api.go at commit
// 2f3fa5a506d6565fa68858b7963450567ddda114 ("L<n>" cites its lines) and the
// hzn client, cli/secrets_manager/secrets_manager.go, at the same commit.

// jsonString is a body as anax's writeResponse writes a message.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b) + "\n"
}

func TestOpenHorizonRoutes(t *testing.T) {
	const (
		admin = "myorg/admin"
		alice = "myorg/alice"
		node  = "myorg/n1"
		carol = "otherorg/carol"
	)
	tests := []struct {
		name         string
		method, path string
		as, body     string
		status       int
		want         string // exact body, or
		wantJSON     string // a JSON body compared as JSON, or
		contains     string // part of a JSON string body
		allow        string
	}{
		// Directories, LIST: L195-197, L201-202, listVaultSecret L2247-2272.
		{name: "org secrets (L201, L1269-1275): not user/ or node/", method: "LIST", path: "/org/myorg/secrets", as: alice, status: 200,
			wantJSON: `["db/password","hw-secret-name"]`},
		{name: "all secrets as admin (L202, L1326-1332)", method: "LIST", path: "/org/myorg/allsecrets", as: admin, status: 200,
			wantJSON: `["db/password","hw-secret-name","node/n1/cert","user/admin/own","user/alice/deep/a/b/c/d/e","user/alice/node/n1/key","user/alice/token","user/bob/node/n1/key","user/bob/token"]`},
		{name: "all secrets as a user: the org's, the nodes' and its own", method: "LIST", path: "/org/myorg/allsecrets", as: alice, status: 200,
			wantJSON: `["db/password","hw-secret-name","node/n1/cert","user/alice/deep/a/b/c/d/e","user/alice/node/n1/key","user/alice/token"]`},
		{name: "all secrets as a node", method: "LIST", path: "/org/myorg/allsecrets", as: node, status: 403,
			want: jsonString(`Permission denied, user "n1" cannot list secrets in organization "myorg"`)},
		{name: "own user directory, relative names (L195, L1566-1573)", method: "LIST", path: "/org/myorg/secrets/user/alice", as: alice, status: 200,
			wantJSON: `["deep/a/b/c/d/e","node/n1/key","token"]`},
		{name: "own user's node directory (L197, L1591-1598)", method: "LIST", path: "/org/myorg/secrets/user/alice/node/n1", as: alice, status: 200, wantJSON: `["key"]`},
		{name: "node directory (L196, L1541-1548)", method: "LIST", path: "/org/myorg/secrets/node/n1", as: alice, status: 200, wantJSON: `["cert"]`},
		{name: "an empty directory is [], not null (secrets_manager.go L136-144)", method: "LIST", path: "/org/myorg/secrets/node/n9", as: alice, status: 200, wantJSON: `[]`},
		{name: "another user's directory as a user", method: "LIST", path: "/org/myorg/secrets/user/bob", as: alice, status: 403,
			want: jsonString(`Permission denied, user "alice" cannot list secret "/user/bob" in organization "myorg"`)},
		{name: "another user's directory as an admin", method: "LIST", path: "/org/myorg/secrets/user/bob", as: admin, status: 200, wantJSON: `["node/n1/key","token"]`},
		{name: "a directory takes LIST only (L195-197)", method: "GET", path: "/org/myorg/secrets", as: alice, status: 405, allow: "LIST, OPTIONS",
			want: jsonString("Method GET is not allowed here; use LIST, OPTIONS.")},
		{name: "GET on a user directory: 405 (anax answers 400, L1345-1348)", method: "GET", path: "/org/myorg/secrets/user/alice", as: alice, status: 405, allow: "LIST, OPTIONS"},

		// secretsapi.Existence, LIST on a name: L1406-1413 (and per scope L1670, L1868, L2072), always 200: L2301, L2303-2308.
		{name: "exists", method: "LIST", path: "/org/myorg/secrets/hw-secret-name", as: alice, status: 200, want: "{\"exists\":true}\n"},
		{name: "missing is still 200", method: "LIST", path: "/org/myorg/secrets/nope", as: alice, status: 200, want: "{\"exists\":false}\n"},
		{name: "exists, own user secret", method: "LIST", path: "/org/myorg/secrets/user/alice/token", as: alice, status: 200, want: "{\"exists\":true}\n"},
		{name: "exists, node secret", method: "LIST", path: "/org/myorg/secrets/node/n1/cert", as: alice, status: 200, want: "{\"exists\":true}\n"},
		{name: "exists, own user+node secret", method: "LIST", path: "/org/myorg/secrets/user/alice/node/n1/key", as: alice, status: 200, want: "{\"exists\":true}\n"},
		{name: "exists, another user's secret as a user", method: "LIST", path: "/org/myorg/secrets/user/bob/token", as: alice, status: 403,
			want: jsonString(`Permission denied, user "alice" cannot list secret "/user/bob/token" in organization "myorg"`)},
		{name: "exists, another user's secret as an admin", method: "LIST", path: "/org/myorg/secrets/user/bob/token", as: admin, status: 200, want: "{\"exists\":true}\n"},

		// Read, GET: L1398-1405 (L1662, L1860, L2064).
		{name: "read as admin", method: "GET", path: "/org/myorg/secrets/hw-secret-name", as: admin, status: 200, want: "{\"key\":\"name\",\"value\":\"World\"}\n"},
		{name: "read the org's as a user", method: "GET", path: "/org/myorg/secrets/hw-secret-name", as: alice, status: 403,
			want: jsonString(`Permission denied, user "alice" cannot read secret "hw-secret-name" in organization "myorg"`)},
		{name: "read own as a user", method: "GET", path: "/org/myorg/secrets/user/alice/token", as: alice, status: 200, wantJSON: `{"key":"name","value":"alice-value"}`},
		{name: "read another user's as an admin", method: "GET", path: "/org/myorg/secrets/user/bob/token", as: admin, status: 403, contains: `cannot read secret "/user/bob/token"`},
		{name: "read a missing one (errCheck L1209-1214)", method: "GET", path: "/org/myorg/secrets/nope", as: admin, status: 404,
			want: jsonString(`No secret(s) found under secret name "nope"`)},

		// Write, PUT and POST: L1414-1475 (L1678-1745, L1876-1943, L2080-2152); the body hzn sends, SecretAdd L221-254.
		{name: "write as admin", method: "PUT", path: "/org/myorg/secrets/new", as: admin, body: `{"key":"k","value":"v"}`, status: 201, want: jsonString("Secret created/updated.")},
		{name: "write with POST", method: "POST", path: "/org/myorg/secrets/node/n2/new", as: admin, body: `{"key":"k","value":"v"}`, status: 201},
		{name: "write the org's as a user", method: "PUT", path: "/org/myorg/secrets/new", as: alice, body: `{"key":"k","value":"v"}`, status: 403, contains: `cannot create secret "new"`},
		{name: "write own as a user", method: "PUT", path: "/org/myorg/secrets/user/alice/new", as: alice, body: `{"key":"k","value":"v"}`, status: 201},
		{name: "write with a bearer token (L785-795)", method: "PUT", path: "/org/myorg/secrets/user/alice/node/n1/new", as: "bearer", body: `{"key":"k","value":"v"}`, status: 201},
		{name: "write another user's as an admin", method: "PUT", path: "/org/myorg/secrets/user/bob/new", as: admin, body: `{"key":"k","value":"v"}`, status: 403},
		{name: "write with an empty body (parseSecretDetails L1141-1143)", method: "PUT", path: "/org/myorg/secrets/new", as: admin, status: 400, contains: "Request body parse error"},
		{name: "write without a value", method: "PUT", path: "/org/myorg/secrets/new", as: admin, body: `{"key":"k"}`, status: 400, contains: `member "value" missing`},
		{name: "write with another member", method: "PUT", path: "/org/myorg/secrets/new", as: admin, body: `{"key":"k","value":"v","x":1}`, status: 400, contains: "x"},

		// Delete: L1516-1523 (L1790-1796, L1988-1994, L2197-2203).
		{name: "delete as admin", method: "DELETE", path: "/org/myorg/secrets/db/password", as: admin, status: 204},
		{name: "delete a missing one (vault.go deleteSecret lists first)", method: "DELETE", path: "/org/myorg/secrets/nope", as: admin, status: 404, contains: "No secret(s) found"},
		{name: "delete another user's as an admin", method: "DELETE", path: "/org/myorg/secrets/user/bob/token", as: admin, status: 204},
		{name: "delete the org's as a user", method: "DELETE", path: "/org/myorg/secrets/hw-secret-name", as: alice, status: 403, contains: `cannot remove secret`},
		{name: "delete own as a user", method: "DELETE", path: "/org/myorg/secrets/user/alice/token", as: alice, status: 204},
		{name: "another method on a name", method: "PATCH", path: "/org/myorg/secrets/db/password", as: admin, status: 405, allow: "GET, LIST, PUT, POST, DELETE, OPTIONS"},
		{name: "OPTIONS without credentials", method: "OPTIONS", path: "/org/myorg/secrets/db/password", status: 200, allow: "GET, LIST, PUT, POST, DELETE, OPTIONS"},

		// Credentials: processExchangeCred L775-810.
		{name: "no credentials (L796-799)", method: "LIST", path: "/org/myorg/secrets", status: 401, want: jsonString("Unauthorized. No exchange user id is supplied.")},
		{name: "a wrong password (L802-805)", method: "LIST", path: "/org/myorg/secrets", as: "myorg/unknown", status: 401, want: jsonString("Failed to authenticate the user with the Exchange.")},
		{name: "a bearer token with anax's headers", method: "LIST", path: "/org/myorg/secrets/user/alice", as: "bearer", status: 200},
		{name: "another organisation's caller", method: "LIST", path: "/org/myorg/secrets/db/password", as: carol, status: 403},
		{name: "another organisation's caller in its own", method: "GET", path: "/org/otherorg/secrets/db/password", as: carol, status: 200, wantJSON: `{"key":"name","value":"otherorg-value"}`},

		// Names: vaultSecretPreCheck L2214-2240, orgSecret L1343-1349, and binding.ParseVaultSecretName.
		{name: "user without a secret or directory (L2230-2232)", method: "LIST", path: "/org/myorg/secrets/user", as: alice, status: 400, contains: "Incorrect secret name provided"},
		{name: "user node without a node (L2233-2234)", method: "LIST", path: "/org/myorg/secrets/user/alice/node", as: alice, status: 400, contains: "needs a node"},
		{name: "the store prefix", method: "LIST", path: "/org/myorg/secrets/openhorizon/myorg/db", as: alice, status: 400, contains: "openhorizon/"},
		{name: "a dot-dot segment", method: "GET", path: "/org/myorg/secrets/db/../../otherorg/db", as: admin, status: 400},
		{name: "an empty name", method: "GET", path: "/org/myorg/secrets/", as: admin, status: 400, contains: "empty"},
		{name: "not a route", method: "LIST", path: "/org/myorg/other", as: admin, status: 404},
		{name: "allsecrets takes nothing after it", method: "LIST", path: "/org/myorg/allsecrets/x", as: admin, status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, secretsapi.Options{})
			r := f.do(t, tt.method, tt.path, tt.as, tt.body)
			require.Equal(t, tt.status, r.status, "body: %s", r.body)
			assert.Equal(t, tt.allow, r.header.Get("Allow"))
			switch {
			case tt.want != "":
				assert.Equal(t, tt.want, r.body)
			case tt.wantJSON != "":
				assert.JSONEq(t, tt.wantJSON, r.body)
			case tt.contains != "":
				var msg string
				require.NoError(t, json.Unmarshal([]byte(r.body), &msg), r.body)
				assert.Contains(t, msg, tt.contains)
			}
			if r.status != 204 && r.status != 200 || tt.method != "OPTIONS" && r.status != 204 {
				assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			}
			if r.status >= 400 && r.status != 405 {
				var msg string
				require.NoError(t, json.Unmarshal([]byte(r.body), &msg), "errors are a JSON string, which hzn unquotes")
			}
			for _, v := range fixtureSecrets {
				if r.status != 200 || tt.method != "GET" {
					assert.NotContains(t, r.body, v, "no value outside a read")
				}
			}
		})
	}
}

// What the writes and deletes did to the store, and what they logged.
func TestWritesAndDeletesReachTheStore(t *testing.T) {
	f := newFixture(t, secretsapi.Options{})
	require.Equal(t, 201, f.do(t, "PUT", "/org/myorg/secrets/hw-secret-name", "myorg/admin", `{"key":"name","value":"Everyone"}`).status)
	v, ok := f.value(t, "myorg/hw-secret-name")
	require.True(t, ok)
	assert.Equal(t, "Everyone", v)
	s, err := f.store.Inner.Get(t.Context(), "myorg/hw-secret-name")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"owner": "test"}, s.Labels, "labels kept")
	assert.Equal(t, ohData("name", "Everyone"), s.Data)

	require.Equal(t, 201, f.do(t, "POST", "/org/myorg/secrets/user/alice/new", "myorg/alice", `{"key":"","value":"x<y"}`).status)
	s, err = f.store.Inner.Get(t.Context(), "myorg/user/alice/new")
	require.NoError(t, err)
	assert.Equal(t, ohData("", "x<y"), s.Data)

	require.Equal(t, 204, f.do(t, "DELETE", "/org/myorg/secrets/user/bob/token", "myorg/admin", "").status)
	_, ok = f.value(t, "myorg/user/bob/token")
	assert.False(t, ok)

	logs := f.logs.String()
	assert.Contains(t, logs, `"msg":"secret written","caller":"myorg/admin (admin)","org":"myorg","vaultSecret":"hw-secret-name","action":"create","changed":true`)
	assert.Contains(t, logs, `"msg":"secret written","caller":"myorg/alice (user)","org":"myorg","vaultSecret":"user/alice/new","action":"create","changed":true`)
	assert.Contains(t, logs, `"msg":"secret deleted","caller":"myorg/admin (admin)","org":"myorg","vaultSecret":"user/bob/token","action":"remove"`)
	for _, never := range []string{"Everyone", "x<y", "admin-pw", "alice-pw"} {
		assert.NotContains(t, logs, never)
	}
}

// The whole authorization matrix, as one table: role × scope × action.
// It follows open-horizon/vault-exchange-auth plugin/policy.go (commit
// e0df8dc2df57d3c01fb8c9dfb59deb8be4f4c0cd): ADMIN_ORG_WIDE_POLICY1/2 and
// USER_PRIVATE_DENY_POLICY1 for admins (lines 16-17, 23, 158-163);
// NON_ADMIN_ORG_WIDE_POLICY, USER_PRIVATE_DENY_POLICY1/2 and
// USER_PRIVATE_POLICY1-3 for users (lines 22-29, 165-171); nothing for
// nodes. Each row is checked through the HTTP API, on a secret of that
// scope (policy_internal_test.go checks the matrix itself).
func TestAuthorizationMatrix(t *testing.T) {
	type row struct {
		as                                 string
		role                               secretsapi.Role
		scope                              string
		read, list, exists, write, delete_ bool
	}
	const Y, N = true, false
	matrix := []row{
		{"myorg/admin", secretsapi.RoleAdmin, "org", Y, Y, Y, Y, Y},
		{"myorg/admin", secretsapi.RoleAdmin, "node", Y, Y, Y, Y, Y},
		{"myorg/admin", secretsapi.RoleAdmin, "own user", Y, Y, Y, Y, Y},
		{"myorg/admin", secretsapi.RoleAdmin, "other user", N, Y, Y, N, Y},
		{"myorg/alice", secretsapi.RoleUser, "org", N, Y, Y, N, N},
		{"myorg/alice", secretsapi.RoleUser, "node", N, Y, Y, N, N},
		{"myorg/alice", secretsapi.RoleUser, "own user", Y, Y, Y, Y, Y},
		{"myorg/alice", secretsapi.RoleUser, "other user", N, N, N, N, N},
		{"myorg/n1", secretsapi.RoleNode, "org", N, N, N, N, N},
		{"myorg/n1", secretsapi.RoleNode, "node", N, N, N, N, N},
		{"myorg/n1", secretsapi.RoleNode, "other user", N, N, N, N, N},
		// A node has no user secrets: "user/n1/..." is another user's to it.
	}
	// A secret and a directory of each scope, as seen by the row's caller.
	secretOf := map[string]map[string][2]string{
		"myorg/admin": {"org": {"db/password", ""}, "node": {"node/n1/cert", "/node/n1"},
			"own user": {"user/admin/own", "/user/admin"}, "other user": {"user/bob/token", "/user/bob"}},
		"myorg/alice": {"org": {"db/password", ""}, "node": {"node/n1/cert", "/node/n1"},
			"own user": {"user/alice/node/n1/key", "/user/alice/node/n1"}, "other user": {"user/bob/node/n1/key", "/user/bob/node/n1"}},
		"myorg/n1": {"org": {"db/password", ""}, "node": {"node/n1/cert", "/node/n1"},
			"other user": {"user/bob/token", "/user/bob"}},
	}
	for _, r := range matrix {
		t.Run(r.role.String()+" on "+r.scope, func(t *testing.T) {
			f := newFixture(t, secretsapi.Options{})
			name, dir := secretOf[r.as][r.scope][0], secretOf[r.as][r.scope][1]
			requests := []struct {
				allowed      bool
				method, path string
				body         string
			}{
				{r.read, "GET", "/org/myorg/secrets/" + name, ""},
				{r.list, "LIST", "/org/myorg/secrets" + dir, ""},
				{r.exists, "LIST", "/org/myorg/secrets/" + name, ""},
				{r.write, "PUT", "/org/myorg/secrets/" + name, `{"key":"k","value":"new"}`},
				{r.delete_, "DELETE", "/org/myorg/secrets/" + name, ""},
			}
			for _, req := range requests {
				resp := f.do(t, req.method, req.path, r.as, req.body)
				if req.allowed {
					assert.NotEqual(t, http.StatusForbidden, resp.status, "%s %s: %s", req.method, req.path, resp.body)
					assert.Less(t, resp.status, 300, "%s %s: %s", req.method, req.path, resp.body)
				} else {
					assert.Equal(t, http.StatusForbidden, resp.status, "%s %s: %s", req.method, req.path, resp.body)
				}
			}
		})
	}
}

// A caller never learns whether a secret it may not see exists: for every
// refused action the status and body are the same for a present and an
// absent secret, and the store is not asked.
func TestRefusalsDoNotRevealExistence(t *testing.T) {
	cases := []struct {
		as, present, absent string
	}{
		{"myorg/alice", "user/bob/token", "user/bob/nothing"},
		{"myorg/alice", "user/bob/node/n1/key", "user/bob/node/n1/nothing"},
		{"myorg/n1", "node/n1/cert", "node/n1/nothing"},
		{"myorg/n1", "hw-secret-name", "nothing"},
		{"otherorg/carol", "hw-secret-name", "nothing"},
	}
	for _, c := range cases {
		for _, m := range []struct{ method, body string }{{"LIST", ""}, {"GET", ""}, {"PUT", `{"key":"k","value":"v"}`}, {"POST", `{"key":"k","value":"v"}`}, {"DELETE", ""}} {
			t.Run(c.as+" "+m.method+" "+c.present, func(t *testing.T) {
				f := newFixture(t, secretsapi.Options{})
				present := f.do(t, m.method, "/org/myorg/secrets/"+c.present, c.as, m.body)
				absent := f.do(t, m.method, "/org/myorg/secrets/"+c.absent, c.as, m.body)
				assert.Equal(t, http.StatusForbidden, present.status)
				assert.Equal(t, present.status, absent.status)
				assert.Equal(t, present.body, strings.ReplaceAll(absent.body, c.absent, c.present), "same sentence, but for the name asked")
				assert.Empty(t, f.store.Calls("", ""), "the store is not asked")
			})
		}
	}
	// The design route too.
	f := newFixture(t, secretsapi.Options{})
	present := f.do(t, "GET", "/secrets/user/bob/token", "myorg/alice", "")
	absent := f.do(t, "GET", "/secrets/user/bob/nothing", "myorg/alice", "")
	assert.Equal(t, http.StatusForbidden, present.status)
	assert.Equal(t, present.status, absent.status)
	assert.Equal(t, present.body, strings.ReplaceAll(absent.body, "nothing", "token"))
	assert.Empty(t, f.store.Calls("", ""))
}

// The design's existence route, GET /secrets/{name}: the organisation is
// the caller's.
func TestDesignExistenceRoute(t *testing.T) {
	tests := []struct {
		name, method, path, as string
		status                 int
		wantJSON               string
		code                   string
	}{
		{"exists", "GET", "/secrets/db/password", "myorg/alice", 200, `{"exists":true}`, ""},
		{"missing", "GET", "/secrets/nope", "myorg/alice", 404, `{"exists":false}`, ""},
		{"own user secret", "GET", "/secrets/user/alice/token", "myorg/alice", 200, `{"exists":true}`, ""},
		{"another organisation's secret is not visible", "GET", "/secrets/db/password", "otherorg/carol", 200, `{"exists":true}`, ""},
		{"another user's secret", "GET", "/secrets/user/bob/token", "myorg/alice", 403, "", secretsapi.CodeForbidden},
		{"another user's secret as an admin", "GET", "/secrets/user/bob/token", "myorg/admin", 200, `{"exists":true}`, ""},
		{"a node", "GET", "/secrets/node/n1/cert", "myorg/n1", 403, "", secretsapi.CodeForbidden},
		{"an invalid name", "GET", "/secrets/user/alice", "myorg/alice", 400, "", secretsapi.CodeInvalidName},
		{"the store prefix", "GET", "/secrets/openhorizon/myorg/db", "myorg/alice", 400, "", secretsapi.CodeInvalidName},
		{"an empty name", "GET", "/secrets/", "myorg/alice", 400, "", secretsapi.CodeInvalidName},
		{"no credentials", "GET", "/secrets/db/password", "", 401, "", secretsapi.CodeUnauthorized},
		{"another method", "POST", "/secrets/db/password", "myorg/admin", 405, "", secretsapi.CodeMethod},
		{"not a route", "GET", "/nothing", "myorg/admin", 404, "", secretsapi.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, secretsapi.Options{})
			r := f.do(t, tt.method, tt.path, tt.as, "")
			require.Equal(t, tt.status, r.status, r.body)
			if tt.code == "" {
				assert.JSONEq(t, tt.wantJSON, r.body)
				return
			}
			var e secretsapi.ErrorBody
			require.NoError(t, json.Unmarshal([]byte(r.body), &e))
			assert.Equal(t, tt.code, e.Code)
			assert.NotEmpty(t, e.Error)
		})
	}
	f := newFixture(t, secretsapi.Options{})
	f.do(t, "GET", "/secrets/db/password", "myorg/alice", "")
	assert.Empty(t, f.store.Calls("get", ""), "existence is checked with Stat only")
	assert.Len(t, f.store.Calls("stat", ""), 1)
}

// 503 when no store is configured or it is unavailable; the store refusing
// the agbot is 503 too (L1094-1104).
func TestStoreMissingOrFailing(t *testing.T) {
	t.Run("no store", func(t *testing.T) {
		f := newBareFixture(t)
		for _, req := range []struct{ method, path string }{{"LIST", "/org/myorg/secrets/db"}, {"GET", "/org/myorg/secrets/db"}, {"LIST", "/org/myorg/allsecrets"}, {"GET", "/secrets/db"}} {
			r := f.do(t, req.method, req.path, "myorg/alice", "")
			assert.Equal(t, 503, r.status, req)
			assert.Contains(t, r.body, "no secrets provider configured")
		}
		assert.Equal(t, 401, f.do(t, "GET", "/org/myorg/secrets/db", "", "").status, "credentials first")
	})
	for _, tc := range []struct {
		name  string
		fault func(f *fixture)
		want  string
	}{
		{"unavailable", func(f *fixture) { f.store.SetFaults(mock.Faults{Fail: edgesecrets.ErrUnavailable}) }, "not ready"},
		{"refusing the agbot", func(f *fixture) {
			f.store.SetFaults(mock.Faults{Fail: edgesecrets.ErrPermission})
		}, "refused the agbot's credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, secretsapi.Options{})
			tc.fault(f)
			for _, req := range []struct{ method, path, body string }{
				{"LIST", "/org/myorg/secrets/db", ""}, {"GET", "/org/myorg/secrets/db", ""}, {"LIST", "/org/myorg/secrets", ""},
				{"PUT", "/org/myorg/secrets/db", `{"key":"k","value":"v"}`}, {"DELETE", "/org/myorg/secrets/db", ""},
			} {
				r := f.do(t, req.method, req.path, "myorg/admin", req.body)
				assert.Equal(t, 503, r.status, req)
				assert.Contains(t, r.body, tc.want)
			}
			var e secretsapi.ErrorBody
			r := f.do(t, "GET", "/secrets/db", "myorg/admin", "")
			require.NoError(t, json.Unmarshal([]byte(r.body), &e))
			assert.Equal(t, 503, r.status)
			assert.Contains(t, []string{secretsapi.CodeStoreUnavailable, secretsapi.CodeStoreForbidden}, e.Code)
		})
	}
}

func TestBodyLimit(t *testing.T) {
	f := newFixture(t, secretsapi.Options{MaxBodyBytes: 64})
	r := f.do(t, "PUT", "/org/myorg/secrets/db", "myorg/admin", `{"key":"k","value":"`+strings.Repeat("x", 100)+`"}`)
	assert.Equal(t, 400, r.status, "hzn handles 201, 400, 401, 403 and 503 on a write, not 413")
	assert.Contains(t, r.body, "larger than 64 bytes")
	_, err := secretsapi.NewHandler(secretsapi.Options{Authenticate: authenticate, MaxBodyBytes: -1})
	assert.Error(t, err)
	_, err = secretsapi.NewHandler(secretsapi.Options{})
	assert.ErrorContains(t, err, "Authenticate")
}

// /health in anax's shape (agreementbot/api.go lines 678-700,
// apicommon/status.go Info), without credentials.
func TestHealth(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := newFixture(t, secretsapi.Options{Store: memory.New(), LastDBHeartbeat: func() time.Time { return now.Add(time.Second) },
		Configuration: secretsapi.HealthConfiguration{ExchangeAPI: "https://hub/edge-exchange/v1/", Arch: "arm64"}})
	r := f.do(t, "GET", "/health", "", "")
	require.Equal(t, 200, r.status)
	assert.JSONEq(t, `{"configuration":{"exchange_api":"https://hub/edge-exchange/v1/","required_minimum_exchange_version":"","preferred_exchange_version":"","mms_api":"","architecture":"arm64","horizon_version":""},
		"liveHealth":{"lastDBHeartbeat":1700000001,"lastVaultInteraction":0}}`, r.body)

	before := time.Now().Unix()
	f.do(t, "LIST", "/org/myorg/secrets/nope", "myorg/alice", "") // an answer, even "missing", counts
	after := time.Now().Unix()
	r = f.do(t, "GET", "/health", "", "")
	var h secretsapi.Health
	require.NoError(t, json.Unmarshal([]byte(r.body), &h))
	assert.GreaterOrEqual(t, h.LiveHealth.LastVaultInteraction, uint64(before))
	assert.LessOrEqual(t, h.LiveHealth.LastVaultInteraction, uint64(after))
	assert.Equal(t, 405, f.do(t, "POST", "/health", "", "").status)

	r = newBareFixture(t).do(t, "GET", "/health", "", "")
	require.NoError(t, json.Unmarshal([]byte(r.body), &h))
	assert.Zero(t, h.LiveHealth.LastVaultInteraction)
	assert.NotEmpty(t, h.Configuration.Arch, "runtime.GOARCH by default")
}

func TestCredentialsNeverPrint(t *testing.T) {
	c := secretsapi.Credentials{Org: "myorg", User: "alice", Secret: "canary-pw"}
	f := newFixture(t, secretsapi.Options{})
	f.do(t, "LIST", "/org/myorg/secrets", "myorg/unknown", "")
	for _, s := range []string{fmtAll(c), f.logs.String()} {
		assert.NotContains(t, s, "canary-pw")
	}
}

// A Prefer: wait bounds the store calls of a request: a store that takes
// longer gets a 503 in time; the handler says it applied the preference.
func TestPreferredWaitBoundsTheStore(t *testing.T) {
	f := newFixture(t, secretsapi.Options{})
	f.store.SetFaults(mock.Faults{Op: "stat", Latency: time.Hour})
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.server.URL+"/secrets/hw-secret-name", nil)
	require.NoError(t, err)
	req.SetBasicAuth("myorg/alice", "alice-pw")
	req.Header.Set("Prefer", "respond-async, wait=1")
	start := time.Now()
	resp, err := f.server.Client().Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "wait=1", resp.Header.Get("Preference-Applied"))
	assert.Less(t, time.Since(start), 10*time.Second, "answered at the preferred wait, not after the store")
	assert.GreaterOrEqual(t, time.Since(start), time.Second)
}

// Without Options.Operations the operator paths are not the handler's:
// they reach Fallback, the embedder's, untouched.
func TestOperatorPathsWithoutOperationsReachFallback(t *testing.T) {
	var reached []string
	fallback := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	})
	f := newFixture(t, secretsapi.Options{Fallback: fallback})
	for _, tc := range []struct{ method, path string }{
		{"GET", secretsapi.AdminHealthPath},
		{"GET", secretsapi.AgreementsPath},
		{"GET", secretsapi.AgreementsPath + "/a1"},
		{"POST", secretsapi.ReleasePath},
	} {
		r := f.do(t, tc.method, tc.path, "myorg/admin", "")
		assert.Equal(t, http.StatusTeapot, r.status, tc.path)
	}
	assert.Equal(t, []string{"GET /admin/health", "GET /admin/agreements", "GET /admin/agreements/a1", "POST /admin/cancellations/release"}, reached)
}
