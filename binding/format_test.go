package binding_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// With the store's checker, a binding whose vault secret cannot be
// rendered in the declared format is reported (secret_format_mismatch, a
// warning at every point: the agreement is made and held back until the
// secret is rewritten); a secret written the Open Horizon way (a key and a
// value) fits every format.
func TestValidateChecksFormatsAgainstTheSecrets(t *testing.T) {
	ctx := context.Background()
	svc, err := binding.DecodeServiceDefinition(strings.NewReader(`{
		"org": "myorg", "url": "com.example.web", "version": "1.0.0", "arch": "amd64",
		"deployment": {"services": {"web": {"image": "example/web:1", "secrets": {
			"oh_raw": {"format": "raw"}, "oh_value": {"format": "value_only"}, "oh_json": {},
			"multi_raw": {"format": "raw"}, "no_value": {"format": "value_only"}, "one_raw": {"format": "raw"}}}}}}`))
	require.NoError(t, err)
	policy, err := binding.DecodeDeploymentPolicy(strings.NewReader(`{
		"service": {"name": "com.example.web", "org": "myorg", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
		"secretBinding": [{"serviceOrgid": "myorg", "serviceUrl": "com.example.web", "secrets": [
			{"oh_raw": "hzn"}, {"oh_value": "hzn"}, {"oh_json": "hzn"},
			{"multi_raw": "multi"}, {"no_value": "one"}, {"one_raw": "one"}]}]}`))
	require.NoError(t, err)
	store := memory.New()
	for name, data := range map[string]edgesecrets.Data{
		"myorg/hzn":   {"key": []byte("api"), "value": []byte("s3cr3t-1")},
		"myorg/multi": {"user": []byte("s3cr3t-2"), "password": []byte("s3cr3t-3")},
		"myorg/one":   {"password": []byte("s3cr3t-4")},
	} {
		_, err := store.Put(ctx, &secretstore.Secret{Name: name, Data: data}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	catalog, err := binding.NewCatalog(svc)
	require.NoError(t, err)
	checker, err := binding.NewStoreChecker(store, "myorg")
	require.NoError(t, err)

	for _, point := range []binding.Point{binding.PointDeployCheck, binding.PointPublish, binding.PointAgreement} {
		rep, err := binding.Validate(ctx, policy, binding.Options{Resolver: catalog, Checker: checker, Point: point, CheckFormats: true})
		require.NoError(t, err)
		assert.NoError(t, rep.Err(), "a mismatch does not refuse the deployment")
		var got []string
		for _, p := range rep.Problems {
			require.Equal(t, binding.CodeSecretFormatMismatch, p.Code, "%s", p)
			assert.Equal(t, "warning", p.Severity)
			assert.NotContains(t, p.Message, "s3cr3t")
			got = append(got, p.ServiceSecret+": "+p.Message)
		}
		require.Len(t, got, 2, "%q", got)
		assert.Contains(t, got[0]+got[1], `secret "multi_raw"`)
		assert.Contains(t, got[0]+got[1], `format "raw" needs exactly one key, or Open Horizon's "key" and "value"; has 2 keys`)
		assert.Contains(t, got[0]+got[1], `secret "no_value"`)
		assert.Contains(t, got[0]+got[1], `format "value_only" needs a "value" key`)
	}

	// Without CheckFormats, or with a checker that cannot see keys (the
	// agbot API's), formats are not checked.
	for _, opts := range []binding.Options{
		{Resolver: catalog, Checker: checker},
		{Resolver: catalog, Checker: existenceOnly{checker}, CheckFormats: true},
	} {
		rep, err := binding.Validate(ctx, policy, opts)
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)
	}
}

// existenceOnly hides the KeyChecker of a checker.
type existenceOnly struct{ c binding.ExistenceChecker }

func (e existenceOnly) SecretExists(ctx context.Context, name binding.VaultSecretName) (bool, error) {
	return e.c.SecretExists(ctx, name)
}
