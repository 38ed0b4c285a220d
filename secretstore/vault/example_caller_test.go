package vault_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// An Open Horizon agbot logs in through auth/openhorizon with its exchange
// identity (its token read from a file), on the KV v2 mount "openhorizon",
// each org's secrets under the org's name. A user's write runs as that
// user: AsCaller logs the user in and Vault's policy for the user decides.
func Example_openHorizon() {
	cfg, err := secretstore.ParseConfig(strings.NewReader(`{
		"type": "vault", "defaultScope": "myorg",
		"vault": {"address": "https://vault.example.com:8200", "mount": "openhorizon",
		          "auth": {"method": "openhorizon", "exchangeID": "myorg/agbot1",
		                   "exchangeTokenFile": "/etc/horizon/agbot-token"}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	agbot, err := secretstore.Open(ctx, cfg, secretstore.OpenOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer agbot.Close()

	user, err := vault.AsCaller(ctx, agbot, vault.Caller{ID: "myorg/alice", Token: "alice's password"})
	var le *vault.LoginError
	switch {
	case errors.As(err, &le):
		fmt.Println("login refused, HTTP", le.StatusCode) // also errors.Is(err, edgesecrets.ErrPermission)
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	defer user.Close() // revokes alice's token
	_, err = user.Put(ctx, &secretstore.Secret{Name: "user/alice/api-key", Data: edgesecrets.Data{"key": []byte("k"), "value": []byte("v")}}, secretstore.PutOptions{})
	fmt.Println(errors.Is(err, edgesecrets.ErrPermission))
}
