package vault_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/ohtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// Exchange identities of the Open Horizon tests.
const (
	ohOrg      = "myorg"
	agbotID    = "agbot1"
	agbotToken = "agbot-exchange-token"
	adminName  = "orgadmin"
	adminPass  = "orgadmin-password"
	userName   = "alice"
	userPass   = "alice-password"
	otherName  = "bob"
)

// ohHub starts a hub with an agbot, an org admin and two users of ohOrg.
func ohHub(t *testing.T, opts ohtest.Options) *ohtest.Hub {
	t.Helper()
	h := ohtest.Start(t, opts)
	h.AddAgbot(ohOrg, agbotID, agbotToken)
	h.AddUser(ohOrg, adminName, adminPass, true)
	h.AddUser(ohOrg, userName, userPass, false)
	h.AddUser(ohOrg, otherName, "bob-password", false)
	return h
}

// agbotConfig is the config of the agbot's own store: anax's layout, the
// org as the scope.
func agbotConfig(h *ohtest.Hub) vault.Config {
	return vault.Config{
		Address: h.VaultAddr, Mount: ohtest.KVMount, Scope: ohOrg,
		Auth: vault.Auth{Method: "openhorizon", ExchangeID: ohOrg + "/" + agbotID, ExchangeToken: agbotToken},
	}
}

// seed writes a secret with the root token: what an admin wrote earlier.
func seed(t *testing.T, h *ohtest.Hub, path, value string) {
	t.Helper()
	_, err := h.VaultClient(t).KVv2(ohtest.KVMount).Put(t.Context(), path, map[string]any{"key": "k", "value": value})
	require.NoError(t, err)
}

func requirePermission(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	require.ErrorIs(t, err, edgesecrets.ErrPermission, "%s: %v", what, err)
}

// The agbot logs in with its exchange credentials and gets
// vault-exchange-auth's agbot policy: it reads and lists every org's
// secrets, and Vault refuses it a write.
func TestOpenHorizonAgbotReadsAndListsButMayNotWrite(t *testing.T) {
	h := ohHub(t, ohtest.Options{})
	seed(t, h, ohOrg+"/db", "s3cret")
	seed(t, h, ohOrg+"/user/"+userName+"/api", "u-s3cret")
	rec := &recorder{}
	st := open(t, agbotConfig(h), vault.Options{WrapTransport: rec.wrap})
	assert.Equal(t, int64(1), rec.logins.Load(), "one login")

	got, err := st.Get(t.Context(), "db")
	require.NoError(t, err)
	assert.Equal(t, "s3cret", string(got.Data["value"]))
	names, err := st.List(t.Context(), "")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"db", "user/" + userName + "/api"}, names)

	_, err = st.Put(t.Context(), &secretstore.Secret{Name: "db", Data: d("key", "k", "value", "changed")}, secretstore.PutOptions{})
	requirePermission(t, err, "the agbot's write")
	got, err = st.Get(t.Context(), "db")
	require.NoError(t, err)
	assert.Equal(t, "s3cret", string(got.Data["value"]), "nothing was written")
	requirePermission(t, st.Delete(t.Context(), "db"), "the agbot's delete")

	var agbotLookups int
	for _, r := range h.Requests() {
		if r.Path == "/v1/orgs/"+ohOrg+"/agbots/"+agbotID && r.Identity == ohOrg+"/"+agbotID && r.Status == http.StatusOK {
			agbotLookups++
		}
	}
	assert.Positive(t, agbotLookups, "Vault's plugin checked the agbot with the exchange")
}

// asCaller opens a caller's view of st and closes it when t ends.
func asCaller(t *testing.T, st *secretstore.Store, id, token string) *secretstore.Store {
	t.Helper()
	cs, err := vault.AsCaller(t.Context(), st, vault.Caller{ID: id, Token: edgesecrets.Sensitive(token)})
	require.NoError(t, err, "logging %s in", id)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// Each user's request runs with that user's token: Vault's ACL policy
// from vault-exchange-auth decides, not the agbot's.
func TestOpenHorizonCallersActWithTheirOwnPolicies(t *testing.T) {
	h := ohHub(t, ohtest.Options{})
	seed(t, h, ohOrg+"/user/"+otherName+"/private", "bob's")
	rec := &recorder{keep: true}
	st := open(t, agbotConfig(h), vault.Options{WrapTransport: rec.wrap})
	ctx := t.Context()
	put := func(s *secretstore.Store, name string) error {
		_, err := s.Put(ctx, &secretstore.Secret{Name: name, Data: d("key", "k", "value", name)}, secretstore.PutOptions{})
		return err
	}

	t.Run("an org admin writes an org secret", func(t *testing.T) {
		admin := asCaller(t, st, ohOrg+"/"+adminName, adminPass)
		require.NoError(t, put(admin, "shared"))
		got, err := st.Get(ctx, "shared")
		require.NoError(t, err, "the agbot reads what the admin wrote")
		assert.Equal(t, "shared", string(got.Data["value"]))
		require.NoError(t, admin.Delete(ctx, "shared"))
		_, err = st.Get(ctx, "shared")
		require.ErrorIs(t, err, edgesecrets.ErrNotFound)
	})
	t.Run("a user is refused an org write but writes its own", func(t *testing.T) {
		user := asCaller(t, st, ohOrg+"/"+userName, userPass)
		requirePermission(t, put(user, "org-wide"), "a user's org write")
		_, err := st.Get(ctx, "org-wide")
		require.ErrorIs(t, err, edgesecrets.ErrNotFound, "nothing was written")

		mine := "user/" + userName + "/mine"
		require.NoError(t, put(user, mine))
		got, err := user.Get(ctx, mine)
		require.NoError(t, err)
		assert.Equal(t, mine, string(got.Data["value"]))
	})
	t.Run("a user cannot read another user's secret", func(t *testing.T) {
		user := asCaller(t, st, ohOrg+"/"+userName, userPass)
		_, err := user.Get(ctx, "user/"+otherName+"/private")
		requirePermission(t, err, "reading bob's secret as alice")
		_, err = st.Get(ctx, "user/"+otherName+"/private")
		require.NoError(t, err, "the agbot may")
	})
	t.Run("one login request, no KV detection", func(t *testing.T) {
		rec.takePaths()
		cs, err := vault.AsCaller(ctx, st, vault.Caller{ID: ohOrg + "/" + userName, Token: userPass})
		require.NoError(t, err)
		assert.Equal(t, []string{"PUT /v1/auth/openhorizon/login"}, rec.takePaths(), "vault/api writes with PUT, which Vault takes as POST")
		var c *api.Client
		require.True(t, cs.As(&c))
		tok := c.Token()
		require.NotEmpty(t, tok)
		var parent *api.Client
		require.True(t, st.As(&parent))
		assert.NotEqual(t, parent.Token(), tok, "the caller's token, not the agbot's")

		require.NoError(t, cs.Close())
		_, err = h.VaultClient(t).Auth().Token().Lookup(tok)
		require.Error(t, err, "Close revoked the caller's token")
		_, err = st.Get(ctx, "user/"+otherName+"/private")
		require.NoError(t, err, "the agbot's store is untouched")
	})
}

// A refused login is ErrPermission with Vault's status in a LoginError;
// no credential appears in the error.
func TestOpenHorizonRefusedLogin(t *testing.T) {
	h := ohHub(t, ohtest.Options{})
	st := open(t, agbotConfig(h))

	for _, tc := range []struct{ name, id, token string }{
		{"wrong password", ohOrg + "/" + userName, "not-alices-password"},
		{"unknown user", ohOrg + "/nobody", "whatever-password"},
		{"another org", "otherorg/" + userName, userPass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := vault.AsCaller(t.Context(), st, vault.Caller{ID: tc.id, Token: edgesecrets.Sensitive(tc.token)})
			require.Nil(t, cs)
			requirePermission(t, err, "the login")
			var le *vault.LoginError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, http.StatusForbidden, le.StatusCode, "vault-exchange-auth refuses with permission denied")
			assert.Equal(t, "openhorizon", le.Method)
			assert.Equal(t, ohtest.AuthMount, le.Mount)
			assert.NotContains(t, err.Error(), tc.token)
		})
	}

	t.Run("the store's own login", func(t *testing.T) {
		cfg := agbotConfig(h)
		cfg.Auth.ExchangeToken = "not-the-agbot-token"
		_, err := vault.New(t.Context(), cfg, vault.Options{})
		requirePermission(t, err, "the agbot's login")
		var le *vault.LoginError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, http.StatusForbidden, le.StatusCode)
		assert.NotContains(t, err.Error(), "not-the-agbot-token")
	})

	t.Run("malformed callers are invalid", func(t *testing.T) {
		for _, c := range []vault.Caller{
			{ID: userName, Token: userPass},
			{ID: ohOrg + "/" + userName},
			{ID: ohOrg + "/" + userName, Token: userPass, Mount: "a/../b"},
		} {
			_, err := vault.AsCaller(t.Context(), st, c)
			require.ErrorIs(t, err, edgesecrets.ErrInvalid, "%v", c)
			assert.NotContains(t, err.Error(), userPass)
		}
	})
}

// The agbot's store renews its periodic token, and logs in again when the
// token is revoked.
func TestOpenHorizonRenewsAndLogsInAgain(t *testing.T) {
	const period = 3 * time.Second
	h := ohHub(t, ohtest.Options{AgbotRenewal: period})
	seed(t, h, ohOrg+"/db", "s3cret")
	rec := &recorder{}
	st := open(t, agbotConfig(h), vault.Options{WrapTransport: rec.wrap})
	ctx := t.Context()

	t.Run("renewal", func(t *testing.T) {
		require.Eventually(t, func() bool { return rec.renewals.Load() >= 2 }, 6*period, 100*time.Millisecond, "the watcher renews the token")
		_, err := st.Get(ctx, "db")
		require.NoError(t, err, "after more than one period")
		assert.Equal(t, int64(1), rec.logins.Load(), "renewed, not logged in again")
	})
	t.Run("re-login after revocation", func(t *testing.T) {
		var c *api.Client
		require.True(t, st.As(&c))
		old := c.Token()
		require.NoError(t, h.VaultClient(t).Auth().Token().RevokeOrphanWithContext(ctx, old))
		logins := rec.logins.Load()
		got, err := st.Get(ctx, "db")
		require.NoError(t, err, "the store logged in again and retried")
		assert.Equal(t, "s3cret", string(got.Data["value"]))
		assert.Equal(t, logins+1, rec.logins.Load(), "one fresh login")
		assert.NotEqual(t, old, c.Token())
		require.NoError(t, st.CheckCredentials(ctx))
	})
}

// otherBackend is a driver of another backend; AsCaller calls none of
// its methods.
type otherBackend struct{ driver.Store }

func (otherBackend) Close() error { return nil }

func TestAsCallerOnOtherStores(t *testing.T) {
	t.Run("not vault", func(t *testing.T) {
		other, err := secretstore.New(otherBackend{}, secretstore.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = other.Close() })
		_, err = vault.AsCaller(t.Context(), other, vault.Caller{ID: "o/u", Token: "t"})
		require.ErrorIs(t, err, errors.ErrUnsupported)
		_, err = vault.AsCaller(t.Context(), nil, vault.Caller{ID: "o/u", Token: "t"})
		require.ErrorIs(t, err, errors.ErrUnsupported)
	})
	t.Run("unreachable vault", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := "http://" + l.Addr().String()
		require.NoError(t, l.Close())
		c, err := api.NewClient(&api.Config{Address: addr})
		require.NoError(t, err)
		// A caller's client and a fixed KV version: New sends no request.
		st := open(t, vault.Config{KVVersion: "2", Mount: ohtest.KVMount}, vault.Options{Client: c})
		_, err = vault.AsCaller(t.Context(), st, vault.Caller{ID: "o/u", Token: "tok-never-printed"})
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
		assert.False(t, errors.Is(err, edgesecrets.ErrPermission))
		assert.Contains(t, err.Error(), fmt.Sprintf("cannot reach vault at %s", addr))
		assert.NotContains(t, err.Error(), "tok-never-printed")
	})
}
