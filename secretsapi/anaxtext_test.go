package secretsapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// Refusals are worded, and coded, as anax words them for each route
// (open-horizon/anax commit 2f3fa5a506d6565fa68858b7963450567ddda114,
// agreementbot/secure_api.go): errCheck's "Permission denied, user %q
// cannot <verb> secret %q in organization %q" (line 1186), "secrets" and
// no name for the organisation's directory (line 1184), the name as
// lines 1168-1176 build it (a leading slash before user/ and node/), and
// the verb of the route's call: "list" for LIST on a directory (line
// 2268) and on a name (line 2299), "read" for GET (lines 1401, 1665,
// 1863, 2067), "create" for PUT and POST (lines 1472, 1741, 1939, 2148),
// "remove" for DELETE (lines 1519, 1792, 1990, 2199); "No secret(s)
// found under secret name %q" for a missing secret (line 1213).
func TestRefusalsAsAnaxWordsThem(t *testing.T) {
	const alice, node = "myorg/alice", "myorg/n1"
	tests := []struct {
		name, method, path, as, body string
		status                       int
		want                         string
	}{
		{"LIST another user's secret (L2299)", "LIST", "/org/myorg/secrets/user/bob/token", alice, "", 403,
			`Permission denied, user "alice" cannot list secret "/user/bob/token" in organization "myorg"`},
		{"LIST another user's node secret (L1170, L2299)", "LIST", "/org/myorg/secrets/user/bob/node/n1/key", alice, "", 403,
			`Permission denied, user "alice" cannot list secret "/user/bob/node/n1/key" in organization "myorg"`},
		{"LIST another user's directory (L1172, L2268)", "LIST", "/org/myorg/secrets/user/bob", alice, "", 403,
			`Permission denied, user "alice" cannot list secret "/user/bob" in organization "myorg"`},
		{"LIST the organisation's directory as a node (L1184, L2268)", "LIST", "/org/myorg/secrets", node, "", 403,
			`Permission denied, user "n1" cannot list secrets in organization "myorg"`},
		{"LIST allsecrets as a node (L1184)", "LIST", "/org/myorg/allsecrets", node, "", 403,
			`Permission denied, user "n1" cannot list secrets in organization "myorg"`},
		{"GET another user's secret (L1665)", "GET", "/org/myorg/secrets/user/bob/token", alice, "", 403,
			`Permission denied, user "alice" cannot read secret "/user/bob/token" in organization "myorg"`},
		{"GET an organisation secret as a user (L1401)", "GET", "/org/myorg/secrets/db/password", alice, "", 403,
			`Permission denied, user "alice" cannot read secret "db/password" in organization "myorg"`},
		{"PUT an organisation secret as a user (L1472)", "PUT", "/org/myorg/secrets/new", alice, `{"key":"k","value":"v"}`, 403,
			`Permission denied, user "alice" cannot create secret "new" in organization "myorg"`},
		{"POST a node secret as a user (L1174, L1939)", "POST", "/org/myorg/secrets/node/n1/cert", alice, `{"key":"k","value":"v"}`, 403,
			`Permission denied, user "alice" cannot create secret "/node/n1/cert" in organization "myorg"`},
		{"DELETE an organisation secret as a user (L1519)", "DELETE", "/org/myorg/secrets/hw-secret-name", alice, "", 403,
			`Permission denied, user "alice" cannot remove secret "hw-secret-name" in organization "myorg"`},
		{"DELETE another user's secret (L1792)", "DELETE", "/org/myorg/secrets/user/bob/token", alice, "", 403,
			`Permission denied, user "alice" cannot remove secret "/user/bob/token" in organization "myorg"`},
		{"GET a missing user secret (L1213)", "GET", "/org/myorg/secrets/user/alice/nothing", alice, "", 404,
			`No secret(s) found under secret name "/user/alice/nothing"`},
		{"DELETE a missing organisation secret (L1213)", "DELETE", "/org/myorg/secrets/nothing", "myorg/admin", "", 404,
			`No secret(s) found under secret name "nothing"`},
	}
	f := newFixture(t, secretsapi.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.path, tt.as, tt.body)
			require.Equal(t, tt.status, r.status, r.body)
			var msg string
			require.NoError(t, json.Unmarshal([]byte(r.body), &msg), "a JSON string, which hzn unquotes: %s", r.body)
			assert.Equal(t, tt.want, msg)
		})
	}
}

// hzn secretsmanager secret add checks existence with LIST first and, on a
// refusal, prints the text with " list " rewritten to " add "
// (cli/secrets_manager/secrets_manager.go line 210 at commit 2f3fa5a): the
// user reads what anax's users read.
func TestAddRefusalAsHznPrintsIt(t *testing.T) {
	f := newFixture(t, secretsapi.Options{})
	r := f.do(t, "LIST", "/org/myorg/secrets/user/bob/token", "myorg/alice", "")
	require.Equal(t, http.StatusForbidden, r.status)
	var msg string
	require.NoError(t, json.Unmarshal([]byte(r.body), &msg))
	assert.Equal(t, `Permission denied, user "alice" cannot add secret "/user/bob/token" in organization "myorg"`,
		strings.Replace(msg, " list ", " add ", 1))
}

// A value over the store's limit per secret is answered 400, which hzn
// prints (it handles 201, 400, 401, 403 and 503 on a write,
// secrets_manager.go line 253; a 413 made it exit with "bad HTTP code
// 413"), naming the limit, and nothing is written.
func TestOversizeValue(t *testing.T) {
	tests := []struct {
		name      string
		opts      secretsapi.Options
		valueSize int
		want      string
	}{
		{"5 MiB: over the body limit, the store's limit named", secretsapi.Options{}, 5 << 20,
			"Request body is larger than 4194304 bytes; the secrets provider takes secrets of up to 1048576 bytes."},
		{"2 MiB: within the body limit, over the store's", secretsapi.Options{}, 2 << 20,
			"over the secrets provider's limit of 1048576 bytes per secret"},
		{"just over the store's limit", secretsapi.Options{}, 1<<20 - len("key") - len("k") - len("value") + 1,
			"is 1048577 bytes, over the secrets provider's limit of 1048576 bytes per secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			body := `{"key":"k","value":"` + strings.Repeat("x", tt.valueSize) + `"}`
			r := f.do(t, "PUT", "/org/myorg/secrets/big", "myorg/admin", body)
			require.Equal(t, http.StatusBadRequest, r.status)
			var msg string
			require.NoError(t, json.Unmarshal([]byte(r.body), &msg))
			assert.Contains(t, msg, tt.want)
			assert.Empty(t, f.store.Calls("put", ""), "nothing written")
		})
	}
	f := newFixture(t, secretsapi.Options{})
	body := `{"key":"k","value":"` + strings.Repeat("x", 1<<20-len("key")-len("k")-len("value")) + `"}`
	r := f.do(t, "PUT", "/org/myorg/secrets/big", "myorg/admin", body)
	assert.Equal(t, http.StatusCreated, r.status, "a secret at the limit is written")
}
