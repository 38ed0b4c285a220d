package agbotsecrets_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/vault/api"
	"github.com/open-horizon/anax/agreementbot/secrets/vault"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/anax/agbotsecrets"
	"github.com/edgesecrets/edgesecrets/anax/internal/anaxhub"
	"github.com/edgesecrets/edgesecrets/internal/testkit/ohtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// The exchange identities every side's org holds, as hzn's -u names them.
const (
	agbotOrg = "hub"
	admin    = "admin1:admin1pw"
	user1    = "user1:user1pw"
	user2    = "user2:user2pw"
	stranger = "nobody:nobodypw"
	node     = "node1"
)

// side is one agbot of a side-by-side run: anax's secure API over one
// plugin, with an org of its own in the shared exchange and Vault.
type side struct {
	name       string
	org        string
	agbotID    string
	agbotToken string
	agbot      *anaxhub.Agbot
}

// normalize replaces what differs between sides by construction (the
// org, the agbot's URL and id) with placeholders.
func (s *side) normalize(text string) string {
	return strings.NewReplacer(s.agbot.URL, "<agbot-url>", s.agbotID, "<agbot-id>", s.org, "<org>").Replace(text)
}

// addOrg adds org's users (an admin and two others) and a node to the
// hub's exchange.
func addOrg(hub *ohtest.Hub, org string) {
	for _, u := range []string{admin, user1, user2} {
		name, pw, _ := strings.Cut(u, ":")
		hub.AddUser(org, name, pw, u == admin)
	}
	hub.AddNode(org, node, node+"tok")
}

// startVaultSide starts anax's secure API over anax's own Vault plugin
// (a fresh AgbotVaultSecrets, configured as anax configures it).
func startVaultSide(t *testing.T, hub *ohtest.Hub, org, agbotName string) *side {
	t.Helper()
	s := &side{name: "vault", org: org, agbotID: agbotOrg + "/" + agbotName, agbotToken: agbotName + "tok"}
	hub.AddAgbot(agbotOrg, agbotName, s.agbotToken)
	addOrg(hub, org)
	s.agbot = anaxhub.StartAgbot(t, anaxhub.Options{
		Name: s.name, Secrets: new(vault.AgbotVaultSecrets),
		ExchangeURL: hub.ExchangeURL, VaultURL: hub.VaultAddr,
		ExchangeID: s.agbotID, ExchangeToken: s.agbotToken,
	})
	return s
}

// startEdgeSide starts anax's secure API over the edgesecrets plugin, as
// an agbot selects it: from anax's registry by its config's
// SecretsProvider, with the plugin's own config file on the hub's Vault
// logging in as the agbot through auth/openhorizon.
func startEdgeSide(t *testing.T, hub *ohtest.Hub, org, agbotName string) *side {
	t.Helper()
	s := &side{name: "edgesecrets", org: org, agbotID: agbotOrg + "/" + agbotName, agbotToken: agbotName + "tok"}
	hub.AddAgbot(agbotOrg, agbotName, s.agbotToken)
	addOrg(hub, org)
	dir := t.TempDir()
	cfg := map[string]any{
		"store": map[string]any{"type": "vault", "vault": map[string]any{
			"address": hub.VaultAddr, "mount": ohtest.KVMount, "kvVersion": "2",
			"auth": map[string]any{"method": "openhorizon"},
		}},
		"changeFile": filepath.Join(dir, "changes.json"),
	}
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	file := filepath.Join(dir, "edgesecrets.json")
	require.NoError(t, os.WriteFile(file, b, 0o600))
	s.agbot = anaxhub.StartAgbot(t, anaxhub.Options{
		Name: s.name, SecretsProvider: agbotsecrets.Name, SecretsProviderConfig: file,
		ExchangeURL: hub.ExchangeURL, VaultURL: hub.VaultAddr,
		ExchangeID: s.agbotID, ExchangeToken: s.agbotToken,
	})
	_, ok := s.agbot.Secrets.(*agbotsecrets.Plugin)
	require.True(t, ok, "anax's registry gave %T for SecretsProvider %q", s.agbot.Secrets, agbotsecrets.Name)
	return s
}

// hznCase is one hzn secretsmanager command.
type hznCase struct {
	name string
	// who is the -u credential ("user:password", the org prepended by
	// hzn); viaEnv passes it and the org as HZN_EXCHANGE_USER_AUTH and
	// HZN_ORG_ID instead of -u and -o.
	who    string
	viaEnv bool
	// args follow "hzn secretsmanager secret".
	args  []string
	stdin string
	// wantOK and want anchor the reference (anax's Vault plugin): exit
	// status 0 or not, and a text its output must hold ("" for none), so
	// that two sides failing alike do not pass.
	wantOK bool
	want   string
}

// hznCases run in order: later ones see what earlier ones wrote.
var hznCases = []hznCase{
	// org level
	{name: "admin lists an empty org", who: admin, args: []string{"list"}, wantOK: true, want: "null"},
	{name: "admin lists a missing secret", who: admin, args: []string{"list", "pw1"}, want: `"exists": false`},
	{name: "admin adds an org secret", who: admin, args: []string{"add", "--secretKey", "k1", "-d", "v1", "pw1"}, wantOK: true, want: "successfully added"},
	{name: "admin lists the org", who: admin, args: []string{"list"}, wantOK: true, want: `"pw1"`},
	{name: "admin lists the org secret", who: admin, args: []string{"list", "pw1"}, wantOK: true, want: `"exists": true`},
	{name: "admin reads the org secret", who: admin, args: []string{"read", "pw1"}, wantOK: true, want: `"value": "v1"`},
	{name: "admin overwrites after the prompt", who: admin, args: []string{"add", "--secretKey", "k1", "-d", "v2", "pw1"}, stdin: "y\n", wantOK: true, want: "successfully added"},
	{name: "admin declines the overwrite", who: admin, args: []string{"add", "--secretKey", "k1", "-d", "v3", "pw1"}, stdin: "n\n", wantOK: true, want: "Exiting."},
	{name: "admin reads the overwritten secret", who: admin, args: []string{"read", "pw1"}, wantOK: true, want: `"value": "v2"`},
	{name: "admin adds from stdin with -O", who: admin, viaEnv: true, args: []string{"add", "--secretKey", "k1", "-f-", "-O", "pw2"}, stdin: "from stdin\n", wantOK: true, want: "successfully added"},
	{name: "admin reads the stdin secret", who: admin, viaEnv: true, args: []string{"read", "pw2"}, wantOK: true, want: `from stdin`},
	{name: "admin adds a two-part secret", who: admin, args: []string{"add", "--secretKey", "k", "-d", "v", "dir/pw3"}, wantOK: true},
	{name: "admin adds a three-part secret", who: admin, args: []string{"add", "--secretKey", "k", "-d", "v", "dir/sub/pw4"}, wantOK: true},
	{name: "admin lists nested secrets", who: admin, args: []string{"list"}, wantOK: true, want: "dir/sub/pw4"},
	{name: "admin lists a directory as a secret", who: admin, args: []string{"list", "dir"}, want: `"exists": false`},
	{name: "admin lists a nested directory as a secret", who: admin, args: []string{"list", "dir/sub"}, want: `"exists": false`},
	{name: "user lists the org", who: user1, args: []string{"list"}, wantOK: true, want: `"pw1"`},
	{name: "user lists an org secret", who: user1, args: []string{"list", "pw1"}, wantOK: true, want: `"exists": true`},
	{name: "user cannot read an org secret", who: user1, args: []string{"read", "pw1"}, want: "Permission denied"},
	{name: "user cannot add an org secret", who: user1, args: []string{"add", "--secretKey", "k", "-d", "v", "-O", "pw9"}, want: "Permission denied"},
	{name: "user cannot overwrite an org secret", who: user1, args: []string{"add", "--secretKey", "k", "-d", "v", "-O", "pw1"}, want: "Permission denied"},
	{name: "user cannot remove an org secret", who: user1, args: []string{"remove", "-f", "pw1"}, want: "Permission denied"},

	// user level
	{name: "user lists its empty directory", who: user1, args: []string{"list", "user/user1"}, wantOK: true, want: "null"},
	{name: "user lists its missing secret", who: user1, args: []string{"list", "user/user1/upw"}, want: `"exists": false`},
	{name: "user adds its secret", who: user1, args: []string{"add", "--secretKey", "uk", "-d", "uv", "user/user1/upw"}, wantOK: true, want: "successfully added"},
	{name: "user lists its directory", who: user1, args: []string{"list", "user/user1"}, wantOK: true, want: `"upw"`},
	{name: "user lists its secret", who: user1, args: []string{"list", "user/user1/upw"}, wantOK: true, want: `"exists": true`},
	{name: "user reads its secret", who: user1, args: []string{"read", "user/user1/upw"}, wantOK: true, want: `"value": "uv"`},
	{name: "user overwrites its secret", who: user1, args: []string{"add", "--secretKey", "uk", "-d", "uv2", "-O", "user/user1/upw"}, wantOK: true},
	{name: "other user cannot list the directory", who: user2, args: []string{"list", "user/user1"}, want: "Permission denied"},
	{name: "other user cannot list the secret", who: user2, args: []string{"list", "user/user1/upw"}, want: "Permission denied"},
	{name: "other user cannot read the secret", who: user2, args: []string{"read", "user/user1/upw"}, want: "Permission denied"},
	{name: "other user cannot overwrite the secret", who: user2, args: []string{"add", "--secretKey", "k", "-d", "v", "-O", "user/user1/upw"}, want: "Permission denied"},
	{name: "other user cannot remove the secret", who: user2, args: []string{"remove", "-f", "user/user1/upw"}, want: "Permission denied"},
	{name: "admin lists a user's secret", who: admin, args: []string{"list", "user/user1/upw"}, wantOK: true, want: `"exists": true`},
	{name: "admin cannot read a user's secret", who: admin, args: []string{"read", "user/user1/upw"}, want: "Permission denied"},
	{name: "admin cannot add a user's secret", who: admin, args: []string{"add", "--secretKey", "k", "-d", "v", "user/user1/fake"}, want: "Permission denied"},
	{name: "admin adds its own user secret", who: admin, args: []string{"add", "--secretKey", "ak", "-d", "av", "user/admin1/apw"}, wantOK: true},
	{name: "admin reads its own user secret", who: admin, args: []string{"read", "user/admin1/apw"}, wantOK: true, want: `"value": "av"`},
	{name: "admin lists all secrets", who: admin, args: []string{"list", "-a"}, wantOK: true, want: "user/"},
	{name: "user lists all secrets", who: user1, args: []string{"list", "-a"}, wantOK: true, want: "user/user1/upw"},

	// node level
	{name: "admin lists a node's empty directory", who: admin, args: []string{"list", "-n", node}, wantOK: true, want: "null"},
	{name: "admin adds a node secret", who: admin, args: []string{"add", "-n", node, "--secretKey", "nk", "-d", "nv", "npw"}, wantOK: true, want: "node/node1/npw"},
	{name: "admin lists the node's directory", who: admin, args: []string{"list", "-n", node}, wantOK: true, want: `"npw"`},
	{name: "admin lists the node secret", who: admin, args: []string{"list", "-n", node, "npw"}, wantOK: true, want: `"exists": true`},
	{name: "admin reads the node secret", who: admin, args: []string{"read", "-n", node, "npw"}, wantOK: true, want: `"value": "nv"`},
	{name: "admin reads the node secret by path", who: admin, args: []string{"read", "node/node1/npw"}, wantOK: true, want: `"value": "nv"`},
	{name: "user lists the node secret", who: user1, args: []string{"list", "-n", node, "npw"}, wantOK: true, want: `"exists": true`},
	{name: "user cannot read the node secret", who: user1, args: []string{"read", "-n", node, "npw"}, want: "Permission denied"},
	{name: "user cannot add a node secret", who: user1, args: []string{"add", "-n", node, "--secretKey", "k", "-d", "v", "-O", "npw2"}, want: "Permission denied"},
	{name: "user cannot remove the node secret", who: user1, args: []string{"remove", "-f", "-n", node, "npw"}, want: "Permission denied"},

	// user+node level
	{name: "user lists its empty node directory", who: user1, args: []string{"list", "-n", node, "user/user1"}, wantOK: true, want: "null"},
	{name: "user adds its node secret", who: user1, args: []string{"add", "-n", node, "--secretKey", "unk", "-d", "unv", "user/user1/unpw"}, wantOK: true, want: "user/user1/node/node1/unpw"},
	{name: "user lists its node directory", who: user1, args: []string{"list", "-n", node, "user/user1"}, wantOK: true, want: `"unpw"`},
	{name: "user lists its node secret", who: user1, args: []string{"list", "-n", node, "user/user1/unpw"}, wantOK: true, want: `"exists": true`},
	{name: "user reads its node secret", who: user1, args: []string{"read", "-n", node, "user/user1/unpw"}, wantOK: true, want: `"value": "unv"`},
	{name: "other user cannot read the node secret", who: user2, args: []string{"read", "-n", node, "user/user1/unpw"}, want: "Permission denied"},
	{name: "other user cannot add to the node directory", who: user2, args: []string{"add", "-n", node, "--secretKey", "k", "-d", "v", "user/user1/x"}, want: "Permission denied"},
	{name: "admin cannot read the user's node secret", who: admin, args: []string{"read", "-n", node, "user/user1/unpw"}, want: "Permission denied"},
	{name: "user removes its node secret", who: user1, args: []string{"remove", "-f", "-n", node, "user/user1/unpw"}, wantOK: true, want: "successfully deleted"},
	{name: "user lists its removed node secret", who: user1, args: []string{"list", "-n", node, "user/user1/unpw"}, want: `"exists": false`},

	// missing secrets
	{name: "admin reads a missing secret", who: admin, args: []string{"read", "fake"}, want: "No secret(s) found"},
	{name: "admin removes a missing secret", who: admin, args: []string{"remove", "-f", "fake"}, want: "nothing to remove"},
	{name: "user removes its missing secret", who: user1, args: []string{"remove", "-f", "user/user1/fake"}, want: "nothing to remove"},
	{name: "user reads its missing secret", who: user1, args: []string{"read", "user/user1/fake"}, want: "No secret(s) found"},
	{name: "admin reads a missing node secret", who: admin, args: []string{"read", "-n", node, "fake"}, want: "No secret(s) found"},

	// bad names and credentials
	{name: "read of user without a name", who: admin, args: []string{"read", "user"}, want: "User must be specified"},
	{name: "read of a user directory", who: admin, args: []string{"read", "user/admin1"}, want: "Incorrect secret name"},
	{name: "read of node without a name", who: admin, args: []string{"read", "node"}, want: "Node must be specified"},
	{name: "add with a user segment inside", who: admin, args: []string{"add", "--secretKey", "k", "-d", "v", "a/user/b"}, want: "User must be specified"},
	{name: "add with a dot in the name", who: admin, args: []string{"add", "--secretKey", "k", "-d", "v", "bad.name"}},
	{name: "read with a space in the name", who: admin, args: []string{"read", "bad name"}},
	{name: "add with an escaped slash", who: admin, args: []string{"add", "--secretKey", "k", "-d", "v", "pct%2Fenc"}, wantOK: true},
	{name: "list with wrong credentials", who: stranger, args: []string{"list", "pw1"}, want: "Failed to authenticate"},
	{name: "add with a wrong password", who: "admin1:wrong", args: []string{"add", "--secretKey", "k", "-d", "v", "-O", "pw1"}, want: "Failed to authenticate"},

	// removal
	{name: "admin removes the org secret", who: admin, args: []string{"remove", "-f", "pw1"}, wantOK: true, want: "successfully deleted"},
	{name: "admin lists the removed secret", who: admin, args: []string{"list", "pw1"}, want: `"exists": false`},
	{name: "admin removes the node secret", who: admin, args: []string{"remove", "-f", "-n", node, "npw"}, wantOK: true},
	{name: "user removes its secret", who: user1, args: []string{"remove", "-f", "user/user1/upw"}, wantOK: true},
	{name: "admin removes nested secrets", who: admin, args: []string{"remove", "-f", "dir/sub/pw4"}, wantOK: true},
	{name: "admin lists what is left", who: admin, args: []string{"list", "-a"}, wantOK: true},
}

// inherent lists the cases whose answers differ between the plugins by
// design, each with the reason; every other case must answer alike.
var inherent = map[string]string{}

// outcome is what one side answered to one case.
type outcome struct {
	Result   anaxhub.Result
	Requests []anaxhub.Request
}

func run(t *testing.T, h *anaxhub.Hzn, s *side, hub *ohtest.Hub, c hznCase) outcome {
	t.Helper()
	args := []string{"secretsmanager", "secret"}
	env := []string{"HZN_AGBOT_URL=" + s.agbot.URL, "HZN_EXCHANGE_URL=" + hub.ExchangeURL}
	if c.viaEnv {
		env = append(env, "HZN_ORG_ID="+s.org, "HZN_EXCHANGE_USER_AUTH="+c.who)
		args = append(args, c.args...)
	} else {
		args = append(append(args, c.args[0], "-o", s.org, "-u", c.who), c.args[1:]...)
	}
	mark := s.agbot.Mark()
	res, err := h.Run(t.Context(), env, c.stdin, args...)
	require.NoError(t, err, "%s agbot", s.name)
	out := outcome{Result: anaxhub.Result{Code: res.Code, Stdout: s.normalize(res.Stdout), Stderr: s.normalize(res.Stderr)}}
	for _, r := range s.agbot.RequestsSince(mark) {
		r.Path = s.normalize(r.Path)
		out.Requests = append(out.Requests, r)
	}
	return out
}

// TestSecureAPISideBySide drives anax's unmodified secure API with the
// real hzn, once over anax's own Vault plugin and once over edgesecrets',
// against the same Vault, auth plugin and exchange, and asserts the same
// exit status, output and HTTP statuses for every case.
func TestSecureAPISideBySide(t *testing.T) {
	h := anaxhub.NewHzn(t)
	hub := ohtest.Start(t, ohtest.Options{})
	ref := startVaultSide(t, hub, "orgvault", "agbot-vault")
	ours := startEdgeSide(t, hub, "orgedge", "agbot-edge")

	for _, c := range hznCases {
		t.Run(c.name, func(t *testing.T) {
			want := run(t, h, ref, hub, c)
			got := run(t, h, ours, hub, c)
			wantText := want.Result.Stdout + want.Result.Stderr
			assert.Equal(t, c.wantOK, want.Result.Code == 0, "reference (anax's Vault plugin) exit status %d: %s", want.Result.Code, wantText)
			if c.want != "" {
				assert.Contains(t, wantText, c.want, "reference (anax's Vault plugin) output")
			}
			assert.NotEmpty(t, want.Requests, "hzn reached the reference agbot")
			if reason, ok := inherent[c.name]; ok {
				t.Logf("answers may differ: %s", reason)
				return
			}
			assert.Equal(t, want, got, "edgesecrets plugin (got) against anax's Vault plugin (want)")
		})
	}
}

// TestSecureAPIAgbotTokenCannotWrite checks that the agbot's own Vault
// token, as its login through auth/openhorizon gives it, reads but is
// refused a write by Vault, both through Vault's API and through the
// library's store with method openhorizon and the agbot's credentials.
func TestSecureAPIAgbotTokenCannotWrite(t *testing.T) {
	hub := ohtest.Start(t, ohtest.Options{})
	ours := startEdgeSide(t, hub, "orgedge", "agbot-edge")
	root := hub.VaultClient(t)
	_, err := root.KVv2(ohtest.KVMount).Put(t.Context(), ours.org+"/seed", map[string]any{"key": "k", "value": "v"})
	require.NoError(t, err)

	t.Run("vault api", func(t *testing.T) {
		c, err := api.NewClient(&api.Config{Address: hub.VaultAddr})
		require.NoError(t, err)
		c.ClearToken()
		login, err := c.Logical().WriteWithContext(t.Context(), "auth/"+ohtest.AuthMount+"/login", map[string]any{"id": ours.agbotID, "token": ours.agbotToken})
		require.NoError(t, err)
		require.NotNil(t, login.Auth)
		assert.Contains(t, login.Auth.Policies, ohtest.AgbotPolicy)
		c.SetToken(login.Auth.ClientToken)

		got, err := c.KVv2(ohtest.KVMount).Get(t.Context(), ours.org+"/seed")
		require.NoError(t, err, "the agbot's token reads")
		assert.Equal(t, "k", got.Data["key"])

		_, err = c.KVv2(ohtest.KVMount).Put(t.Context(), ours.org+"/agbot-write", map[string]any{"key": "k", "value": "v"})
		var re *api.ResponseError
		require.ErrorAs(t, err, &re, "the agbot's token writes")
		assert.Equal(t, 403, re.StatusCode)
	})

	t.Run("library store", func(t *testing.T) {
		cfg, err := secretstore.ParseConfig(strings.NewReader(`{"type": "vault", "vault": {"address": "` + hub.VaultAddr +
			`", "mount": "openhorizon", "kvVersion": "2", "auth": {"method": "openhorizon", "exchangeID": "` + ours.agbotID +
			`", "exchangeToken": "` + ours.agbotToken + `"}}}`))
		require.NoError(t, err)
		st, err := secretstore.Open(t.Context(), cfg, secretstore.OpenOptions{})
		require.NoError(t, err)
		defer st.Close()

		got, err := st.Get(t.Context(), ours.org+"/seed")
		require.NoError(t, err, "the agbot's store reads")
		assert.Equal(t, "k", string(got.Data["key"]))

		_, err = st.Put(t.Context(), &secretstore.Secret{Name: ours.org + "/agbot-write", Data: edgesecrets.Data{"key": []byte("k"), "value": []byte("v")}}, secretstore.PutOptions{})
		require.Error(t, err, "the agbot's store writes")
		assert.ErrorIs(t, err, edgesecrets.ErrPermission)
	})
}
