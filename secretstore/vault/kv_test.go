package vault_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/binarykey"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

func TestKVVersionAutoDetection(t *testing.T) {
	srv := vaulttest.Shared(t)
	for _, v := range []int{1, 2} {
		mount := srv.EnableKV(t, v)
		cfg := rootConfig(srv, mount)
		cfg.KVVersion = "auto"
		assert.Equal(t, v, kvVersion(t, open(t, cfg), open(t, cfg)), "mount %s", mount)
	}
	cfg := rootConfig(srv, "no-such-mount")
	_, err := vault.New(t.Context(), cfg, vault.Options{})
	require.ErrorIs(t, err, edgesecrets.ErrPermission, "vault answers 403 for a missing mount")
	assert.Contains(t, err.Error(), `mount "no-such-mount": the mount does not exist or the token may not use it`)

	cfg = rootConfig(srv, "sys")
	_, err = vault.New(t.Context(), cfg, vault.Options{})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid, "a non-KV mount is refused")
}

// kvVersion tells the KV version reader detected: a secret writer puts
// has a version on KV v2 only.
func kvVersion(t *testing.T, writer, reader *secretstore.Store) int {
	t.Helper()
	put(t, writer, "kv-probe", d("k", "v"), nil)
	md, err := reader.Stat(t.Context(), "kv-probe")
	require.NoError(t, err)
	if md.Version == "" {
		return 1
	}
	return 2
}

// The secret's path is mount/parentPath/defaultScope/name, as other Vault
// tools see it.
func TestParentPathAndScopeMapping(t *testing.T) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 2)
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{"type":"vault","defaultScope":"org1","vault":{
		"address":"` + srv.Addr + `","mount":"` + mount + `","parentPath":"/edge/hub/",
		"auth":{"method":"token","token":"` + srv.RootToken + `"}}}`))
	require.NoError(t, err)
	s, err := secretstore.Open(t.Context(), cfg, secretstore.OpenOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	put(t, s, "db/password", d("v", "p4ss"), nil)
	raw, err := srv.Client(t).KVv2(mount).Get(t.Context(), "edge/hub/org1/db/password")
	require.NoError(t, err, "the secret is at parentPath/scope/name")
	assert.Equal(t, "p4ss", raw.Data["v"])

	names, err := s.List(t.Context(), "")
	require.NoError(t, err)
	assert.Equal(t, []string{"db/password"}, names, "names are relative to the scope")

	for _, bad := range []string{"../escape", "/abs", "a//b", "a/./b"} {
		_, err := s.Get(t.Context(), bad)
		assert.ErrorIs(t, err, edgesecrets.ErrInvalid, "name %q", bad)
	}
}

func TestSoftDeletedOrDestroyedLatestVersionIsNotFound(t *testing.T) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 2)
	s := open(t, rootConfig(srv, mount))
	kv := srv.Client(t).KVv2(mount)
	ctx := t.Context()

	put(t, s, "soft", d("k", "1"), map[string]string{"team": "edge"})
	put(t, s, "soft", d("k", "2"), map[string]string{"team": "edge"})
	require.NoError(t, kv.Delete(ctx, "soft"), "soft-delete the latest version")
	_, err := s.Get(ctx, "soft")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "Get")
	_, err = s.Stat(ctx, "soft")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "Stat")
	names, err := s.List(ctx, "")
	require.NoError(t, err)
	assert.NotContains(t, names, "soft", "List leaves soft-deleted secrets out")

	// CreateOnly succeeds on a soft-deleted name (cas on the deleted version).
	changed, err := s.Put(ctx, &secretstore.Secret{Name: "soft", Data: d("k", "3")}, secretstore.PutOptions{CreateOnly: true})
	require.NoError(t, err)
	assert.True(t, changed)
	got, err := s.Get(ctx, "soft")
	require.NoError(t, err)
	assert.Equal(t, "3", got.Version)

	put(t, s, "gone", d("k", "1"), nil)
	require.NoError(t, kv.Destroy(ctx, "gone", []int{1}))
	_, err = s.Get(ctx, "gone")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "destroyed latest version")
	_, err = s.Stat(ctx, "gone")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound)
}

func TestStatUsesOnlyTheMetadataEndpoint(t *testing.T) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 2)
	rec := &recorder{keep: true}
	s := open(t, rootConfig(srv, mount), vault.Options{WrapTransport: rec.wrap})
	put(t, s, "svc/api", d("token", "abc"), map[string]string{"owner": "ops"})
	before := time.Now()
	put(t, s, "svc/api", d("token", "def"), map[string]string{"owner": "ops"})

	rec.takePaths()
	md, err := s.Stat(t.Context(), "svc/api")
	require.NoError(t, err)
	assert.Equal(t, []string{"GET /v1/" + mount + "/metadata/svc/api"}, rec.takePaths(), "one metadata read, no data read")
	assert.Equal(t, "2", md.Version)
	assert.Equal(t, map[string]string{"owner": "ops"}, md.Labels)
	assert.WithinDuration(t, before, md.UpdatedAt, time.Minute, "UpdatedAt is the version's creation time")
}

func TestLabelOnlyChangeKeepsTheVersion(t *testing.T) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 2)
	rec := &recorder{}
	s := open(t, rootConfig(srv, mount), vault.Options{WrapTransport: rec.wrap})
	put(t, s, "l", d("k", "v"), map[string]string{"a": "1"})
	writes := rec.writes.Load()
	put(t, s, "l", d("k", "v"), map[string]string{"a": "2"})
	assert.Equal(t, writes+1, rec.writes.Load(), "one metadata write, no data write")
	md, err := s.Stat(t.Context(), "l")
	require.NoError(t, err)
	assert.Equal(t, "1", md.Version, "labels are metadata: the data version is unchanged")
	assert.Equal(t, map[string]string{"a": "2"}, md.Labels)

	// The metadata write replaces custom_metadata only: other settings stay.
	kv := srv.Client(t).KVv2(mount)
	seven := 7
	require.NoError(t, kv.PatchMetadata(t.Context(), "l", api.KVMetadataPatchInput{MaxVersions: &seven}))
	put(t, s, "l", d("k", "v"), map[string]string{"b": "3"})
	meta, err := kv.GetMetadata(t.Context(), "l")
	require.NoError(t, err)
	assert.Equal(t, 7, meta.MaxVersions, "max_versions survives a label change")
	assert.Equal(t, map[string]any{"b": "3"}, meta.CustomMetadata)

	_, err = s.Put(t.Context(), &secretstore.Secret{Name: "l", Data: d("k", "v"), Labels: map[string]string{"b": ""}}, secretstore.PutOptions{})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid, "an empty label value is refused before writing")
	assert.Contains(t, err.Error(), `label "b" has an empty value`)
}

func TestBinaryValuesAreReadableByOtherTools(t *testing.T) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 2)
	s := open(t, rootConfig(srv, mount))
	put(t, s, "bin", edgesecrets.Data{"key": {0xde, 0xad, 0xbe, 0xef}, "text": []byte("hello")}, nil)
	raw, err := srv.Client(t).KVv2(mount).Get(t.Context(), "bin")
	require.NoError(t, err)
	assert.Equal(t, "hello", raw.Data["text"], "text stays a plain string for vault kv get")
	assert.Equal(t, map[string]any{binarykey.Marker: "3q2+7w=="}, raw.Data["key"])

	// Values another tool wrote as JSON numbers or objects read as their JSON text.
	_, err = srv.Client(t).KVv2(mount).Put(t.Context(), "other", map[string]any{"port": 5432, "tls": true})
	require.NoError(t, err)
	got, err := s.Get(t.Context(), "other")
	require.NoError(t, err)
	assert.Equal(t, "5432", string(got.Data["port"]))
	assert.Equal(t, "true", string(got.Data["tls"]))
}

func TestKV1RejectsLabelsVersionsAndEmptySecrets(t *testing.T) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 1)
	rec := &recorder{}
	s := open(t, rootConfig(srv, mount), vault.Options{WrapTransport: rec.wrap})
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		in   *secretstore.Secret
		opts secretstore.PutOptions
		want string
	}{
		{"labels", &secretstore.Secret{Name: "a", Data: d("k", "v"), Labels: map[string]string{"l": "1"}}, secretstore.PutOptions{}, "labels need a KV v2 mount"},
		{"if version", &secretstore.Secret{Name: "exists", Data: d("k", "w")}, secretstore.PutOptions{IfVersion: "1"}, "the store keeps no versions"},
		{"no keys", &secretstore.Secret{Name: "a", Data: edgesecrets.Data{}}, secretstore.PutOptions{}, "without keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			put(t, s, "exists", d("k", "v"), nil)
			writes := rec.writes.Load()
			_, err := s.Put(ctx, tc.in, tc.opts)
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, writes, rec.writes.Load(), "rejected without a write")
		})
	}
	put(t, s, "plain", d("k", "v"), nil)
	got, err := s.Get(ctx, "plain")
	require.NoError(t, err)
	assert.Empty(t, got.Version, "KV v1 has no versions")
	assert.True(t, got.UpdatedAt.IsZero())
	raw, err := srv.Client(t).KVv1(mount).Get(ctx, "plain")
	require.NoError(t, err)
	assert.Equal(t, "v", raw.Data["k"])
}

func TestNamespaceHeaderIsSent(t *testing.T) {
	// The OSS dev server has no namespaces; a request carrying the header is
	// refused, which the recorded headers and the error both show.
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 2)
	rec := &recorder{keep: true}
	cfg := rootConfig(srv, mount)
	cfg.KVVersion = "2"
	cfg.Namespace = "team-a/"
	s, err := vault.New(t.Context(), cfg, vault.Options{WrapTransport: rec.wrap})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
		_, _ = s.Get(t.Context(), "x")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.headers)
	for _, h := range rec.headers {
		assert.Equal(t, "team-a", h.Get("X-Vault-Namespace"))
	}
}

func TestRateLimitSpacesRequests(t *testing.T) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 2)
	cfg := rootConfig(srv, mount)
	cfg.KVVersion = "2"
	cfg.RateLimit, cfg.RateBurst = 10, 1
	s := open(t, cfg)
	start := time.Now()
	for range 6 {
		_, err := s.Get(t.Context(), "missing")
		require.ErrorIs(t, err, edgesecrets.ErrNotFound)
	}
	// Six requests at 10/s with a burst of 1 need at least 0.5s; a slow
	// machine only makes it longer, so only the lower bound is checked.
	assert.GreaterOrEqual(t, time.Since(start), 450*time.Millisecond)
}

// The read-only policy from the package documentation is enough for Get,
// Stat, List and KV version detection; a write is ErrPermission.
func TestReadOnlyPolicyFromTheDocs(t *testing.T) {
	srv := vaulttest.Shared(t)
	c := srv.Client(t)
	mount := srv.EnableKV(t, 2)
	writer := open(t, func() vault.Config { cfg := rootConfig(srv, mount); cfg.ParentPath = "edge"; return cfg }())
	put(t, writer, "db/password", d("v", "p"), map[string]string{"team": "edge"})

	policy := unique("read-only")
	require.NoError(t, c.Sys().PutPolicyWithContext(t.Context(), policy, `
path "`+mount+`/data/edge/*"     { capabilities = ["read"] }
path "`+mount+`/metadata/edge/*" { capabilities = ["read", "list"] }
`))
	tok, err := c.Auth().Token().CreateWithContext(t.Context(), &api.TokenCreateRequest{Policies: []string{policy}, TTL: "1h"})
	require.NoError(t, err)
	cfg := vault.Config{Address: srv.Addr, Mount: mount, KVVersion: "auto", ParentPath: "edge",
		Auth: vault.Auth{Method: "token", Token: edgesecrets.Sensitive(tok.Auth.ClientToken)}}
	reader := open(t, cfg)
	assert.Equal(t, 2, kvVersion(t, writer, reader), "detected with the read-only token")
	_, err = reader.Get(t.Context(), "db/password")
	require.NoError(t, err)
	_, err = reader.Stat(t.Context(), "db/password")
	require.NoError(t, err)
	names, err := reader.List(t.Context(), "")
	require.NoError(t, err)
	assert.Equal(t, []string{"db/password", "kv-probe"}, names)
	_, err = reader.Put(t.Context(), &secretstore.Secret{Name: "db/password", Data: d("v", "new")}, secretstore.PutOptions{})
	require.ErrorIs(t, err, edgesecrets.ErrPermission)
}

// A program's own vault/api client: the store uses it as it is (token,
// address), detects the KV version through it, hands it back through As,
// and leaves it working after Close. Connection and login settings in the
// config would be ignored, so they are refused.
func TestCallerClient(t *testing.T) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 2)
	raw := srv.Client(t)
	ctx := t.Context()
	s, err := vault.New(ctx, vault.Config{Mount: mount, ParentPath: "edge", Scope: "org1"}, vault.Options{Client: raw})
	require.NoError(t, err)
	put(t, s, "db", d("k", "v"), map[string]string{"team": "edge"})
	sec, err := raw.KVv2(mount).Get(ctx, "edge/org1/db")
	require.NoError(t, err, "written where the config says, through the caller's client")
	assert.Equal(t, "v", sec.Data["k"])
	md, err := s.Stat(ctx, "db")
	require.NoError(t, err)
	assert.NotEmpty(t, md.Version, "KV v2 detected through the client")

	var got *api.Client
	require.True(t, s.As(&got))
	assert.Same(t, raw, got)
	var wrong *http.Client
	assert.False(t, s.As(&wrong))

	require.NoError(t, s.Close())
	_, err = raw.Sys().HealthWithContext(ctx)
	assert.NoError(t, err, "the caller's client still works after Close")

	_, err = vault.New(ctx, vault.Config{Address: srv.Addr, Mount: mount, Auth: vault.Auth{Method: "token", TokenEnv: "T"}},
		vault.Options{Client: raw})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.ErrorContains(t, err, "vault.address is set by Options.Client")
	assert.ErrorContains(t, err, "vault.auth is set by Options.Client")
}
