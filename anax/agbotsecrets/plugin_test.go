package agbotsecrets_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/open-horizon/anax/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/anax/agbotsecrets"
	"github.com/edgesecrets/edgesecrets/ohsecret"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

func TestRegisteredWithAnax(t *testing.T) {
	p, ok := secrets.SecretsProviders[agbotsecrets.Name]
	require.True(t, ok, "anax's registry has no %q", agbotsecrets.Name)
	assert.IsType(t, &agbotsecrets.Plugin{}, p)
}

func TestNewNeedsAStore(t *testing.T) {
	_, err := agbotsecrets.New(agbotsecrets.Options{})
	assert.Error(t, err)
}

// status is the HTTP status anax's secure API answers for err (0: none).
func status(err error) int {
	if e := secrets.WrapSecretsError(err); e != nil {
		return e.ResponseCode
	}
	return 0
}

// TestUserRequests runs every user-facing method over a memory store, where
// the library's policy decides, and checks the answer anax's secure API
// would render: the error's type, status and, for listings, the names.
func TestUserRequests(t *testing.T) {
	f := newUnitFixture(t, "")
	p := f.plugin
	details := secrets.SecretDetails{Key: "k", Value: "v"}
	tests := []struct {
		name   string
		call   func() ([]string, error)
		status int // 0: no error
		want   []string
	}{
		// Listings.
		{"admin lists org", func() ([]string, error) { return p.ListOrgSecrets(unitAdmin, pw(unitAdmin), "org1", "") }, 0, []string{"a", "dir/b"}},
		{"user lists org", func() ([]string, error) { return p.ListOrgSecrets(unitAlice, pw(unitAlice), "org1", "") }, 0, []string{"a", "dir/b"}},
		{"admin lists all", func() ([]string, error) { return p.ListAllSecrets(unitAdmin, pw(unitAdmin), "org1", "") }, 0,
			[]string{"a", "dir/b", "node/n1/c", "user/alice/d", "user/alice/node/n1/e", "user/bob/f"}},
		{"user lists all: not another user's", func() ([]string, error) { return p.ListAllSecrets(unitAlice, pw(unitAlice), "org1", "") }, 0,
			[]string{"a", "dir/b", "node/n1/c", "user/alice/d", "user/alice/node/n1/e"}},
		{"user lists own", func() ([]string, error) { return p.ListOrgUserSecrets(unitAlice, pw(unitAlice), "org1", "user/alice") }, 0, []string{"d", "node/n1/e"}},
		{"user lists another's", func() ([]string, error) { return p.ListOrgUserSecrets(unitAlice, pw(unitAlice), "org1", "user/bob") }, http.StatusForbidden, nil},
		{"admin lists a user's", func() ([]string, error) { return p.ListOrgUserSecrets(unitAdmin, pw(unitAdmin), "org1", "user/bob") }, 0, []string{"f"}},
		{"admin lists an empty dir", func() ([]string, error) { return p.ListOrgUserSecrets(unitAdmin, pw(unitAdmin), "org1", "user/nobody") }, http.StatusNotFound, nil},
		{"user lists node", func() ([]string, error) {
			return p.ListOrgNodeSecrets(unitAlice, pw(unitAlice), "org1", "n1", "node/n1")
		}, 0, []string{"c"}},
		{"user lists own node", func() ([]string, error) {
			return p.ListUserNodeSecrets(unitAlice, pw(unitAlice), "org1", "n1", "user/alice/node/n1")
		}, 0, []string{"e"}},
		{"user lists another org", func() ([]string, error) { return p.ListOrgSecrets(unitAlice, pw(unitAlice), "org2", "") }, http.StatusForbidden, nil},
		{"wrong password", func() ([]string, error) { return p.ListOrgSecrets(unitAlice, "wrong", "org1", "") }, http.StatusUnauthorized, nil},
		{"not org/user", func() ([]string, error) { return p.ListOrgSecrets("alice", pw(unitAlice), "org1", "") }, http.StatusUnauthorized, nil},
		// Existence.
		{"exists", func() ([]string, error) { return nil, p.ListOrgSecret(unitAlice, pw(unitAlice), "org1", "a") }, 0, nil},
		{"exists not", func() ([]string, error) { return nil, p.ListOrgSecret(unitAlice, pw(unitAlice), "org1", "zz") }, http.StatusNotFound, nil},
		{"exists node", func() ([]string, error) {
			return nil, p.ListOrgNodeSecret(unitAlice, pw(unitAlice), "org1", "node/n1/c")
		}, 0, nil},
		{"exists own", func() ([]string, error) {
			return nil, p.ListOrgUserSecret(unitAlice, pw(unitAlice), "org1", "user/alice/d")
		}, 0, nil},
		{"exists own node", func() ([]string, error) {
			return nil, p.ListUserNodeSecret(unitAlice, pw(unitAlice), "org1", "user/alice/node/n1/e")
		}, 0, nil},
		{"exists another's", func() ([]string, error) {
			return nil, p.ListOrgUserSecret(unitAlice, pw(unitAlice), "org1", "user/bob/f")
		}, http.StatusForbidden, nil},
		{"exists bad name", func() ([]string, error) { return nil, p.ListOrgSecret(unitAlice, pw(unitAlice), "org1", "a//b") }, http.StatusBadRequest, nil},
		// Writes.
		{"user writes org", func() ([]string, error) {
			return nil, p.CreateOrgSecret(unitAlice, pw(unitAlice), "org1", "x", details)
		}, http.StatusForbidden, nil},
		{"admin writes org", func() ([]string, error) {
			return nil, p.CreateOrgSecret(unitAdmin, pw(unitAdmin), "org1", "x", details)
		}, 0, nil},
		{"admin writes node", func() ([]string, error) {
			return nil, p.CreateOrgNodeSecret(unitAdmin, pw(unitAdmin), "org1", "node/n2/x", details)
		}, 0, nil},
		{"user writes own", func() ([]string, error) {
			return nil, p.CreateOrgUserSecret(unitBob, pw(unitBob), "org1", "user/bob/x", details)
		}, 0, nil},
		{"user writes own node", func() ([]string, error) {
			return nil, p.CreateUserNodeSecret(unitBob, pw(unitBob), "org1", "user/bob/node/n1/x", details)
		}, 0, nil},
		{"admin writes a user's", func() ([]string, error) {
			return nil, p.CreateOrgUserSecret(unitAdmin, pw(unitAdmin), "org1", "user/bob/y", details)
		}, http.StatusForbidden, nil},
		// Deletes.
		{"user deletes org", func() ([]string, error) { return nil, p.DeleteOrgSecret(unitAlice, pw(unitAlice), "org1", "a") }, http.StatusForbidden, nil},
		{"admin deletes missing", func() ([]string, error) { return nil, p.DeleteOrgSecret(unitAdmin, pw(unitAdmin), "org1", "zz") }, http.StatusNotFound, nil},
		{"user deletes another's", func() ([]string, error) {
			return nil, p.DeleteOrgUserSecret(unitAlice, pw(unitAlice), "org1", "user/bob/f")
		}, http.StatusForbidden, nil},
		{"user deletes own node", func() ([]string, error) {
			return nil, p.DeleteUserNodeSecret(unitAlice, pw(unitAlice), "org1", "user/alice/node/n1/e")
		}, 0, nil},
		{"admin deletes node", func() ([]string, error) {
			return nil, p.DeleteOrgNodeSecret(unitAdmin, pw(unitAdmin), "org1", "node/n1/c")
		}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.call()
			assert.Equal(t, tc.status, status(err), "error: %v", err)
			if tc.status == 0 {
				require.NoError(t, err)
				if tc.want != nil {
					assert.Equal(t, tc.want, got)
				}
			}
		})
	}
	ctx := context.Background()
	for name, want := range map[string]bool{"org1/x": true, "org1/node/n2/x": true, "org1/user/bob/x": true,
		"org1/user/bob/node/n1/x": true, "org1/user/bob/y": false, "org1/a": true, "org1/user/alice/node/n1/e": false, "org1/node/n1/c": false} {
		_, err := f.store.Stat(ctx, name)
		assert.Equal(t, want, err == nil, "%s exists", name)
	}
}

// TestErrorTypes checks that each refusal is the anax error type its Vault
// plugin returns for the same case, with anax's texts where the secure API
// shows them.
func TestErrorTypes(t *testing.T) {
	f := newUnitFixture(t, "")
	p := f.plugin

	err := p.ListOrgUserSecret(unitAlice, "wrong", "org1", "user/alice/d")
	var ua *secrets.Unauthenticated
	require.ErrorAs(t, err, &ua)
	assert.Equal(t, "agbot unable to login user org1/alice, HTTP status code: 401", ua.LoginError.Error())
	assert.Equal(t, unitAlice, ua.ExchangeUser)

	err = p.CreateOrgSecret(unitAlice, pw(unitAlice), "org1", "x", secrets.SecretDetails{Key: "k", Value: "v"})
	var pd *secrets.PermissionDenied
	require.ErrorAs(t, err, &pd)
	assert.Equal(t, http.MethodPost, pd.HttpMethod)
	assert.Equal(t, unitAlice, pd.ExchangeUser)
	assert.NotEmpty(t, pd.SecretPath)

	err = p.DeleteOrgSecret(unitAlice, pw(unitAlice), "org1", "a")
	require.ErrorAs(t, err, &pd)
	assert.Equal(t, http.MethodDelete, pd.HttpMethod)

	_, err = p.ListOrgUserSecrets(unitAlice, pw(unitAlice), "org1", "user/bob")
	require.ErrorAs(t, err, &pd)
	assert.Equal(t, "LIST", pd.HttpMethod)

	_, err = p.GetSecretDetails(unitAgbot, unitAgbotToken, "org1", "", "", "zz")
	var nf *secrets.NoSecretFound
	require.ErrorAs(t, err, &nf, "ValidateAndExtractSecrets switches on *secrets.NoSecretFound")
	_, isType := err.(*secrets.NoSecretFound) //nolint:errorlint // anax's agreement worker uses a type switch, so the error must not be wrapped
	assert.True(t, isType)

	_, err = p.GetSecretDetails(unitAgbot, unitAgbotToken, "", "", "", "a")
	var br *secrets.BadRequest
	require.ErrorAs(t, err, &br)
	assert.Equal(t, map[string][]string{"errors": {"Organization name must not be an empty string"}}, br.Response)
	_, err = p.GetSecretMetadata("org1", "", "", "")
	require.ErrorAs(t, err, &br)
	assert.Equal(t, map[string][]string{"errors": {"Secret name must not be an empty string"}}, br.Response)

	f.x.mu.Lock()
	f.x.down = true
	f.x.mu.Unlock()
	err = p.ListOrgSecret(unitAlice, pw(unitAlice), "org1", "a")
	var su *secrets.SecretsProviderUnavailable
	require.ErrorAs(t, err, &su)
	assert.Equal(t, http.StatusServiceUnavailable, status(err))
	assert.NotContains(t, err.Error(), f.x.URL, "an outage does not tell the exchange's address")

	require.NoError(t, f.store.Close())
	_, err = p.GetSecretDetails(unitAgbot, unitAgbotToken, "org1", "", "", "a")
	require.ErrorAs(t, err, &su)
}

func TestGetSecretDetails(t *testing.T) {
	f := newUnitFixture(t, "")
	p := f.plugin
	tests := []struct {
		name                     string
		user, token              string
		org, sUser, sNode, sName string
		want                     secrets.SecretDetails
		status                   int
	}{
		{"agbot reads org", unitAgbot, unitAgbotToken, "org1", "", "", "a", secrets.SecretDetails{Key: "ka", Value: "va"}, 0},
		{"agbot reads user node", unitAgbot, unitAgbotToken, "org1", "alice", "n1", "e", secrets.SecretDetails{Key: "ke", Value: "ve"}, 0},
		{"agbot reads node", unitAgbot, unitAgbotToken, "org1", "", "n1", "c", secrets.SecretDetails{Key: "kc", Value: "vc"}, 0},
		{"agbot reads a folder's secret", unitAgbot, unitAgbotToken, "org1", "", "", "dir/b", secrets.SecretDetails{Key: "kb", Value: "vb"}, 0},
		{"agbot with a wrong token is a user", unitAgbot, "wrong", "org1", "", "", "a", secrets.SecretDetails{}, http.StatusUnauthorized},
		{"admin reads org", unitAdmin, pw(unitAdmin), "org1", "", "", "a", secrets.SecretDetails{Key: "ka", Value: "va"}, 0},
		{"user reads org: not allowed", unitAlice, pw(unitAlice), "org1", "", "", "a", secrets.SecretDetails{}, http.StatusForbidden},
		{"user reads own", unitAlice, pw(unitAlice), "org1", "alice", "", "d", secrets.SecretDetails{Key: "kd", Value: "vd"}, 0},
		{"user reads another's", unitAlice, pw(unitAlice), "org1", "bob", "", "f", secrets.SecretDetails{}, http.StatusForbidden},
		{"admin reads a user's", unitAdmin, pw(unitAdmin), "org1", "bob", "", "f", secrets.SecretDetails{}, http.StatusForbidden},
		{"missing", unitAgbot, unitAgbotToken, "org1", "", "n9", "a", secrets.SecretDetails{}, http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.GetSecretDetails(tc.user, tc.token, tc.org, tc.sUser, tc.sNode, tc.sName)
			assert.Equal(t, tc.status, status(err), "error: %v", err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestGetSecretDetailsMapping checks that store data other than
// {key, value} is served with ohsecret.FromData's mapping.
func TestGetSecretDetailsMapping(t *testing.T) {
	f := newUnitFixture(t, "")
	data := map[string][]byte{"user": []byte("u"), "password": []byte("p")}
	putUnit(t, f.store, "org1/multi", data)
	want, err := ohsecret.FromData(data)
	require.NoError(t, err)
	got, err := f.plugin.GetSecretDetails(unitAgbot, unitAgbotToken, "org1", "", "", "multi")
	require.NoError(t, err)
	assert.Equal(t, secrets.SecretDetails{Key: want.Key, Value: want.Value}, got)

	putUnit(t, f.store, "org1/binary", map[string][]byte{"value": {0xff, 0xfe}})
	_, err = f.plugin.GetSecretDetails(unitAgbot, unitAgbotToken, "org1", "", "", "binary")
	var ir *secrets.InvalidResponse
	require.ErrorAs(t, err, &ir)
	assert.Equal(t, http.StatusInternalServerError, status(err))
}

// TestCreateKeepsLabels checks that a write through the plugin keeps the
// secret's labels, which the Open Horizon body cannot carry.
func TestCreateKeepsLabels(t *testing.T) {
	f := newUnitFixture(t, "")
	ctx := context.Background()
	_, err := f.store.Put(ctx, &secretstore.Secret{Name: "org1/l", Data: map[string][]byte{"value": []byte("1")}, Labels: map[string]string{"owner": "ops"}}, secretstore.PutOptions{})
	require.NoError(t, err)
	require.NoError(t, f.plugin.CreateOrgSecret(unitAdmin, pw(unitAdmin), "org1", "l", secrets.SecretDetails{Key: "k", Value: "2"}))
	s, err := f.store.Get(ctx, "org1/l")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"owner": "ops"}, s.Labels)
	assert.Equal(t, ohsecret.Details{Key: "k", Value: "2"}.Data(), s.Data)
}

func TestLifecycle(t *testing.T) {
	st := memory.New()
	p, err := agbotsecrets.New(agbotsecrets.Options{Store: st})
	require.NoError(t, err)
	assert.False(t, p.IsReady(), "ready before Login")
	assert.Zero(t, p.GetLastVaultStatus())
	require.NoError(t, p.Login())
	assert.True(t, p.IsReady())
	require.NoError(t, p.Renew())
	putUnit(t, st, "org1/a", map[string][]byte{"value": []byte("v")})
	_, err = p.GetSecretMetadata("org1", "", "", "a")
	require.NoError(t, err)
	assert.NotZero(t, p.GetLastVaultStatus())
	p.Close()
	assert.False(t, p.IsReady())
	_, err = st.Stat(context.Background(), "org1/a")
	assert.NoError(t, err, "Close leaves an embedder's store open")
}

// TestInitialize configures the plugin the way anax does: Initialize with
// anax's config naming the plugin's file, then Login.
func TestInitialize(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edgesecrets.json")
	changes := filepath.Join(dir, "changes.json")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`{"store": {"type": "memory"}, "changeFile": "`+changes+`"}`), 0o600))
	hc := &config.HorizonConfig{}
	hc.AgreementBot.ExchangeId = unitAgbot
	hc.AgreementBot.ExchangeToken = unitAgbotToken
	hc.AgreementBot.ExchangeURL = "http://127.0.0.1:1/v1"
	hc.AgreementBot.SecretsProviderConfig = cfgPath

	p := new(agbotsecrets.Plugin)
	require.NoError(t, p.Initialize(hc))
	assert.False(t, p.IsReady(), "Initialize opens nothing")
	require.NoError(t, p.Login())
	assert.True(t, p.IsReady())
	_, err := os.Stat(changes)
	assert.NoError(t, err, "Login creates the change file")
	_, err = p.GetSecretDetails(unitAgbot, unitAgbotToken, "org1", "", "", "a")
	assert.Equal(t, http.StatusNotFound, status(err), "the agbot reads its own, empty, store: %v", err)
	p.Close()
	assert.False(t, p.IsReady())
	require.NoError(t, p.Login(), "Login after Close opens the store again")
	p.Close()

	hc.AgreementBot.SecretsProviderConfig = ""
	err = new(agbotsecrets.Plugin).Initialize(hc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SecretsProviderConfig")

	hc.AgreementBot.SecretsProviderConfig = filepath.Join(dir, "missing.json")
	assert.Error(t, new(agbotsecrets.Plugin).Initialize(hc))
	assert.Error(t, new(agbotsecrets.Plugin).Login(), "Login before Initialize")
}

// TestConcurrentRequests runs readers, writers and the updater's metadata
// calls at once (for -race) and checks the times the metadata gives one
// secret never go back.
func TestConcurrentRequests(t *testing.T) {
	f := newUnitFixture(t, filepath.Join(t.TempDir(), "changes.json"))
	p := f.plugin
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 20 {
				v := secrets.SecretDetails{Key: "k", Value: string(rune('a'+i)) + string(rune('a'+j))}
				assert.NoError(t, p.CreateOrgSecret(unitAdmin, pw(unitAdmin), "org1", "shared", v))
			}
		})
		wg.Go(func() {
			last := int64(0)
			for range 40 {
				md, err := p.GetSecretMetadata("org1", "", "", "shared")
				if err != nil {
					continue // not written yet
				}
				assert.GreaterOrEqual(t, md.UpdateTime, last)
				last = md.UpdateTime
			}
		})
		wg.Go(func() {
			for range 10 {
				_, err := p.ListAllSecrets(unitAlice, pw(unitAlice), "org1", "")
				assert.NoError(t, err)
				_, err = p.GetSecretDetails(unitAgbot, unitAgbotToken, "org1", "alice", "", "d")
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
}
