package vault_test

import (
	"testing"

	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// BenchmarkRead compares reads through the store (secretstore.Store over
// the Vault driver, with its own client, and with the raw client given in
// Options.Client) with the raw vault/api client on the same dev server and
// the same secret: Get against KVv2.Get, Stat against a metadata read.
// Report the ratio of each pair:
//
//	go test -bench . -benchmem -run '^$' ./secretstore/vault/
func BenchmarkRead(b *testing.B) {
	srv := vaulttest.Shared(b)
	mount := srv.EnableKV(b, 2)
	cfg := rootConfig(srv, mount)
	cfg.KVVersion = "2"
	s := open(b, cfg)
	put(b, s, "bench/db", d("username", "app", "password", "correct-horse-battery-staple", "host", "db.internal:5432"), map[string]string{"team": "edge"})
	raw := srv.Client(b)
	kv := raw.KVv2(mount)
	ctx := b.Context()
	overRaw, err := vault.New(ctx, vault.Config{Mount: mount, KVVersion: "2"}, vault.Options{Client: raw})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = overRaw.Close() })

	b.Run("Get/backend", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "bench/db"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get/store-over-raw-client", func(b *testing.B) {
		for b.Loop() {
			if _, err := overRaw.Get(ctx, "bench/db"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get/raw-api-KVv2", func(b *testing.B) {
		for b.Loop() {
			if _, err := kv.Get(ctx, "bench/db"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Stat/backend", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Stat(ctx, "bench/db"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Stat/store-over-raw-client", func(b *testing.B) {
		for b.Loop() {
			if _, err := overRaw.Stat(ctx, "bench/db"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Stat/raw-api-metadata-read", func(b *testing.B) {
		for b.Loop() {
			if _, err := raw.Logical().ReadWithContext(ctx, mount+"/metadata/bench/db"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Stat/raw-api-KVv2-GetMetadata", func(b *testing.B) {
		for b.Loop() {
			if _, err := kv.GetMetadata(ctx, "bench/db"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
