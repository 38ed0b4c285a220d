package ohtest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/internal/testkit/ohtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
)

func TestMain(m *testing.M) { os.Exit(vaulttest.Main(m)) }

// get sends GET url with basic auth id:secret (none when id is empty) and
// returns the status and the decoded JSON body (nil if not JSON).
func get(t *testing.T, url, id, secret string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	if id != "" {
		req.SetBasicAuth(id, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, body
}

func TestExchangeAnswersAsTheRealOne(t *testing.T) {
	ex := ohtest.StartExchange(t)
	ex.AddUser("org1", "admin", "adminpw", true)
	ex.AddUser("org1", "alice", "alicepw", false)
	ex.AddUser("org2", "carol", "carolpw", true)
	ex.AddAgbot("org1", "agbot1", "agbottok")
	ex.AddNode("org1", "node1", "nodetok")

	for _, tc := range []struct {
		name, path, id, secret string
		status                 int
		key                    string // the map holding the resource: "users", "agbots", "nodes"
		found                  string // the key expected in it, "" for an empty map
	}{
		{"user reads itself", "/orgs/org1/users/alice", "org1/alice", "alicepw", 200, "users", "org1/alice"},
		{"admin reads a user of its org", "/orgs/org1/users/alice", "org1/admin", "adminpw", 200, "users", "org1/alice"},
		{"admin reads a missing user", "/orgs/org1/users/nobody", "org1/admin", "adminpw", 404, "users", ""},
		{"user reads another user", "/orgs/org1/users/admin", "org1/alice", "alicepw", 403, "", ""},
		{"admin of another org", "/orgs/org1/users/alice", "org2/carol", "carolpw", 403, "", ""},
		{"wrong password", "/orgs/org1/users/alice", "org1/alice", "wrong", 401, "", ""},
		{"no credentials", "/orgs/org1/users/alice", "", "", 401, "", ""},
		{"id without org", "/orgs/org1/users/alice", "alice", "alicepw", 401, "", ""},
		{"agbot reads itself", "/orgs/org1/agbots/agbot1", "org1/agbot1", "agbottok", 200, "agbots", "org1/agbot1"},
		{"user looks up itself as an agbot", "/orgs/org1/agbots/alice", "org1/alice", "alicepw", 404, "agbots", ""},
		{"agbot token is not a user password", "/orgs/org1/users/agbot1", "org1/agbot1", "agbottok", 403, "", ""},
		{"node reads itself", "/orgs/org1/nodes/node1", "org1/node1", "nodetok", 200, "nodes", "org1/node1"},
		{"agbot reads a node", "/orgs/org1/nodes/node1", "org1/agbot1", "agbottok", 200, "nodes", "org1/node1"},
		{"user of another org reads a node", "/orgs/org1/nodes/node1", "org2/carol", "carolpw", 403, "", ""},
		{"node reads an agbot", "/orgs/org1/agbots/agbot1", "org1/node1", "nodetok", 403, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, ex.URL+tc.path, tc.id, tc.secret)
			require.Equal(t, tc.status, status)
			switch {
			case tc.key != "":
				m, ok := body[tc.key].(map[string]any)
				require.True(t, ok, "body has %q: %v", tc.key, body)
				if tc.found == "" {
					assert.Empty(t, m)
					return
				}
				require.Contains(t, m, tc.found)
				assert.Len(t, m, 1)
			case status == 401:
				assert.Equal(t, "invalid-credentials", body["code"])
			case status == 403:
				assert.Equal(t, "access-denied", body["code"])
			}
		})
	}

	t.Run("the admin flag", func(t *testing.T) {
		_, body := get(t, ex.URL+"/orgs/org1/users/admin", "org1/admin", "adminpw")
		admin := body["users"].(map[string]any)["org1/admin"].(map[string]any)
		assert.Equal(t, true, admin["admin"])
		require.True(t, ex.SetAdmin("org1", "admin", false))
		_, body = get(t, ex.URL+"/orgs/org1/users/admin", "org1/admin", "adminpw")
		admin = body["users"].(map[string]any)["org1/admin"].(map[string]any)
		assert.Equal(t, false, admin["admin"])
		assert.False(t, ex.SetAdmin("org1", "nobody", true))
	})

	t.Run("version, unauthenticated", func(t *testing.T) {
		resp, err := http.Get(ex.URL + "/admin/version")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, ohtest.Version, string(b))
	})

	t.Run("requests are recorded without credentials", func(t *testing.T) {
		reqs := ex.Requests()
		require.NotEmpty(t, reqs)
		first := reqs[0]
		assert.Equal(t, ohtest.Request{Method: "GET", Path: "/v1/orgs/org1/users/alice", Claimed: "org1/alice", Identity: "org1/alice", Kind: ohtest.KindUser, Status: 200}, first)
		var refused *ohtest.Request
		for i := range reqs {
			if reqs[i].Claimed == "org1/alice" && reqs[i].Status == 401 {
				refused = &reqs[i]
			}
		}
		require.NotNil(t, refused, "the wrong-password request is recorded")
		assert.Empty(t, refused.Identity, "a refused request authenticated as nobody")
		dump := fmt.Sprintf("%+v", reqs)
		for _, secret := range []string{"adminpw", "alicepw", "carolpw", "agbottok", "nodetok"} {
			assert.NotContains(t, dump, secret)
		}
	})
}

func TestStartNeedsThePluginAndVault(t *testing.T) {
	t.Setenv(ohtest.EnvPluginDir, "")
	testkit.CheckUnavailable(t, func(tb testing.TB) { ohtest.Start(tb, ohtest.Options{}) },
		ohtest.EnvPluginDir+" is not set", "scripts/devvaultauth.sh")
	t.Setenv(ohtest.EnvPluginDir, t.TempDir())
	testkit.CheckUnavailable(t, func(tb testing.TB) { ohtest.PluginDir(tb) }, ohtest.PluginBinary, "scripts/devvaultauth.sh")
}

// login logs id in through auth/openhorizon and returns the answer.
func login(t *testing.T, h *ohtest.Hub, id, token string) (*api.Secret, error) {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: h.VaultAddr})
	require.NoError(t, err)
	c.ClearToken()
	return c.Logical().WriteWithContext(t.Context(), "auth/"+ohtest.AuthMount+"/login", map[string]any{"id": id, "token": token})
}

func TestHubLogsExchangeIdentitiesInToVault(t *testing.T) {
	h := ohtest.Start(t, ohtest.Options{})
	h.AddAgbot("org1", "agbot1", "agbottok")
	h.AddUser("org1", "admin", "adminpw", true)
	h.AddUser("org1", "alice", "alicepw", false)

	t.Run("agbot", func(t *testing.T) {
		s, err := login(t, h, "org1/agbot1", "agbottok")
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"default", ohtest.AgbotPolicy}, s.Auth.TokenPolicies)
		assert.True(t, s.Auth.Renewable, "an agbot's token is periodic and renewable")
	})
	t.Run("admin and user", func(t *testing.T) {
		s, err := login(t, h, "org1/admin", "adminpw")
		require.NoError(t, err)
		assert.Contains(t, s.Auth.TokenPolicies, "openhorizon-org1-admin-admin")
		assert.Equal(t, "org1/admin", s.Auth.Metadata["exchangeUser"])
		s, err = login(t, h, "org1/alice", "alicepw")
		require.NoError(t, err)
		assert.Contains(t, s.Auth.TokenPolicies, "openhorizon-org1-alice")
		assert.False(t, s.Auth.Renewable, "a user's token is not renewable")
	})
	t.Run("wrong password", func(t *testing.T) {
		_, err := login(t, h, "org1/alice", "wrong")
		var re *api.ResponseError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, http.StatusForbidden, re.StatusCode)
	})
	t.Run("the plugin asked the stub exchange", func(t *testing.T) {
		var saw []string
		for _, r := range h.Requests() {
			saw = append(saw, fmt.Sprintf("%s %s %s %d", r.Method, r.Path, r.Identity, r.Status))
		}
		all := strings.Join(saw, "\n")
		assert.Contains(t, all, "GET /v1/admin/version  200", "the config call checked the exchange URL")
		assert.Contains(t, all, "GET /v1/orgs/org1/agbots/agbot1 org1/agbot1 200")
		assert.Contains(t, all, "GET /v1/orgs/org1/users/alice org1/alice 200")
	})
	t.Run("the KV mount", func(t *testing.T) {
		_, err := h.VaultClient(t).KVv2(ohtest.KVMount).Put(t.Context(), "org1/x", map[string]any{"k": "v"})
		require.NoError(t, err)
	})
}
