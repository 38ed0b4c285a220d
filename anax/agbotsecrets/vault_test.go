package agbotsecrets_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/open-horizon/anax/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/anax/agbotsecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/ohtest"
)

// TestOnVaultWithExchangeAuth runs the plugin as anax configures it
// (Initialize, Login) on a real Vault with vault-exchange-auth: the agbot
// logs in with its exchange credentials, users' requests run with their
// own Vault tokens, so Vault's ACL decides, and a non-admin's listing,
// which Vault refuses under user/, still shows what anax's plugin shows.
func TestOnVaultWithExchangeAuth(t *testing.T) {
	hub := ohtest.Start(t, ohtest.Options{})
	hub.AddAgbot("org1", "agbot1", "agbot-tok")
	hub.AddUser("org1", "admin", "admin-pw", true)
	hub.AddUser("org1", "alice", "alice-pw", false)
	hub.AddUser("org1", "bob", "bob-pw", false)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edgesecrets.json")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`{"store": {"type": "vault", "vault": {"address": "`+hub.VaultAddr+
		`", "mount": "openhorizon", "kvVersion": "2", "auth": {"method": "openhorizon"}}}, "changeFile": "`+filepath.Join(dir, "c.json")+`"}`), 0o600))
	hc := &config.HorizonConfig{}
	hc.AgreementBot.ExchangeId = "org1/agbot1"
	hc.AgreementBot.ExchangeToken = "agbot-tok"
	hc.AgreementBot.ExchangeURL = hub.ExchangeURL
	hc.AgreementBot.SecretsProviderConfig = cfgPath
	p := new(agbotsecrets.Plugin)
	require.NoError(t, p.Initialize(hc))
	require.NoError(t, p.Login())
	defer p.Close()

	const admin, alice = "org1/admin", "org1/alice"
	d := func(v string) secrets.SecretDetails { return secrets.SecretDetails{Key: "k", Value: v} }
	require.NoError(t, p.CreateOrgSecret(admin, "admin-pw", "org1", "a", d("1")))
	require.NoError(t, p.CreateOrgSecret(admin, "admin-pw", "org1", "dir/b", d("2")))
	require.NoError(t, p.CreateOrgNodeSecret(admin, "admin-pw", "org1", "node/n1/c", d("3")))
	require.NoError(t, p.CreateOrgUserSecret(alice, "alice-pw", "org1", "user/alice/e", d("4")))
	require.NoError(t, p.CreateOrgUserSecret("org1/bob", "bob-pw", "org1", "user/bob/f", d("7")))
	assert.Equal(t, http.StatusForbidden, status(p.CreateOrgSecret(alice, "alice-pw", "org1", "x", d("5"))), "Vault refuses a user an org write")
	assert.Equal(t, http.StatusForbidden, status(p.CreateOrgUserSecret(admin, "admin-pw", "org1", "user/alice/x", d("6"))))
	assert.Equal(t, http.StatusUnauthorized, status(p.ListOrgSecret(alice, "wrong", "org1", "a")))

	got, err := p.ListOrgSecrets(alice, "alice-pw", "org1", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "dir/b"}, got)
	got, err = p.ListAllSecrets(alice, "alice-pw", "org1", "")
	require.NoError(t, err)
	// Vault lets alice list user/ but refuses user/bob/: anax's plugin
	// leaves the refused folder out, and so does this one.
	assert.Equal(t, []string{"a", "dir/b", "node/n1/c", "user/alice/e"}, got)
	got, err = p.ListAllSecrets(admin, "admin-pw", "org1", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "dir/b", "node/n1/c", "user/alice/e", "user/bob/f"}, got)
	got, err = p.ListOrgUserSecrets(alice, "alice-pw", "org1", "user/alice")
	require.NoError(t, err)
	assert.Equal(t, []string{"e"}, got)

	sd, err := p.GetSecretDetails("org1/agbot1", "agbot-tok", "org1", "alice", "", "e")
	require.NoError(t, err)
	assert.Equal(t, d("4"), sd)
	_, err = p.GetSecretDetails(alice, "alice-pw", "org1", "", "", "a")
	assert.Equal(t, http.StatusForbidden, status(err))
	assert.Equal(t, http.StatusForbidden, status(p.DeleteOrgSecret(alice, "alice-pw", "org1", "a")))

	first, err := p.GetSecretMetadata("org1", "", "", "a")
	require.NoError(t, err)
	require.NoError(t, p.CreateOrgSecret(admin, "admin-pw", "org1", "a", d("rotated")))
	second, err := p.GetSecretMetadata("org1", "", "", "a")
	require.NoError(t, err)
	assert.Greater(t, second.UpdateTime, first.UpdateTime, "a rotation within the second is seen")
	require.NoError(t, p.DeleteOrgSecret(admin, "admin-pw", "org1", "a"))
	assert.Equal(t, http.StatusNotFound, status(p.ListOrgSecret(admin, "admin-pw", "org1", "a")))
	assert.NotZero(t, p.GetLastVaultStatus())
}
