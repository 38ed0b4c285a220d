package vault_test

import (
	"context"
	"testing"

	"github.com/edgesecrets/edgesecrets/internal/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// harness gives each conformance case its own parentPath on a shared KV
// mount of the shared dev server, and counts the write requests its stores
// send.
type harness struct {
	t      *testing.T
	srv    *vaulttest.Server
	mount  string
	kv     string
	writes *recorder
}

func (h *harness) MakeStore(ctx context.Context) (secretstore.Store, error) {
	cfg := rootConfig(h.srv, h.mount)
	cfg.KVVersion = h.kv
	cfg.ParentPath = unique("conformance")
	return vault.New(ctx, cfg, vault.WrapTransport(h.writes.wrap), fastRetries)
}

func (h *harness) BackendWrites() int64 { return h.writes.writes.Load() }

func (h *harness) Close() {}

func runConformance(t *testing.T, kv int, opts storetest.Options) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, kv)
	storetest.Run(t, func(_ context.Context, t *testing.T) (storetest.Harness, error) {
		// kvVersion "auto" on v2 also exercises detection; v1 is explicit.
		version := vault.KVAuto
		if kv == 1 {
			version = vault.KV1
		}
		return &harness{t: t, srv: srv, mount: mount, kv: version, writes: &recorder{}}, nil
	}, opts)
}

func TestConformanceKV2(t *testing.T) {
	runConformance(t, 2, storetest.Options{})
}

func TestConformanceKV1(t *testing.T) {
	// KV v1 keeps no versions and no metadata: labels are rejected with
	// ErrInvalid (see the package documentation).
	runConformance(t, 1, storetest.Options{NoVersions: true, NoLabels: true})
}
