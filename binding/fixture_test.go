package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
)

var update = flag.Bool("update", false, "rewrite the expected reports in testdata/")

// loadFixtures reads testdata/services/*.json into a catalog and
// testdata/vault.json into a store.
func loadFixtures(t testing.TB) (Resolver, *faultStore) {
	t.Helper()
	files, err := filepath.Glob("testdata/services/*.json")
	require.NoError(t, err)
	require.Len(t, files, 5)
	var defs []*ServiceDefinition
	for _, f := range files {
		r, err := os.Open(f)
		require.NoError(t, err)
		d, err := DecodeServiceDefinition(r)
		r.Close()
		require.NoError(t, err, f)
		defs = append(defs, d)
	}
	cat, err := NewCatalog(defs...)
	require.NoError(t, err)
	raw, err := os.ReadFile("testdata/vault.json")
	require.NoError(t, err)
	var paths []string
	require.NoError(t, json.Unmarshal(raw, &paths))
	return cat, newStore(t, paths...)
}

func TestFixtureReports(t *testing.T) {
	cat, store := loadFixtures(t)
	checker, err := NewStoreChecker(store.Store, testOrg)
	require.NoError(t, err)

	cases := []struct {
		doc    string
		target func(t *testing.T, f *os.File) Target
		codes  []Code
	}{
		{
			doc: "pattern",
			target: func(t *testing.T, f *os.File) Target {
				p, err := DecodePattern(f)
				require.NoError(t, err)
				return p
			},
			codes: []Code{CodeSecretsMixedDeployment},
		},
		{
			doc: "deployment-policy",
			target: func(t *testing.T, f *os.File) Target {
				p, err := DecodeDeploymentPolicy(f)
				require.NoError(t, err)
				return p
			},
			codes: []Code{
				CodeVaultSecretInvalid,     // entry 1: tls_cert given as the fully qualified store path
				CodeContainerRequired,      // entry 2: db 1.5.0 has two containers
				CodeSecretsMixedDeployment, // mqtt also has a cluster deployment
				CodeSecretUndeclared,       // entry 3: db declares no debug_password
				CodeBindingUnused,          // entry 5: no legacy-logger in the tree
				CodeVaultSecretMissing,     // entry 3: backup/token-old
				CodeVaultSecretMissing,     // entry 4: node/edge-node-7/mqtt-creds
			},
		},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", c.doc+".json"))
			require.NoError(t, err)
			defer f.Close()
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			rep, err := Validate(context.Background(), c.target(t, f), Options{Resolver: cat, Checker: checker, Logger: logger})
			require.NoError(t, err)
			assert.Zero(t, store.getCalls(), "existence is checked with Stat only")
			assert.Contains(t, logs.String(), "vaultSecret=")
			assert.NotContains(t, logs.String(), "s3cr3t", "no value is logged")
			assert.Equal(t, c.codes, codes(rep))
			assert.Equal(t, []agreement.ServiceRef{
				{Org: testOrg, URL: "com.example.gateway", Arch: "amd64", Version: "1.2.0"},
				{Org: testOrg, URL: "com.example.db", Arch: "amd64", Version: "1.5.0"},
				{Org: testOrg, URL: "com.example.mqtt", Arch: "amd64", Version: "1.0.0"},
			}, rep.Services, "the whole tree, db at the highest version in [1.0.0,2.0.0)")

			got, err := json.MarshalIndent(rep, "", "  ")
			require.NoError(t, err)
			golden := filepath.Join("testdata", c.doc+".report.json")
			if *update {
				require.NoError(t, os.WriteFile(golden, append(got, '\n'), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(got))
		})
	}
}
