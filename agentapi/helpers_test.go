package agentapi_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

var (
	refA = agreement.ServiceRef{Org: "acme", URL: "svc-a", Arch: "amd64", Version: "1.0.0"}
	refB = agreement.ServiceRef{Org: "acme", URL: "svc-b", Arch: "amd64", Version: "1.0.0", Container: "web"}
)

// openStore opens a store rooted in a fresh temporary directory.
func openStore(t *testing.T, opts agentapi.Options) *agentapi.Store {
	t.Helper()
	s, _ := openStoreRoot(t, opts)
	return s
}

// openStoreRoot is openStore, also returning the store's root directory.
func openStoreRoot(t *testing.T, opts agentapi.Options) (*agentapi.Store, string) {
	t.Helper()
	if opts.Root == "" {
		opts.Root = filepath.Join(t.TempDir(), "secrets")
	}
	s, err := agentapi.Open(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, opts.Root
}

// jsonSecret is a FormatJSON secret with the given key/value pairs.
func jsonSecret(kv ...string) agreement.SecretDetails {
	d := edgesecrets.Data{}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i]] = []byte(kv[i+1])
	}
	return agreement.SecretDetails{Format: agreement.FormatJSON, Data: d}
}

// rawSecret is a FormatRaw secret holding value.
func rawSecret(value []byte) agreement.SecretDetails {
	return agreement.SecretDetails{Format: agreement.FormatRaw, Data: edgesecrets.Data{"value": value}}
}

// twoServiceProposal is agreement ag-1: service A (instance "a") with
// secrets "password" and "cert", service B (instance "b") with "token".
func twoServiceProposal() (agreement.Proposal, agentapi.Instances) {
	p := agreement.Proposal{
		AgreementID: "ag-1",
		Services: []agreement.ServiceSecrets{
			{Service: refA, Secrets: map[string]agreement.SecretDetails{
				"password": jsonSecret("user", "alice", "password", "s3cr3t-A"),
				"cert":     rawSecret([]byte("-----BEGIN CERT A-----")),
			}},
			{Service: refB, Secrets: map[string]agreement.SecretDetails{
				"token": rawSecret([]byte("token-of-B")),
			}},
		},
	}
	return p, agentapi.Instances{refA: {ID: "a"}, refB: {ID: "b"}}
}

// applyTwoServices applies twoServiceProposal to s.
func applyTwoServices(t *testing.T, s *agentapi.Store) {
	t.Helper()
	p, inst := twoServiceProposal()
	_, err := s.ApplyProposal(context.Background(), p, inst)
	require.NoError(t, err)
}

// secretsUpdate builds an update of kind secrets for agreement ag-1. It
// encodes the payload itself rather than through agreement.NewSecretsUpdate,
// which refuses invalid updates: the store must reject them on its own too,
// since an update reaches it from the wire.
func secretsUpdate(t *testing.T, services ...agreement.ServiceSecrets) agreement.Update {
	t.Helper()
	payload, err := json.Marshal(agreement.SecretsUpdate{Services: services})
	require.NoError(t, err)
	return agreement.Update{AgreementID: "ag-1", Kind: agreement.UpdateKindSecrets, Payload: payload}
}

// tree lists every path under dir (relative, sorted), for "nothing was written" checks.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// mustRead reads a file or fails the test.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// mountFile is the path of one secret file of an instance.
func mountFile(t *testing.T, s *agentapi.Store, id, name string) string {
	t.Helper()
	dir := instanceInfo(t, s, id).MountSource
	return filepath.Join(dir, name)
}

func mustParseTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return tm
}

// instanceInfo returns what the store knows about a known instance.
func instanceInfo(t *testing.T, s *agentapi.Store, id string) agentapi.InstanceInfo {
	t.Helper()
	info, ok := s.Instance(id)
	require.True(t, ok, "instance %s is unknown", id)
	return info
}
