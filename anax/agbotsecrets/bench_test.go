package agbotsecrets_test

import (
	"encoding/json"
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/open-horizon/anax/agreementbot/secrets"
	anaxvault "github.com/open-horizon/anax/agreementbot/secrets/vault"
	"github.com/open-horizon/anax/config"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/anax/agbotsecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/ohtest"
)

// The identities of the plugins benchmark, in the hub's exchange.
const (
	benchOrg        = "orgbench"
	benchAgbotID    = agbotOrg + "/agbot-bench"
	benchAgbotToken = "agbot-bench-tok"
	benchAdmin      = benchOrg + "/admin1"
	benchAdminPW    = "admin1pw"
	benchUser       = benchOrg + "/user1"
	benchUserPW     = "user1pw"
	// benchSecret is the org secret the reads and the poll ask for.
	benchSecret = "bench"
)

// benchPlugin is one of the plugins compared.
type benchPlugin struct {
	name string
	p    secrets.AgbotSecrets
}

// BenchmarkPlugins runs anax's Vault plugin (agreementbot/secrets/vault)
// and ours, each as anax configures it (Initialize, Login), against one
// Vault with vault-exchange-auth, one operation at a time, the two plugins
// side by side (BenchmarkPlugins/<op>/<plugin>) so that their ratio is
// read within one run:
//
//   - GetSecretDetails with the agbot's credentials: an agreement
//     worker's read;
//   - GetSecretMetadata: the secret updater's poll;
//   - ListOrgSecret as a user: a user's request through the secure API,
//     one login per request in both plugins;
//   - CreateOrgSecret as the org's admin, each plugin writing a secret of
//     its own.
//
// With -plugins.vaultcalls each sub-benchmark also reports Vault's
// requests per operation (vault-calls/op) and logs them by path.
func BenchmarkPlugins(b *testing.B) {
	hub := ohtest.Start(b, ohtest.Options{})
	hub.AddAgbot(agbotOrg, "agbot-bench", benchAgbotToken)
	hub.AddUser(benchOrg, "admin1", benchAdminPW, true)
	hub.AddUser(benchOrg, "user1", benchUserPW, false)
	_, err := hub.VaultClient(b).KVv2(ohtest.KVMount).Put(b.Context(), benchOrg+"/"+benchSecret, map[string]any{"key": "k", "value": "v"})
	require.NoError(b, err)

	hc := &config.HorizonConfig{}
	hc.AgreementBot.ExchangeId = benchAgbotID
	hc.AgreementBot.ExchangeToken = benchAgbotToken
	hc.AgreementBot.ExchangeURL = hub.ExchangeURL
	hc.AgreementBot.Vault.VaultURL = hub.VaultAddr
	hc.AgreementBot.SecretsProviderConfig = benchConfigFile(b, hub.VaultAddr)

	ref := new(anaxvault.AgbotVaultSecrets)
	require.NoError(b, ref.Initialize(hc))
	require.NoError(b, ref.Login())
	b.Cleanup(ref.Close)
	ours := new(agbotsecrets.Plugin)
	require.NoError(b, ours.Initialize(hc))
	require.NoError(b, ours.Login())
	b.Cleanup(ours.Close)
	plugins := []benchPlugin{{"anax", ref}, {"edgesecrets", ours}}
	audit := benchAudit(b, hub)

	writes := 0
	ops := []struct {
		name string
		run  func(bp benchPlugin) error
	}{
		{"GetSecretDetails", func(bp benchPlugin) error {
			_, err := bp.p.GetSecretDetails(benchAgbotID, benchAgbotToken, benchOrg, "", "", benchSecret)
			return err
		}},
		{"GetSecretMetadata", func(bp benchPlugin) error {
			_, err := bp.p.GetSecretMetadata(benchOrg, "", "", benchSecret)
			return err
		}},
		{"ListOrgSecret", func(bp benchPlugin) error {
			return bp.p.ListOrgSecret(benchUser, benchUserPW, benchOrg, benchSecret)
		}},
		{"CreateOrgSecret", func(bp benchPlugin) error {
			// A new value each call: ours skips a write of the value
			// already stored, anax's does not.
			writes++
			return bp.p.CreateOrgSecret(benchAdmin, benchAdminPW, benchOrg, "written-by-"+bp.name, secrets.SecretDetails{Key: "k", Value: strconv.Itoa(writes)})
		}},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			for _, bp := range plugins {
				b.Run(bp.name, func(b *testing.B) {
					b.ReportAllocs()
					mark := audit.mark()
					for b.Loop() {
						if err := op.run(bp); err != nil {
							b.Fatalf("%s %s: %v", bp.name, op.name, err)
						}
					}
					audit.report(b, mark)
				})
			}
		})
	}
}

// benchVaultCalls turns on the count of Vault's requests per operation.
// It costs Vault an audit log, so the times it reports are not those of
// the comparison.
var benchVaultCalls = flag.Bool("plugins.vaultcalls", false, "BenchmarkPlugins: count Vault's requests per operation with a file audit device (slows Vault)")

// benchAuditLog is Vault's file audit log, when benchVaultCalls is set.
type benchAuditLog struct{ path string }

// benchAudit enables a file audit device on the hub's Vault when
// benchVaultCalls is set; otherwise it returns nil, whose methods do
// nothing.
func benchAudit(b *testing.B, hub *ohtest.Hub) *benchAuditLog {
	b.Helper()
	if !*benchVaultCalls {
		return nil
	}
	a := &benchAuditLog{path: filepath.Join(b.TempDir(), "audit.log")}
	require.NoError(b, hub.VaultClient(b).Sys().EnableAuditWithOptionsWithContext(b.Context(), "bench", &api.EnableAuditOptions{
		Type: "file", Options: map[string]string{"file_path": a.path},
	}))
	return a
}

// mark returns the log's size now.
func (a *benchAuditLog) mark() int64 {
	if a == nil {
		return 0
	}
	fi, err := os.Stat(a.path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// report reports the requests Vault logged since mark per iteration, as
// vault-calls/op, and logs them by operation and path (paths only: the
// audit log hashes tokens and values) with the time Vault took on them,
// from a request's entry to its response's. A login's time holds the
// requests vault-exchange-auth makes to Vault during it, which are
// counted as well.
func (a *benchAuditLog) report(b *testing.B, mark int64) {
	b.Helper()
	if a == nil {
		return
	}
	f, err := os.Open(a.path)
	require.NoError(b, err)
	defer func() { _ = f.Close() }()
	_, err = f.Seek(mark, io.SeekStart)
	require.NoError(b, err)
	type pathStat struct {
		n    int
		took time.Duration
	}
	byPath := map[string]*pathStat{}
	started := map[string]time.Time{}
	total := 0
	dec := json.NewDecoder(f)
	for {
		var e struct {
			Time    time.Time `json:"time"`
			Type    string    `json:"type"`
			Request struct {
				ID        string `json:"id"`
				Operation string `json:"operation"`
				Path      string `json:"path"`
			} `json:"request"`
		}
		if err := dec.Decode(&e); err != nil {
			break
		}
		// vault-exchange-auth deletes a policy by a path holding the
		// policy's text: the path's first word names it well enough.
		path, _, _ := strings.Cut(e.Request.Path, " ")
		key := e.Request.Operation + " " + path
		ps := byPath[key]
		if ps == nil {
			ps = &pathStat{}
			byPath[key] = ps
		}
		switch e.Type {
		case "request":
			total++
			ps.n++
			started[e.Request.ID] = e.Time
		case "response":
			if t, ok := started[e.Request.ID]; ok {
				ps.took += e.Time.Sub(t)
			}
		}
	}
	b.ReportMetric(float64(total)/float64(b.N), "vault-calls/op")
	for _, k := range slices.Sorted(maps.Keys(byPath)) {
		ps := byPath[k]
		if ps.n == 0 {
			continue
		}
		b.Logf("%s: %.2f/op, %v in Vault/op", k, float64(ps.n)/float64(b.N), (ps.took / time.Duration(b.N)).Round(time.Microsecond))
	}
}

// benchConfigFile writes our plugin's config file for the hub's Vault: the
// agbot logs in through auth/openhorizon with its exchange credentials.
func benchConfigFile(b *testing.B, vaultAddr string) string {
	b.Helper()
	dir := b.TempDir()
	file := filepath.Join(dir, "edgesecrets.json")
	cfg := `{"store": {"type": "vault", "vault": {"address": "` + vaultAddr + `", "mount": "` + ohtest.KVMount +
		`", "kvVersion": "2", "auth": {"method": "openhorizon"}}}, "changeFile": "` + filepath.Join(dir, "changes.json") + `"}`
	require.NoError(b, os.WriteFile(file, []byte(cfg), 0o600))
	return file
}
