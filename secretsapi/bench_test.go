package secretsapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// BenchmarkExistence compares one existence check made directly on the
// store (binding.NewStoreChecker), through the handler in process on each
// route (authentication and the policy included), and through the client
// over loopback HTTP on each route.
func BenchmarkExistence(b *testing.B) {
	ctx := context.Background()
	store := memory.New()
	if _, err := store.Put(ctx, &secretstore.Secret{Name: "myorg/db/password", Data: ohData("k", "v")}, secretstore.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	name, _ := binding.ParseVaultSecretName("db/password")
	h, err := secretsapi.NewHandler(secretsapi.Options{Store: store, Authenticate: authenticate})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("StoreChecker", func(b *testing.B) {
		c, _ := binding.NewStoreChecker(store, "myorg")
		for b.Loop() {
			if ok, err := c.SecretExists(ctx, name); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	for _, route := range []struct{ name, method, path string }{
		{"HandlerDesignRoute", http.MethodGet, "/secrets/db/password"},
		{"HandlerOpenHorizonRoute", secretsapi.MethodList, "/org/myorg/secrets/db/password"},
	} {
		b.Run(route.name, func(b *testing.B) {
			req := httptest.NewRequest(route.method, route.path, nil)
			req.SetBasicAuth("myorg/alice", "alice-pw")
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code)
				}
			}
		})
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, route := range []struct{ name, org string }{{"ClientDesignRoute", ""}, {"ClientOpenHorizonRoute", "myorg"}} {
		b.Run(route.name, func(b *testing.B) {
			c, _ := secretsapi.NewClient(srv.URL, secretsapi.ClientOptions{Org: route.org, HTTPClient: srv.Client(),
				Authorize: func(r *http.Request) { r.SetBasicAuth("myorg/alice", "alice-pw") }})
			for b.Loop() {
				if ok, err := c.SecretExists(ctx, name); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
