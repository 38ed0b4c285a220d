package vault_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// readPolicy writes a policy allowing reads and writes under mount/app/ only
// and returns its name.
func readPolicy(t *testing.T, c *api.Client, mount string) string {
	t.Helper()
	name := unique("edge")
	hcl := fmt.Sprintf(`
path "%[1]s/data/app/*" { capabilities = ["create", "read", "update"] }
path "%[1]s/metadata/app/*" { capabilities = ["read", "list", "update"] }
`, mount)
	require.NoError(t, c.Sys().PutPolicyWithContext(t.Context(), name, hcl))
	return name
}

// enableAuth mounts an auth method at a unique path and returns the path.
func enableAuth(t *testing.T, c *api.Client, typ string) string {
	t.Helper()
	path := unique(typ)
	require.NoError(t, c.Sys().EnableAuthWithOptionsWithContext(t.Context(), path, &api.EnableAuthOptions{Type: typ}))
	return path
}

// appRole creates a role and writes its secret ID to a file; it returns the
// auth settings for the store.
func appRole(t *testing.T, c *api.Client, policy string, ttl, maxTTL time.Duration) vault.Auth {
	t.Helper()
	ctx := t.Context()
	mount := enableAuth(t, c, "approle")
	role := "auth/" + mount + "/role/agbot"
	_, err := c.Logical().WriteWithContext(ctx, role, map[string]any{
		"token_policies": policy, "token_ttl": int(ttl.Seconds()), "token_max_ttl": int(maxTTL.Seconds()),
	})
	require.NoError(t, err)
	rid, err := c.Logical().ReadWithContext(ctx, role+"/role-id")
	require.NoError(t, err)
	sid, err := c.Logical().WriteWithContext(ctx, role+"/secret-id", nil)
	require.NoError(t, err)
	file := credentialFile(t, sid.Data["secret_id"].(string)+"\n")
	return vault.Auth{Method: "approle", Mount: mount, RoleID: rid.Data["role_id"].(string), SecretIDFile: file}
}

// credentialFile writes a credential to a private file and returns its path.
func credentialFile(t *testing.T, value string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "credential")
	require.NoError(t, os.WriteFile(file, []byte(value), 0o600))
	return file
}

// requireLoginWorks opens a store with auth and writes and reads back a
// secret the policy from readPolicy allows.
func requireLoginWorks(t *testing.T, srv *vaulttest.Server, mount string, auth vault.Auth) {
	t.Helper()
	s := open(t, vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2", Auth: auth})
	put(t, s, "app/login", d("k", "v"), nil)
	got, err := s.Get(t.Context(), "app/login")
	require.NoError(t, err)
	assert.Equal(t, "v", string(got.Data["k"]))
}

// The Proof item: a role with a 3 s token TTL and a 6 s max TTL; reads keep
// working for well past the max TTL, first through renewals and then
// through fresh logins.
func TestAppRoleRenewsAndLogsInAgainBeyondMaxTTL(t *testing.T) {
	srv := vaulttest.Shared(t)
	c := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	const ttl, maxTTL = 3 * time.Second, 6 * time.Second
	logger, logs := logtest.NewLogger()
	cfg := vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2", Auth: appRole(t, c, readPolicy(t, c, mount), ttl, maxTTL)}
	rec := &recorder{}
	s := open(t, cfg, vault.Options{WrapTransport: rec.wrap, Logger: logger})
	put(t, s, "app/db", d("password", "pw-0"), nil)
	firstToken := rec.token()

	deadline := time.Now().Add(maxTTL + 2*ttl)
	reads := 0
	for time.Now().Before(deadline) {
		got, err := s.Get(t.Context(), "app/db")
		require.NoError(t, err, "read %d after %s", reads, time.Until(deadline))
		require.Equal(t, "pw-0", string(got.Data["password"]))
		require.NoError(t, s.CheckCredentials(t.Context()), "a token that logs in again is never unusable")
		reads++
		time.Sleep(200 * time.Millisecond)
	}
	assert.GreaterOrEqual(t, rec.renewals.Load(), int64(1), "the token was renewed")
	assert.GreaterOrEqual(t, rec.logins.Load(), int64(2), "a fresh login followed the end of renewal")
	assert.NotEqual(t, firstToken, rec.token(), "requests now carry a new token")
	assert.NotContains(t, logs.String(), firstToken, "no token in the log")
	assert.NotContains(t, logs.String(), rec.token(), "no token in the log")
	assert.Contains(t, logs.String(), "logging in again")
	assert.NotContains(t, logs.String(), `"level":"ERROR"`, "renewal and fresh logins are no outage")
}

// A request refused because the token was revoked logs in again once and
// succeeds; a request refused by policy is ErrPermission without a login.
func TestForbiddenRequestLogsInAgainOnlyForAnInvalidToken(t *testing.T) {
	srv := vaulttest.Shared(t)
	c := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	cfg := vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2", Auth: appRole(t, c, readPolicy(t, c, mount), time.Hour, time.Hour)}
	rec := &recorder{}
	s := open(t, cfg, vault.Options{WrapTransport: rec.wrap})
	put(t, s, "app/x", d("k", "v"), nil)
	require.EqualValues(t, 1, rec.logins.Load())

	require.NoError(t, c.Auth().Token().RevokeTreeWithContext(t.Context(), rec.token()))
	got, err := s.Get(t.Context(), "app/x")
	require.NoError(t, err, "a revoked token is replaced by a fresh login and the read retried")
	assert.Equal(t, "v", string(got.Data["k"]))
	assert.EqualValues(t, 2, rec.logins.Load(), "exactly one fresh login")

	_, err = s.Get(t.Context(), "not-app/x")
	require.ErrorIs(t, err, edgesecrets.ErrPermission, "the policy does not allow this path")
	assert.Contains(t, err.Error(), "permission denied: the token's policies do not allow this request (HTTP 403)")
	assert.EqualValues(t, 2, rec.logins.Load(), "a policy denial causes no login")
}

func TestAppRoleBadSecretIDIsPermissionDenied(t *testing.T) {
	srv := vaulttest.Shared(t)
	c := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	auth := appRole(t, c, readPolicy(t, c, mount), time.Hour, time.Hour)
	auth.SecretIDFile = ""
	auth.SecretID = "wrong-secret-id-value"
	_, err := vault.New(t.Context(), vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2", Auth: auth}, vault.Options{})
	require.ErrorIs(t, err, edgesecrets.ErrPermission)
	assert.Contains(t, err.Error(), "vault refused the login")
	assert.NotContains(t, err.Error(), "wrong-secret-id-value")
}

// A token file is re-read when the token in use becomes invalid, so a Vault
// Agent sink (or an operator) can replace it.
func TestTokenFileIsReReadWhenTheTokenIsRevoked(t *testing.T) {
	srv := vaulttest.Shared(t)
	c := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	policy := readPolicy(t, c, mount)
	newToken := func() string {
		tok, err := c.Auth().Token().CreateWithContext(t.Context(), &api.TokenCreateRequest{Policies: []string{policy}, TTL: "1h"})
		require.NoError(t, err)
		return tok.Auth.ClientToken
	}
	first := newToken()
	file := credentialFile(t, first)
	s := open(t, vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2", Auth: vault.Auth{Method: "token", TokenFile: file}})
	put(t, s, "app/t", d("k", "v"), nil)

	require.NoError(t, os.WriteFile(file, []byte(newToken()), 0o600))
	require.NoError(t, c.Auth().Token().RevokeTreeWithContext(t.Context(), first))
	_, err := s.Get(t.Context(), "app/t")
	require.NoError(t, err, "the replacement token from the file is used")
}

// A literal token cannot be replaced: a revoked one is ErrPermission.
func TestRevokedLiteralTokenIsPermissionDenied(t *testing.T) {
	srv := vaulttest.Shared(t)
	c := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	tok, err := c.Auth().Token().CreateWithContext(t.Context(), &api.TokenCreateRequest{Policies: []string{readPolicy(t, c, mount)}, TTL: "1h"})
	require.NoError(t, err)
	s := open(t, vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2", Auth: vault.Auth{Method: "token", Token: edgesecrets.Sensitive(tok.Auth.ClientToken)}})
	require.NoError(t, c.Auth().Token().RevokeTreeWithContext(t.Context(), tok.Auth.ClientToken))
	_, err = s.Get(t.Context(), "app/x")
	require.ErrorIs(t, err, edgesecrets.ErrPermission)
	assert.NotContains(t, err.Error(), tok.Auth.ClientToken)
}

// es256 signs claims as a compact JWS with an ECDSA P-256 key.
func es256(t *testing.T, key *ecdsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	header, err := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT"})
	require.NoError(t, err)
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(payload)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	require.NoError(t, err)
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig)
}

func publicKeyPEM(t *testing.T, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func TestJWTLogin(t *testing.T) {
	srv := vaulttest.Shared(t)
	c := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	authMount := enableAuth(t, c, "jwt")
	ctx := t.Context()
	_, err = c.Logical().WriteWithContext(ctx, "auth/"+authMount+"/config", map[string]any{
		"jwt_validation_pubkeys": []string{publicKeyPEM(t, key)},
	})
	require.NoError(t, err)
	_, err = c.Logical().WriteWithContext(ctx, "auth/"+authMount+"/role/agbot", map[string]any{
		"role_type": "jwt", "user_claim": "sub", "bound_audiences": []string{"edgesecrets"},
		"token_policies": readPolicy(t, c, mount), "token_ttl": "1h",
	})
	require.NoError(t, err)
	now := time.Now().Unix()
	jwt := es256(t, key, map[string]any{"sub": "agbot-1", "aud": "edgesecrets", "iat": now, "nbf": now - 5, "exp": now + 600})
	file := credentialFile(t, jwt)
	requireLoginWorks(t, srv, mount, vault.Auth{Method: "jwt", Mount: authMount, Role: "agbot", JWTFile: file})

	wrongAud := es256(t, key, map[string]any{"sub": "agbot-1", "aud": "other", "iat": now, "exp": now + 600})
	require.NoError(t, os.WriteFile(file, []byte(wrongAud), 0o600))
	_, err = vault.New(ctx, vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2",
		Auth: vault.Auth{Method: "jwt", Mount: authMount, Role: "agbot", JWTFile: file}}, vault.Options{})
	require.ErrorIs(t, err, edgesecrets.ErrPermission, "a JWT for another audience is refused")
	assert.NotContains(t, err.Error(), wrongAud[:20])
}

// tokenReviewer is a loopback stand-in for the Kubernetes API's TokenReview
// endpoint, which Vault's kubernetes auth calls: it authenticates exactly
// the service account tokens it issued.
type tokenReviewer struct {
	*httptest.Server
	mu     sync.Mutex
	issued map[string]string // token → "namespace:name:uid"
}

func newTokenReviewer(t *testing.T) *tokenReviewer {
	tr := &tokenReviewer{issued: map[string]string{}}
	tr.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Spec struct{ Token string } `json:"spec"`
		}
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" || json.Unmarshal(body, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		status := map[string]any{"authenticated": false}
		tr.mu.Lock()
		sa, ok := tr.issued[req.Spec.Token]
		tr.mu.Unlock()
		if ok {
			p := strings.Split(sa, ":")
			status = map[string]any{"authenticated": true, "user": map[string]any{
				"username": "system:serviceaccount:" + p[0] + ":" + p[1], "uid": p[2]}}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status})
	}))
	t.Cleanup(tr.Close)
	return tr
}

func (tr *tokenReviewer) issue(t *testing.T, namespace, name, uid string) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tok := es256(t, key, map[string]any{
		"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:" + namespace + ":" + name,
		"kubernetes.io/serviceaccount/namespace":            namespace,
		"kubernetes.io/serviceaccount/service-account.name": name,
		"kubernetes.io/serviceaccount/service-account.uid":  uid,
	})
	tr.mu.Lock()
	tr.issued[tok] = namespace + ":" + name + ":" + uid
	tr.mu.Unlock()
	return tok
}

func TestKubernetesLogin(t *testing.T) {
	srv := vaulttest.Shared(t)
	c := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	kube := newTokenReviewer(t)
	saToken := kube.issue(t, "edge", "agbot", "uid-1")
	ctx := t.Context()

	authMount := enableAuth(t, c, "kubernetes")
	_, err := c.Logical().WriteWithContext(ctx, "auth/"+authMount+"/config", map[string]any{
		"kubernetes_host":      kube.URL,
		"kubernetes_ca_cert":   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kube.Certificate().Raw})),
		"token_reviewer_jwt":   saToken,
		"disable_local_ca_jwt": true,
	})
	require.NoError(t, err)
	_, err = c.Logical().WriteWithContext(ctx, "auth/"+authMount+"/role/agbot", map[string]any{
		"bound_service_account_names": "agbot", "bound_service_account_namespaces": "edge",
		"token_policies": readPolicy(t, c, mount), "token_ttl": "1h",
	})
	require.NoError(t, err)
	file := credentialFile(t, saToken)
	requireLoginWorks(t, srv, mount, vault.Auth{Method: "kubernetes", Mount: authMount, Role: "agbot", ServiceAccountTokenFile: file})

	other := kube.issue(t, "other-ns", "agbot", "uid-2")
	require.NoError(t, os.WriteFile(file, []byte(other), 0o600))
	_, err = vault.New(ctx, vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "2",
		Auth: vault.Auth{Method: "kubernetes", Mount: authMount, Role: "agbot", ServiceAccountTokenFile: file}}, vault.Options{})
	require.ErrorIs(t, err, edgesecrets.ErrPermission, "a service account of another namespace is refused")
}
