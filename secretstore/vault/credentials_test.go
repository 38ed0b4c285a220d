package vault_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/storewatch"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// childToken creates a token (a child of the root token) with policy.
func childToken(t *testing.T, c *api.Client, policy string, ttl, maxTTL time.Duration, renewable bool) string {
	t.Helper()
	req := &api.TokenCreateRequest{Policies: []string{policy}, TTL: ttl.String(), Renewable: &renewable}
	if maxTTL > 0 {
		req.ExplicitMaxTTL = maxTTL.String()
	}
	tok, err := c.Auth().Token().CreateWithContext(t.Context(), req)
	require.NoError(t, err)
	return tok.Auth.ClientToken
}

// tokenEnv puts token in a fresh environment variable and returns its name.
func tokenEnv(t *testing.T, token string) string {
	t.Helper()
	name := "EDGESECRETS_TEST_TOKEN_" + strings.ReplaceAll(unique("v"), "-", "_")
	require.NoError(t, os.Setenv(name, token))
	t.Cleanup(func() { _ = os.Unsetenv(name) })
	return name
}

const errorLine = `"level":"ERROR"`

// The failure: the agbot's own token ends (a child token at its
// max TTL, a token from an environment variable, a token file nobody
// updates, an AppRole whose secret ID is gone) and every name reads 403.
// The store must say so: CheckCredentials matches ErrPermission and names
// the cause (never the token), every name reads Forbidden, the watch cycle
// shows a store-wide failure, and the log carries one error.
func TestCheckCredentialsWhenTheTokenEnds(t *testing.T) {
	srv := vaulttest.Shared(t)
	root := srv.Client(t)
	const ttl, maxTTL = 2 * time.Second, 4 * time.Second
	cases := []struct {
		name  string
		auth  func(t *testing.T, policy string) (vault.Auth, string) // the auth and the token it starts with ("" if issued by a login)
		after func(t *testing.T, auth vault.Auth)                    // runs once the store is open
		cause []string
	}{
		{
			name: "token from an environment variable reaches its max TTL",
			auth: func(t *testing.T, policy string) (vault.Auth, string) {
				tok := childToken(t, root, policy, ttl, maxTTL, true)
				return vault.Auth{Method: "token", TokenEnv: tokenEnv(t, tok)}, tok
			},
			cause: []string{"the token from environment variable EDGESECRETS_TEST_TOKEN_", "it expired at its max TTL", "cannot be renewed or replaced"},
		},
		{
			name: "child token given in the config reaches its max TTL",
			auth: func(t *testing.T, policy string) (vault.Auth, string) {
				tok := childToken(t, root, policy, ttl, maxTTL, true)
				return vault.Auth{Method: "token", Token: edgesecrets.Sensitive(tok)}, tok
			},
			cause: []string{"the token given in auth.token", "it expired at its max TTL"},
		},
		{
			name: "non-renewable token from an environment variable expires",
			auth: func(t *testing.T, policy string) (vault.Auth, string) {
				tok := childToken(t, root, policy, maxTTL, 0, false)
				return vault.Auth{Method: "token", TokenEnv: tokenEnv(t, tok)}, tok
			},
			cause: []string{"environment variable", "it expired and is not renewable"},
		},
		{
			name: "token file that nobody updates",
			auth: func(t *testing.T, policy string) (vault.Auth, string) {
				tok := childToken(t, root, policy, ttl, maxTTL, true)
				return vault.Auth{Method: "token", TokenFile: credentialFile(t, tok)}, tok
			},
			cause: []string{"the token from file ", "logging in again failed", "vault refused the login"},
		},
		{
			name: "AppRole whose secret ID is destroyed",
			auth: func(t *testing.T, policy string) (vault.Auth, string) {
				return appRole(t, root, policy, ttl, maxTTL), ""
			},
			after: func(t *testing.T, auth vault.Auth) {
				sid, err := os.ReadFile(auth.SecretIDFile)
				require.NoError(t, err)
				_, err = root.Logical().WriteWithContext(t.Context(), "auth/"+auth.Mount+"/role/agbot/secret-id/destroy",
					map[string]any{"secret_id": strings.TrimSpace(string(sid))})
				require.NoError(t, err)
			},
			cause: []string{"the token of the approle login", "logging in again failed", "vault refused the login"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mount := srv.EnableKV(t, 2)
			auth, token := c.auth(t, readPolicy(t, root, mount))
			logger, logs := logtest.NewLogger()
			rec := &recorder{}
			s := open(t, vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2", Auth: auth},
				vault.Options{WrapTransport: rec.wrap, Logger: logger})
			mon := s
			names := []string{"app/a", "app/b", "app/c"}
			for _, n := range names {
				put(t, mon, n, d("k", "v"), nil)
			}
			if token == "" {
				token = rec.token()
			}
			w, err := storewatch.New(mon, storewatch.Options{})
			require.NoError(t, err)
			require.NoError(t, w.Watch(names...))
			ctx := t.Context()
			healthy := w.Poll(ctx)
			require.Equal(t, 3, healthy.Answered)
			require.True(t, healthy.CredentialsChecked)
			require.NoError(t, healthy.Credentials, "the token works at first")
			if c.after != nil {
				c.after(t, auth)
			}

			// Bounded: the token's max TTL plus the renewal loop's retry.
			var checkErr error
			deadline := time.Now().Add(maxTTL + 15*time.Second)
			for time.Now().Before(deadline) {
				if checkErr = s.CheckCredentials(ctx); checkErr != nil && containsAll(checkErr.Error(), c.cause) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			require.ErrorIs(t, checkErr, edgesecrets.ErrPermission, "the credential check fails once the token has ended")
			for _, want := range c.cause {
				assert.Contains(t, checkErr.Error(), want, "the cause is named")
			}

			logins := rec.logins.Load()
			checks := mon.Stats()["check-credentials"].Calls
			cycle := w.Poll(ctx)
			assert.LessOrEqual(t, rec.logins.Load()-logins, int64(1), "refused reads do not each try a login")
			assert.Equal(t, [4]int{3, 0, 3, 0}, [4]int{cycle.Watched, cycle.Answered, cycle.Forbidden, cycle.Unavailable},
				"every name reads Forbidden")
			assert.ErrorIs(t, cycle.Credentials, edgesecrets.ErrPermission)
			assert.ErrorIs(t, cycle.StoreFailure(), edgesecrets.ErrPermission, "the cycle shows a store-wide failure")
			for _, ev := range cycle.Events {
				assert.Equal(t, storewatch.Forbidden, ev.Kind)
				assert.Contains(t, ev.Err.Error(), c.cause[0], "a refused read names the token's trouble, not a policy")
			}
			assert.Equal(t, checks+1, mon.Stats()["check-credentials"].Calls, "the watcher ran the check once per cycle")

			out := logs.String()
			assert.Equal(t, 1, strings.Count(out, errorLine), "one error in the log, however many reads were refused:\n%s", out)
			assert.Contains(t, out, `"msg":"vault token unusable`)
			assert.NotContains(t, out, token, "no token in the log")
			assert.NotContains(t, checkErr.Error(), token, "no token in the error")
			if auth.TokenEnv != "" || auth.Token != "" {
				assert.Contains(t, out, "vault token renewal ended and the token cannot be replaced", "the end was announced")
			}
		})
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// The contrast: a policy no longer granting one secret makes that name
// Forbidden while the others read fine and the credential check passes; no
// login is attempted and nothing is logged as an error.
func TestOneSecretRevokedByPolicyLeavesTheCredentialsHealthy(t *testing.T) {
	srv := vaulttest.Shared(t)
	root := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	policy := readPolicy(t, root, mount)
	logger, logs := logtest.NewLogger()
	rec := &recorder{}
	cfg := vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2", Auth: appRole(t, root, policy, time.Hour, time.Hour)}
	s := open(t, cfg, vault.Options{WrapTransport: rec.wrap, Logger: logger})
	names := []string{"app/a", "app/b", "app/c"}
	for _, n := range names {
		put(t, s, n, d("k", "v"), nil)
	}
	w, err := storewatch.New(s, storewatch.Options{})
	require.NoError(t, err)
	require.NoError(t, w.Watch(names...))
	ctx := t.Context()
	require.Equal(t, 3, w.Poll(ctx).Answered)
	logins := rec.logins.Load()

	// Deny app/b, keep the rest of the grant.
	require.NoError(t, root.Sys().PutPolicyWithContext(ctx, policy, fmt.Sprintf(`
path "%[1]s/data/app/*" { capabilities = ["create", "read", "update"] }
path "%[1]s/metadata/app/*" { capabilities = ["read", "list", "update"] }
path "%[1]s/data/app/b" { capabilities = ["deny"] }
path "%[1]s/metadata/app/b" { capabilities = ["deny"] }
`, mount)))

	cycle := w.Poll(ctx)
	assert.Equal(t, [3]int{2, 1, 0}, [3]int{cycle.Answered, cycle.Forbidden, cycle.Unavailable})
	require.Len(t, cycle.Events, 1)
	assert.Equal(t, storewatch.Forbidden, cycle.Events[0].Kind)
	assert.Equal(t, "app/b", cycle.Events[0].Name)
	assert.Contains(t, cycle.Events[0].Err.Error(), "the token's policies do not allow this request (HTTP 403)")
	assert.True(t, cycle.CredentialsChecked)
	assert.NoError(t, cycle.Credentials, "the agbot's token is fine")
	assert.NoError(t, cycle.StoreFailure())
	require.NoError(t, s.CheckCredentials(ctx))
	_, err = s.Get(ctx, "app/a")
	require.NoError(t, err, "the others still read")
	assert.Equal(t, logins, rec.logins.Load(), "a policy denial causes no login")
	assert.NotContains(t, logs.String(), errorLine)
}

// The outage ends when a usable token arrives: a token file rewritten
// after its token ended is picked up, the credential check passes again,
// reads work, and the log has one error and one recovery.
func TestTokenFileReplacedAfterTheOutage(t *testing.T) {
	srv := vaulttest.Shared(t)
	root := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	policy := readPolicy(t, root, mount)
	first := childToken(t, root, policy, 2*time.Second, 4*time.Second, true)
	file := credentialFile(t, first)
	logger, logs := logtest.NewLogger()
	s := open(t, vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2",
		Auth: vault.Auth{Method: "token", TokenFile: file}}, vault.Options{Logger: logger})
	put(t, s, "app/a", d("k", "v"), nil)
	ctx := t.Context()

	waitFor := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !done(); time.Sleep(100 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "%s within 20s", what)
		}
	}
	waitFor("the token's end", func() bool { return s.CheckCredentials(ctx) != nil })
	require.ErrorIs(t, s.CheckCredentials(ctx), edgesecrets.ErrPermission)
	_, err := s.Get(ctx, "app/a")
	require.ErrorIs(t, err, edgesecrets.ErrPermission)

	second := childToken(t, root, policy, time.Hour, 0, true)
	require.NoError(t, os.WriteFile(file, []byte(second), 0o600))
	waitFor("the new token", func() bool { return s.CheckCredentials(ctx) == nil })
	got, err := s.Get(ctx, "app/a")
	require.NoError(t, err, "reads work again")
	assert.Equal(t, "v", string(got.Data["k"]))

	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, errorLine), "one error for the outage:\n%s", out)
	assert.Equal(t, 1, strings.Count(out, `"msg":"vault token usable again"`), "one recovery:\n%s", out)
	assert.NotContains(t, out, first)
	assert.NotContains(t, out, second)
}
