package vault_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// A config file selects the vault backend; secretstore.ParseConfig reports
// every problem in it at once.
func Example_config() {
	_, err := secretstore.ParseConfig(strings.NewReader(`{
		"type": "vault", "defaultScope": "myorg",
		"vault": {"address": "vault.example.com", "kvVersion": "3",
		          "auth": {"method": "approle", "roleID": "agbot"}}}`))
	fmt.Println(errors.Is(err, edgesecrets.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// secretstore: invalid config: 3 problems:
	//   - vault.address must be an http:// or https:// URL with a host
	//   - vault.kvVersion must be "1", "2" or "auto"
	//   - vault.auth.method approle needs exactly one of secretID, secretIDFile, secretIDEnv
}

// Opening a store logs in (here with AppRole, the secret ID read from a
// file) and detects the mount's KV version. A secret named "db/password"
// lives at secret/edge/myorg/db/password.
func Example_open() {
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{
		"type": "vault", "defaultScope": "myorg",
		"vault": {"address": "https://vault.example.com:8200", "mount": "secret",
		          "parentPath": "edge", "caFile": "/etc/edge/vault-ca.pem", "timeout": "10s",
		          "auth": {"method": "approle", "roleID": "agbot", "secretIDFile": "/run/secrets/vault-secret-id"}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	store, err := secretstore.Open(ctx, cfg, secretstore.OpenOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	s, err := store.Get(ctx, "db/password")
	if err != nil {
		fmt.Println(err) // errors.Is(err, edgesecrets.ErrNotFound), ErrPermission, ErrUnavailable
		return
	}
	fmt.Println(s.Data.Keys(), s.Version)
}
