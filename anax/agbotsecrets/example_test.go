package agbotsecrets_test

import (
	"context"
	"fmt"

	"github.com/edgesecrets/edgesecrets/anax/agbotsecrets"
	"github.com/edgesecrets/edgesecrets/ohsecret"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// Example embeds the plugin over a memory store: the agbot reads a secret
// as its agreement workers do (with its own credentials) and asks for its
// metadata as the secret updater does. An agbot built with anax selects
// the plugin by name in its config instead (see the package
// documentation).
func Example() {
	ctx := context.Background()
	store := memory.New()
	_, _ = store.Put(ctx, &secretstore.Secret{Name: "myorg/db/password", Data: ohsecret.Details{Key: "password", Value: "s3cret"}.Data()}, secretstore.PutOptions{})

	p, err := agbotsecrets.New(agbotsecrets.Options{Store: store, AgbotID: "myorg/agbot", AgbotToken: "agbot-token"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Login(); err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	d, err := p.GetSecretDetails("myorg/agbot", "agbot-token", "myorg", "", "", "db/password")
	fmt.Println(d, err)
	first, _ := p.GetSecretMetadata("myorg", "", "", "db/password")

	_, _ = store.Put(ctx, &secretstore.Secret{Name: "myorg/db/password", Data: ohsecret.Details{Key: "password", Value: "rotated"}.Data()}, secretstore.PutOptions{})
	second, _ := p.GetSecretMetadata("myorg", "", "", "db/password")
	fmt.Println("rotation seen:", second.UpdateTime > first.UpdateTime)
	// Output:
	// Key: password, Value: ******** <nil>
	// rotation seen: true
}
