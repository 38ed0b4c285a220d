package agbotsecrets_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/anax/internal/anaxhub"
	"github.com/edgesecrets/edgesecrets/internal/testkit/ohtest"
)

// e2eScripts are anax's own e2e scripts for the secrets manager, run as
// published from anax's source tree, in this order, each with a line only
// its last step prints (a script that skips or stops early exits 0 too).
var e2eScripts = []struct{ name, last string }{
	{"hzn_secretsmanager.sh", "complete test"},
	{"setup_secrets.sh", "Create netspeed secret3"},
}

// addE2EIdentities adds the exchange users the scripts assume (anax's
// e2edev environment). hzn_secretsmanager.sh creates userdevuser1 and 2
// itself with `hzn exchange user create`, which the stub exchange does not
// serve; they are added here instead.
func addE2EIdentities(hub *ohtest.Hub) {
	hub.AddUser("userdev", "userdevadmin", "userdevadminpw", true)
	hub.AddUser("userdev", "userdevuser1", "userdevuser1pw", false)
	hub.AddUser("userdev", "userdevuser2", "userdevuser2pw", false)
	hub.AddUser("e2edev@somecomp.com", "e2edevadmin", "e2edevadminpw", true)
}

// wipeKV deletes every secret under the KV v2 mount, with the root token,
// so the next agbot's run starts from the same, empty state.
func wipeKV(t *testing.T, c *api.Client, dir string) {
	t.Helper()
	s, err := c.Logical().ListWithContext(t.Context(), ohtest.KVMount+"/metadata/"+dir)
	require.NoError(t, err)
	if s == nil {
		return
	}
	keys, _ := s.Data["keys"].([]any)
	for _, k := range keys {
		name, _ := k.(string)
		if strings.HasSuffix(name, "/") {
			wipeKV(t, c, dir+name)
			continue
		}
		_, err := c.Logical().DeleteWithContext(t.Context(), ohtest.KVMount+"/metadata/"+dir+name)
		require.NoError(t, err)
	}
}

// TestE2EScripts runs anax's e2e scripts test/gov/hzn_secretsmanager.sh
// and setup_secrets.sh, unchanged, with the real hzn on PATH, against
// anax's secure API over the edgesecrets plugin, and then against anax's
// own Vault plugin on the same (wiped) Vault: each must pass, and print
// the same output over both plugins.
func TestE2EScripts(t *testing.T) {
	bash := anaxhub.Tool(t, "bash")
	gov := filepath.Join(anaxhub.AnaxSource(t), "test", "gov")
	h := anaxhub.NewHzn(t)
	hub := ohtest.Start(t, ohtest.Options{})
	addE2EIdentities(hub)
	root := hub.VaultClient(t)

	runAll := func(t *testing.T, s *side) map[string]anaxhub.Result {
		t.Helper()
		out := map[string]anaxhub.Result{}
		env := []string{
			"AGBOT_SAPI_URL=" + s.agbot.URL,
			"HZN_EXCHANGE_URL=" + hub.ExchangeURL,
			// setup_secrets.sh tests CERT_LOC numerically: 0 is plain HTTP.
			"CERT_LOC=0",
		}
		for _, script := range e2eScripts {
			res, err := h.Script(t.Context(), env, bash, filepath.Join(gov, script.name))
			require.NoError(t, err)
			assert.Equal(t, 0, res.Code, "%s over the %s plugin failed:\nstdout:\n%s\nstderr:\n%s", script.name, s.name, res.Stdout, res.Stderr)
			assert.NotContains(t, res.Stdout, "ERROR:", "%s over the %s plugin", script.name, s.name)
			assert.Contains(t, res.Stdout, script.last, "%s over the %s plugin ran to its end", script.name, s.name)
			out[script.name] = res
		}
		return out
	}

	ours := startEdgeSide(t, hub, "unused-edge", "agbot-edge")
	got := runAll(t, ours)
	// The scripts wrote through the secure API: the secrets are in Vault.
	seen, err := root.KVv2(ohtest.KVMount).Get(t.Context(), "userdev/netspeed-secret1")
	require.NoError(t, err, "setup_secrets.sh's secret in Vault")
	assert.Equal(t, "test", seen.Data["key"])

	wipeKV(t, root, "")
	ref := startVaultSide(t, hub, "unused-vault", "agbot-vault")
	want := runAll(t, ref)
	for _, script := range e2eScripts {
		assert.Equal(t, want[script.name].Stdout, got[script.name].Stdout, "%s output: edgesecrets plugin (got) against anax's Vault plugin (want)", script.name)
	}

	var posts int
	for _, r := range hub.Requests() {
		if r.Method == "POST" && strings.HasPrefix(r.Path, "/v1/orgs/userdev/users/userdevuser") {
			posts++
		}
	}
	assert.Equal(t, 4, posts, "hzn exchange user create ran twice per run (the stub answers 404; the users were added beforehand)")
}
