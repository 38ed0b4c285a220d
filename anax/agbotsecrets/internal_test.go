package agbotsecrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

func TestStoreErrorMapping(t *testing.T) {
	p := &Plugin{}
	p.configure(Options{})
	kindErr := func(kind error) error {
		return &secretstore.Error{Op: "get", Name: "org1/s", Kind: kind, Err: errors.New("cause")}
	}
	tests := []struct {
		name   string
		err    error
		want   any
		status int
	}{
		{"not found", kindErr(edgesecrets.ErrNotFound), &secrets.NoSecretFound{}, http.StatusNotFound},
		{"permission", kindErr(edgesecrets.ErrPermission), &secrets.PermissionDenied{}, http.StatusForbidden},
		{"invalid", kindErr(edgesecrets.ErrInvalid), &secrets.BadRequest{}, http.StatusBadRequest},
		{"unavailable", kindErr(edgesecrets.ErrUnavailable), &secrets.SecretsProviderUnavailable{}, http.StatusServiceUnavailable},
		{"deadline", context.DeadlineExceeded, &secrets.SecretsProviderUnavailable{}, http.StatusServiceUnavailable},
		{"conflict", kindErr(edgesecrets.ErrConflict), &secrets.Unknown{}, http.StatusInternalServerError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.storeError(tc.err, methodGet, "org1/s", "org1/u")
			assert.IsType(t, tc.want, got)
			assert.Equal(t, tc.status, secrets.WrapSecretsError(got).ResponseCode)
		})
	}
}

func TestCallerErrorMapping(t *testing.T) {
	p := &Plugin{}
	p.configure(Options{})
	refused := &secretstore.Error{Op: "open", Kind: edgesecrets.ErrPermission, Err: &vault.LoginError{Method: "openhorizon", Mount: "openhorizon", StatusCode: 403}}
	err := p.callerError(refused, "org1/u")
	var ua *secrets.Unauthenticated
	require.ErrorAs(t, err, &ua)
	assert.Equal(t, "agbot unable to login user org1/u, HTTP status code: 403", ua.LoginError.Error())
	assert.Equal(t, http.StatusUnauthorized, secrets.WrapSecretsError(err).ResponseCode)

	down := &secretstore.Error{Op: "open", Kind: edgesecrets.ErrUnavailable, Err: errors.New("dial tcp 10.0.0.1:8200: refused")}
	err = p.callerError(down, "org1/u")
	var su *secrets.SecretsProviderUnavailable
	require.ErrorAs(t, err, &su)
	assert.NotContains(t, err.Error(), "10.0.0.1", "the store's address is not told")

	err = p.callerError(&secretstore.Error{Op: "open", Kind: edgesecrets.ErrInvalid, Err: errors.New("no token")}, "org1/u")
	require.ErrorAs(t, err, &ua)
}

func TestDirName(t *testing.T) {
	tests := []struct {
		path, store string
		user, node  string
	}{
		{"", "org1/", "", ""},
		{"user/alice", "org1/user/alice/", "alice", ""},
		{"node/n1", "org1/node/n1/", "", "n1"},
		{"user/alice/node/n1", "org1/user/alice/node/n1/", "alice", "n1"},
		{"dir", "org1/dir/", "", ""},
	}
	for _, tc := range tests {
		d, err := dirName("org1", tc.path)
		require.NoError(t, err, tc.path)
		assert.Equal(t, tc.store, d.store, tc.path)
		assert.Equal(t, tc.user, d.User, tc.path)
		assert.Equal(t, tc.node, d.Node, tc.path)
	}
	for _, bad := range []string{"a//b", "user", "../x"} {
		_, err := dirName("org1", bad)
		assert.Error(t, err, bad)
	}
	_, err := dirName("", "")
	assert.Error(t, err, "no organisation")
}

// aclStore is a driver over a memory store that lists as Vault's KV v2
// does under an ACL: folder by folder from the prefix's folder, failing
// with ErrPermission at the first folder the caller may not list.
type aclStore struct {
	driver.Store
	all     *secretstore.Store
	refused []string // folders ("org1/user/") the caller may not list
}

func (a aclStore) List(ctx context.Context, prefix string) ([]string, error) {
	names, err := a.all.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []string
	var walk func(dir string) error
	walk = func(dir string) error {
		if slices.Contains(a.refused, dir) {
			return &secretstore.Error{Kind: edgesecrets.ErrPermission, Err: fmt.Errorf("list %s refused", dir)}
		}
		seen := map[string]bool{}
		for _, n := range names {
			rest, ok := strings.CutPrefix(n, dir)
			if !ok {
				continue
			}
			first, _, deeper := strings.Cut(rest, "/")
			key := dir + first
			if !strings.HasPrefix(key, prefix) && !strings.HasPrefix(prefix, key+"/") {
				continue
			}
			if !deeper {
				if strings.HasPrefix(key, prefix) {
					out = append(out, key)
				}
				continue
			}
			if !seen[first] {
				seen[first] = true
				if err := walk(key + "/"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(prefix[:strings.LastIndex(prefix, "/")+1]); err != nil {
		return nil, err
	}
	return out, nil
}

// TestListAsVaultUser checks the listings of a user whom Vault's ACL
// refuses part of the tree against what anax's Vault plugin lists for
// vault-exchange-auth's non-admin policy: LIST is refused on user/ and on
// other users' folders, allowed on the user's own.
func TestListAsVaultUser(t *testing.T) {
	all := memory.New()
	for _, n := range []string{"org1/a", "org1/dir/b", "org1/dir/deep/c", "org1/node/n1/d", "org1/user/alice/e", "org1/user/alice/node/n1/f", "org1/user/bob/g"} {
		_, err := all.Put(context.Background(), &secretstore.Secret{Name: n, Data: edgesecrets.Data{"value": []byte("v")}}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	user, err := secretstore.New(aclStore{all: all, refused: []string{"org1/user/", "org1/user/bob/", "org1/dir/deep/"}}, secretstore.Options{MaxAttempts: 1})
	require.NoError(t, err)
	p, err := New(Options{Store: all})
	require.NoError(t, err)
	a := &access{store: user, user: "org1/alice", done: func() {}}

	tests := []struct {
		dir     string
		skipOwn bool
		want    []string
		refused bool
	}{
		// anax: LIST org1/ → a, dir/ (user/, node/ filtered) → dir/b;
		// dir/deep/ refused and left out.
		{"org1/", true, []string{"org1/a", "org1/dir/b"}, false},
		// allsecrets: node/ descended into; user/ refused and left out.
		{"org1/", false, []string{"org1/a", "org1/dir/b", "org1/node/n1/d"}, false},
		{"org1/user/alice/", false, []string{"org1/user/alice/e", "org1/user/alice/node/n1/f"}, false},
		{"org1/user/bob/", false, nil, true},
		{"org1/user/", false, nil, true},
	}
	for _, tc := range tests {
		got, found, err := p.listTree(context.Background(), a, tc.dir, tc.skipOwn)
		if tc.refused {
			assert.ErrorIs(t, err, edgesecrets.ErrPermission, tc.dir)
			continue
		}
		require.NoError(t, err, tc.dir)
		assert.True(t, found, tc.dir)
		assert.Equal(t, tc.want, got, tc.dir)
	}
}

func TestWithAgbotCredentials(t *testing.T) {
	parse := func(s string) secretstore.Config {
		var c secretstore.Config
		require.NoError(t, json.Unmarshal([]byte(s), &c))
		return c
	}
	auth := func(c secretstore.Config) map[string]any {
		var v struct{ Auth map[string]any }
		require.NoError(t, json.Unmarshal(c.Sections["vault"], &v))
		return v.Auth
	}
	oh := parse(`{"type": "vault", "vault": {"address": "http://127.0.0.1:8200", "mount": "openhorizon", "auth": {"method": "openhorizon"}}}`)
	got, err := withAgbotCredentials(oh, "org1/agbot", "tok")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"method": "openhorizon", "exchangeID": "org1/agbot", "exchangeToken": "tok"}, auth(got))
	assert.Equal(t, map[string]any{"method": "openhorizon"}, auth(oh), "the caller's config is not changed")

	given := parse(`{"type": "vault", "vault": {"address": "http://127.0.0.1:8200", "auth": {"method": "openhorizon", "exchangeID": "org1/other", "exchangeTokenEnv": "T"}}}`)
	got, err = withAgbotCredentials(given, "org1/agbot", "tok")
	require.NoError(t, err)
	assert.Equal(t, "org1/other", auth(got)["exchangeID"], "an id given is kept")
	assert.NotContains(t, auth(got), "exchangeToken")

	approle := parse(`{"type": "vault", "vault": {"address": "http://127.0.0.1:8200", "auth": {"method": "approle", "roleID": "r", "secretIDEnv": "S"}}}`)
	got, err = withAgbotCredentials(approle, "org1/agbot", "tok")
	require.NoError(t, err)
	assert.Equal(t, approle, got)
}

func TestDecodeConfig(t *testing.T) {
	good, err := decodeConfig([]byte(`{"store": {"type": "memory"}, "changeFile": "/var/c.json", "userAuthMount": "oh"}`))
	require.NoError(t, err)
	assert.Equal(t, "memory", good.Store.Type)
	assert.Equal(t, "/var/c.json", good.ChangeFile)
	assert.Equal(t, "oh", good.UserAuthMount)

	const token = "s3cr3t-t0ken"
	for name, bad := range map[string]string{
		"empty":          ``,
		"not an object":  `[]`,
		"no store":       `{"changeFile": "/x"}`,
		"null store":     `{"store": null}`,
		"unknown member": `{"store": {"type": "memory"}, "chngeFile": "/x"}`,
		"empty file":     `{"store": {"type": "memory"}, "changeFile": ""}`,
		"bad store":      `{"store": {"type": "vault", "vault": {"auth": {"method": "token", "token": "` + token + `"}}}}`,
		"trailing":       `{"store": {"type": "memory"}} {}`,
		"wrong type":     `{"store": {"type": "memory"}, "changeFile": "` + token + `", "userAuthMount": 1}`,
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := decodeConfig([]byte(bad))
			if err == nil {
				_, err = storeConfig(cfg.Store, "org1/agbot", "tok")
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, errConfig)
			assert.NotContains(t, err.Error(), token)
		})
	}
}

func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte(`{"store": {"type": "memory"}, "changeFile": "/var/c.json"}`))
	f.Add([]byte(`{"store": {"type": "vault", "vault": {"address": "http://x", "auth": {"method": "openhorizon"}}}}`))
	f.Add([]byte(`{"store": 1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := decodeConfig(data)
		if err != nil {
			if !errors.Is(err, errConfig) {
				t.Fatalf("error does not match errConfig: %v", err)
			}
			return
		}
		st, err := storeConfig(cfg.Store, "org/agbot", "tok")
		if err != nil {
			if !errors.Is(err, errConfig) {
				t.Fatalf("storeConfig's error does not match errConfig: %v", err)
			}
			return
		}
		if verr := st.Validate(); verr != nil {
			t.Fatalf("storeConfig returned a config that does not validate: %v", verr)
		}
	})
}
