package secretstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/memory" // registers the "memory" type
)

// Open a store from a JSON config. The backend's package is imported for its
// side effect of registering its type.
func ExampleOpen() {
	ctx := context.Background()
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{"type": "memory", "defaultScope": "org1"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	store, err := secretstore.Open(ctx, cfg, secretstore.OpenOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	secret := &secretstore.Secret{
		Name:   "db/password",
		Data:   edgesecrets.Data{"username": []byte("app"), "password": []byte("s3cr3t")},
		Labels: map[string]string{"owner": "ops"},
	}
	changed, _ := store.Put(ctx, secret, secretstore.PutOptions{})
	fmt.Println("first put changed:", changed)
	changed, _ = store.Put(ctx, secret, secretstore.PutOptions{})
	fmt.Println("same put changed:", changed)

	got, _ := store.Get(ctx, "db/password")
	fmt.Println(got.Name, got.Data, "password length:", len(got.Data["password"]))

	_, err = store.Get(ctx, "db/missing")
	fmt.Println(errors.Is(err, edgesecrets.ErrNotFound), err)
	// Output:
	// first put changed: true
	// same put changed: false
	// db/password map[password:[redacted] username:[redacted]] password length: 6
	// true secretstore: get "db/missing": not found
}

// A config with several mistakes is reported in one error.
func ExampleParseConfig() {
	_, err := secretstore.ParseConfig(strings.NewReader(`{
		"type": "memory",
		"defaultScope": "../org1",
		"memory": {"path": "/tmp/secrets"}
	}`))
	fmt.Println(errors.Is(err, edgesecrets.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// secretstore: invalid config: 2 problems:
	//   - defaultScope: scope "../org1": name has a ".." path segment
	//   - memory: unknown field "path"
}

// Secrets print their names, key names, labels and version, never values:
// with fmt, slog and encoding/json alike.
func ExampleSecret() {
	s := secretstore.Secret{
		Name:      "db/password",
		Data:      edgesecrets.Data{"password": []byte("s3cr3t")},
		Labels:    map[string]string{"owner": "ops"},
		Version:   "3",
		UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	fmt.Println(s)
	fmt.Printf("%#v\n", s.Data)
	fmt.Println(fmt.Errorf("cannot use %v", s))

	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the output stable
			}
			return a
		},
	}))
	log.Info("fetched", "secret", s)
	// Output:
	// {Name:db/password Data:map[password:[redacted]] Labels:map[owner:ops] Version:3 UpdatedAt:2026-01-02T03:04:05Z}
	// edgesecrets.Data{"password":[redacted]}
	// cannot use {Name:db/password Data:map[password:[redacted]] Labels:map[owner:ops] Version:3 UpdatedAt:2026-01-02T03:04:05Z}
	// {"level":"INFO","msg":"fetched","secret":{"name":"db/password","data":{"password":"[redacted]"},"labels":{"owner":"ops"},"version":"3"}}
}

// A Store counts its calls and notes when the backend last answered, for
// a health endpoint; a mock.Store here makes the backend fail on demand.
func ExampleStore_LastSuccess() {
	ctx := context.Background()
	backend := mock.NewStore(nil)
	store := backend.Store

	_, _ = store.Get(ctx, "db/password") // not found: the backend answered
	answered := store.LastSuccess()
	backend.SetFaults(mock.Faults{Fail: edgesecrets.ErrUnavailable})
	_, _ = store.Get(ctx, "db/password") // unavailable: no interaction

	fmt.Println("lastVaultInteraction set:", !answered.IsZero(), "unchanged:", store.LastSuccess().Equal(answered))
	fmt.Printf("%+v\n", store.Stats()["get"])
	// Output:
	// lastVaultInteraction set: true unchanged: true
	// {Calls:2 Errors:2}
}
