package agbotsecrets_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-horizon/anax/agreementbot"
	"github.com/open-horizon/anax/agreementbot/persistence"
	"github.com/open-horizon/anax/agreementbot/secrets"
	anaxvault "github.com/open-horizon/anax/agreementbot/secrets/vault"
	"github.com/open-horizon/anax/businesspolicy"
	"github.com/open-horizon/anax/config"
	"github.com/open-horizon/anax/events"
	"github.com/open-horizon/anax/exchange"
	"github.com/open-horizon/anax/exchangecommon"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/anax/agbotsecrets"
	"github.com/edgesecrets/edgesecrets/anax/internal/anaxdb"
	"github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/internal/testkit/ohtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/awssm"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
	_ "github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// The deployment policy the updater tests publish: it binds two org
// secrets, of which only updRotated is ever rotated.
const (
	updOrg     = "org1"
	updPolicy  = "org1/deploy-svc"
	updRotated = "dbpass"
	updStill   = "apikey"
	// updPairs bounds the attempts at two rotations within one second.
	updPairs = 5
)

// TestUpdaterSeesEveryRotation runs anax's own secret updater
// (SecretUpdateManager.UpdatePolicies, then CheckForUpdates, as the agbot's
// policy and secrets sub-workers call them) over the plugin and anax's
// PostgreSQL agbot database, on Vault KV v2, Vault KV v1 and AWS Secrets
// Manager's wire protocol. Every rotation is reported, two in the same
// second included, the unrotated secret never is, and a restarted plugin
// (the change clock read back from its file) reports nothing new and then
// the next rotation.
//
// anax compares GetSecretMetadata's UpdateTime in whole seconds with the one
// it recorded (persistence/postgresql/secrets.go: last_update_check <
// $updateTime), so the plugin's change clock is what makes a second
// rotation within a second, and KV v1 (which has no times), visible.
func TestUpdaterSeesEveryRotation(t *testing.T) {
	pg := pgtest.Start(t, pgtest.Options{})
	vault := updSharedVault(t)

	backends := []struct {
		name  string
		store func(t *testing.T) *secretstore.Store
	}{
		{"vault kv v2", func(t *testing.T) *secretstore.Store {
			vsrv := vault(t)
			return updOpen(t, updVaultConfig(vsrv.Addr, vsrv.EnableKV(t, 2), "2", map[string]any{"method": "token", "token": vsrv.RootToken}))
		}},
		{"vault kv v1", func(t *testing.T) *secretstore.Store {
			vsrv := vault(t)
			return updOpen(t, updVaultConfig(vsrv.Addr, vsrv.EnableKV(t, 1), "1", map[string]any{"method": "token", "token": vsrv.RootToken}))
		}},
		{"aws secrets manager", updAWSStore},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			store := be.store(t)
			changeFile := filepath.Join(t.TempDir(), "changes.json")
			newPlugin := func(t *testing.T) secrets.AgbotSecrets { return updPlugin(t, store, changeFile) }
			rot := updScenario(t, newPlugin, anaxdb.Postgres(t, pg), store)

			for i, r := range rot {
				require.True(t, r.seen, "rotation %d (written in second %d) not reported: %s", i+1, r.second, updDescribe(rot))
			}
			require.True(t, updSameSecondPair(rot) >= 0, "no two rotations landed in one second: %s", updDescribe(rot))
		})
	}
}

// TestUpdaterAnaxVaultPluginMissesSameSecondRotation runs the same scenario
// with anax's own Vault plugin (agreementbot/secrets/vault) over a Vault
// set up as Open Horizon's (auth/openhorizon from vault-exchange-auth, KV v2
// at "openhorizon"): of two rotations in one second it reports the first and
// misses the second for good, since KV v2's updated_time, in whole seconds,
// is what it reports. Ours, over the same Vault with the agbot's own login,
// sees both. This is why the plugin keeps a change clock.
func TestUpdaterAnaxVaultPluginMissesSameSecondRotation(t *testing.T) {
	hub := ohtest.Start(t, ohtest.Options{})
	pg := pgtest.Start(t, pgtest.Options{})
	const agbotID, agbotToken = "org1/agbot1", "agbot1-token"
	hub.AddAgbot(updOrg, "agbot1", agbotToken)
	// The admin rotates with Vault's root token; the agbots read with their
	// own login, which the plugin's agbot policy limits to read and list.
	admin := updOpen(t, updVaultConfig(hub.VaultAddr, ohtest.KVMount, "2", map[string]any{"method": "token", "token": hub.RootToken}))

	t.Run("anax's vault plugin", func(t *testing.T) {
		newPlugin := func(t *testing.T) secrets.AgbotSecrets {
			cfg := &config.HorizonConfig{}
			cfg.AgreementBot.Vault.VaultURL = hub.VaultAddr
			cfg.AgreementBot.ExchangeId = agbotID
			cfg.AgreementBot.ExchangeToken = agbotToken
			cfg.AgreementBot.ExchangeURL = hub.ExchangeURL
			p := new(anaxvault.AgbotVaultSecrets)
			require.NoError(t, p.Initialize(cfg))
			require.NoError(t, p.Login())
			t.Cleanup(p.Close)
			return p
		}
		rot := updScenario(t, newPlugin, anaxdb.Postgres(t, pg), admin)
		i := updSameSecondPair(rot)
		require.True(t, i >= 0, "no two rotations landed in one second: %s", updDescribe(rot))
		require.True(t, rot[i].seen, "the first rotation of second %d is reported: %s", rot[i].second, updDescribe(rot))
		require.False(t, rot[i+1].seen, "anax's plugin misses the second rotation of second %d: %s", rot[i].second, updDescribe(rot))
	})
	t.Run("ours", func(t *testing.T) {
		agbot := updOpen(t, updVaultConfig(hub.VaultAddr, ohtest.KVMount, "2",
			map[string]any{"method": "openhorizon", "exchangeID": agbotID, "exchangeToken": agbotToken}))
		changeFile := filepath.Join(t.TempDir(), "changes.json")
		newPlugin := func(t *testing.T) secrets.AgbotSecrets { return updPlugin(t, agbot, changeFile) }
		rot := updScenario(t, newPlugin, anaxdb.Postgres(t, pg), admin)
		for i, r := range rot {
			require.True(t, r.seen, "rotation %d (written in second %d) not reported: %s", i+1, r.second, updDescribe(rot))
		}
		require.True(t, updSameSecondPair(rot) >= 0, "no two rotations landed in one second: %s", updDescribe(rot))
	})
}

// TestUpdaterBoltRecordsNothing: over anax's bolt agbot database, whose
// managed-secret functions are stubs (persistence/bolt/secrets.go), anax's
// updater records no secret and so reports no rotation, whatever the plugin
// says. A bolt-backed agbot never sends secret updates; it needs the
// PostgreSQL database for them.
func TestUpdaterBoltRecordsNothing(t *testing.T) {
	store := memory.New()
	db := anaxdb.Bolt(t)
	plugin := updPlugin(t, store, filepath.Join(t.TempDir(), "changes.json"))
	sm := agreementbot.NewSecretUpdateManager(60, 60, 300, 30)

	updWrite(t, store, updOrg+"/"+updRotated, "v0")
	updWrite(t, store, updOrg+"/"+updStill, "k0")
	require.NoError(t, sm.UpdatePolicies(updOrg, updPolicies(), plugin, db))

	names, err := db.GetManagedPolicySecretNames("", "")
	require.NoError(t, err)
	require.Empty(t, names, "bolt keeps no managed secret")
	pols, err := db.GetPoliciesInOrg(updOrg)
	require.NoError(t, err)
	require.Empty(t, pols, "bolt keeps no policy with secrets")

	before, err := plugin.GetSecretMetadata(updOrg, "", "", updRotated)
	require.NoError(t, err)
	updWrite(t, store, updOrg+"/"+updRotated, "v1")
	after, err := plugin.GetSecretMetadata(updOrg, "", "", updRotated)
	require.NoError(t, err)
	require.Greater(t, after.UpdateTime, before.UpdateTime, "the plugin reports the rotation")

	su, err := sm.CheckForUpdates(plugin, db)
	require.NoError(t, err)
	require.Empty(t, updNames(su), "anax's updater over bolt reports nothing")
}

// updRotation is one rotation of the watched secret in a scenario.
type updRotation struct {
	second int64 // the second the store stamped the write with (local time for a store without times)
	seen   bool  // CheckForUpdates reported it
}

// updScenario publishes updPolicies to anax's updater over the plugin that
// newPlugin makes and db, then rotates updRotated, pairs of rotations at a
// time starting just after a second begins, until a pair lands in one second
// (at most updPairs pairs); after each rotation it runs CheckForUpdates and
// records whether the rotation was reported. It checks throughout that
// nothing is reported when nothing changed, that only updRotated ever is,
// and that a new plugin (a restarted agbot) reports nothing new and then the
// next rotation. store is where the admin writes.
func updScenario(t *testing.T, newPlugin func(*testing.T) secrets.AgbotSecrets, db persistence.AgbotDatabase, store *secretstore.Store) []updRotation {
	t.Helper()
	plugin := newPlugin(t)
	require.True(t, plugin.IsReady())
	sm := agreementbot.NewSecretUpdateManager(60, 60, 300, 30)

	updWrite(t, store, updOrg+"/"+updRotated, "v0")
	updWrite(t, store, updOrg+"/"+updStill, "k0")
	require.NoError(t, sm.UpdatePolicies(updOrg, updPolicies(), plugin, db))
	names, err := db.GetManagedPolicySecretNames("", "")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{updOrg + "/" + updRotated, updOrg + "/" + updStill}, names, "the secrets anax manages")

	// check runs one CheckForUpdates and then what anax's governance does
	// once it has sent the updates (governance.go, the end of
	// governAgreements, an unexported method of the agbot's worker): record
	// each reported secret's UpdateTime with SetSecretUpdate. It returns
	// whether updRotated was reported.
	check := func(plugin secrets.AgbotSecrets, what string) bool {
		t.Helper()
		su, err := sm.CheckForUpdates(plugin, db)
		require.NoError(t, err, what)
		got := updNames(su)
		if len(got) == 0 {
			return false
		}
		require.Equal(t, []string{updOrg + "/" + updRotated + " for " + updPolicy}, got, "%s: only the rotated secret is reported, for the policy", what)
		for _, u := range su.Updates {
			require.NoError(t, db.SetSecretUpdate(u.SecretOrg, u.SecretFullName, u.SecretUpdateTime, true), what)
		}
		return true
	}
	require.False(t, check(plugin, "before any rotation"), "reported before any rotation")

	var rot []updRotation
	n := 0
	rotate := func(plugin secrets.AgbotSecrets) {
		t.Helper()
		n++
		sec := updWrite(t, store, updOrg+"/"+updRotated, fmt.Sprintf("v%d", n))
		rot = append(rot, updRotation{second: sec, seen: check(plugin, fmt.Sprintf("after rotation %d", n))})
	}
	for range updPairs {
		// Start a pair early in a second, and after the second of every
		// earlier write, so that only the pair's second write shares a
		// second with an earlier one.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)))
		rotate(plugin)
		rotate(plugin)
		if updSameSecondPair(rot) >= 0 {
			break
		}
	}
	require.False(t, check(plugin, "after the rotations"), "reported again with nothing changed: %s", updDescribe(rot))

	// A restarted agbot: a new plugin, the same database.
	plugin.Close()
	plugin = newPlugin(t)
	require.True(t, plugin.IsReady())
	require.False(t, check(plugin, "after a restart"), "a restarted plugin reports a rotation already reported: %s", updDescribe(rot))
	rotate(plugin)
	require.False(t, check(plugin, "after the last rotation"), "reported again with nothing changed: %s", updDescribe(rot))
	return rot
}

// updSameSecondPair returns the index of the first rotation of the first
// pair written in one second, or -1. Pairs start at even indexes.
func updSameSecondPair(rot []updRotation) int {
	for i := 0; i+1 < len(rot); i += 2 {
		if rot[i].second == rot[i+1].second {
			return i
		}
	}
	return -1
}

// updDescribe lists the rotations for a failure message.
func updDescribe(rot []updRotation) string {
	var b strings.Builder
	for i, r := range rot {
		fmt.Fprintf(&b, "[%d: second %d, reported %v] ", i+1, r.second, r.seen)
	}
	return b.String()
}

// updNames lists a CheckForUpdates result as "<org>/<secret> for
// <policies>", sorted.
func updNames(su *events.SecretUpdates) []string {
	if su == nil {
		return nil
	}
	var out []string
	for _, u := range su.Updates {
		out = append(out, u.SecretOrg+"/"+u.SecretFullName+" for "+strings.Join(u.PolicyNames, ","))
	}
	slices.Sort(out)
	return out
}

// updPolicies is the exchange's view of the org's deployment policies, as
// the agbot's policy watcher hands it to UpdatePolicies.
func updPolicies() map[string]exchange.ExchangeBusinessPolicy {
	return map[string]exchange.ExchangeBusinessPolicy{
		updPolicy: {BusinessPolicy: businesspolicy.BusinessPolicy{
			Service: businesspolicy.ServiceRef{Name: "svc.example", Org: updOrg, Arch: "amd64"},
			SecretBinding: []exchangecommon.SecretBinding{{
				ServiceOrgid: updOrg, ServiceUrl: "svc.example", ServiceArch: "amd64",
				Secrets: []exchangecommon.BoundSecret{{"db": updRotated}, {"api": updStill}},
			}},
		}},
	}
}

// updWrite writes value into the Open Horizon secret name as an admin
// would and returns the second the store stamped the new version with, or
// the local second after the write when the store keeps no times (KV v1).
func updWrite(t testing.TB, store *secretstore.Store, name, value string) int64 {
	t.Helper()
	ctx := context.Background()
	_, err := store.Put(ctx, &secretstore.Secret{
		Name: name,
		Data: edgesecrets.Data{"key": []byte("k"), "value": []byte(value)},
	}, secretstore.PutOptions{})
	require.NoError(t, err, "writing %s", name)
	now := time.Now()
	md, err := store.Stat(ctx, name)
	require.NoError(t, err, "stat of %s", name)
	if md.UpdatedAt.IsZero() {
		return now.Unix()
	}
	return md.UpdatedAt.Unix()
}

// updPlugin returns the plugin over store with changeFile as its change
// clock, logged in and closed when t ends.
func updPlugin(t testing.TB, store *secretstore.Store, changeFile string) *agbotsecrets.Plugin {
	t.Helper()
	p, err := agbotsecrets.New(agbotsecrets.Options{
		Store:       store,
		AgbotID:     "org1/agbot1",
		AgbotToken:  edgesecrets.Sensitive("agbot1-token"),
		ExchangeURL: "http://127.0.0.1:1/v1", // the updater never asks the exchange
		ChangeFile:  changeFile,
	})
	require.NoError(t, err)
	require.NoError(t, p.Login())
	t.Cleanup(p.Close)
	return p
}

// updVaultConfig is a Vault store config for mount (KV version kv) with
// auth.
func updVaultConfig(addr, mount, kv string, auth map[string]any) map[string]any {
	return map[string]any{"type": "vault", "vault": map[string]any{
		"address": addr, "mount": mount, "kvVersion": kv, "auth": auth,
	}}
}

// updOpen opens a store from a config, closed when t ends.
func updOpen(t testing.TB, cfg map[string]any) *secretstore.Store {
	t.Helper()
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	c, err := secretstore.ParseConfig(strings.NewReader(string(raw)))
	require.NoError(t, err)
	s, err := secretstore.Open(context.Background(), c, secretstore.OpenOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// updAWSStore returns an awssm store over a Secrets Manager endpoint on
// loopback whose clock stands still, so that every write has the same
// LastChangedDate: the worst case for a comparison in seconds.
func updAWSStore(t *testing.T) *secretstore.Store {
	const keyID, secretKey = "AKIDEDGESECRETSTEST", "test-secret-access-key"
	frozen := time.Now().Truncate(time.Second)
	srv := awsmock.New(awsmock.Options{
		Now:         func() time.Time { return frozen },
		Credentials: map[string]string{keyID: secretKey},
	})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return updOpen(t, map[string]any{"type": "awssm", "awssm": map[string]any{
		"region": "us-east-1", "endpoint": ts.URL,
		"accessKeyId": keyID, "secretAccessKey": secretKey, "forceDelete": true,
	}})
}

// updSharedVault returns a function giving parent's subtests one Vault dev
// server, started on first use and stopped when parent ends, so that a
// subtest without Vault (AWS) runs where no Vault binary is.
func updSharedVault(parent *testing.T) func(t *testing.T) *vaulttest.Server {
	var (
		mu  sync.Mutex
		srv *vaulttest.Server
	)
	return func(t *testing.T) *vaulttest.Server {
		t.Helper()
		bin := vaulttest.Binary(t) // skips, or fails in CI, without one
		mu.Lock()
		defer mu.Unlock()
		if srv == nil {
			s, err := vaulttest.StartServer(context.Background(), bin, parent.TempDir(), vaulttest.Options{})
			require.NoError(t, err, "starting Vault")
			srv = s
			parent.Cleanup(func() {
				s.Stop()
				if parent.Failed() {
					parent.Logf("output of the Vault server at %s:\n%s", s.Addr, s.Output())
				}
			})
		}
		return srv
	}
}
