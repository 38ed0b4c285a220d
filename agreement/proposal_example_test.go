package agreement_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// The agbot reads the secrets bound to an agreement's services into its
// proposal. The bindings it gets back carry the tag of each secret's
// content, for Tracker.Register; a secret deleted meanwhile is an error
// naming it.
func ExampleReadProposal() {
	ctx := context.Background()
	store := memory.New()
	_, err := store.Put(ctx, &secretstore.Secret{Name: "myorg/db", Data: secretstore.Data{"password": []byte("s3cr3t")}}, secretstore.PutOptions{})
	if err != nil {
		panic(err)
	}
	// The agbot's coalescing reader: agreements over the same secrets
	// share reads.
	reader := secretstore.NewReader(store, secretstore.ReaderOptions{TTL: time.Minute})

	// Bindings as binding.Report.ServiceBindings returns them.
	web := agreement.ServiceRef{Org: "myorg", URL: "web", Version: "1.0.0", Arch: "amd64"}
	bindings := []agreement.ServiceBinding{{Service: web, Secrets: map[string]agreement.BoundSecret{
		"db": {VaultSecret: "myorg/db"},
	}}}
	proposal, sent, err := agreement.ReadProposal(ctx, reader, "agreement-1", bindings)
	if err != nil {
		panic(err)
	}
	fmt.Println(proposal.AgreementID, proposal.Services[0].Service, proposal.Services[0].SecretNames())
	fmt.Printf("%v\n", proposal.Services[0].Secrets["db"].Data) // values never print
	fmt.Println("tag for the tracker:", !sent[0].Secrets["db"].Sent.IsZero())

	bindings[0].Secrets["api"] = agreement.BoundSecret{VaultSecret: "myorg/api"}
	_, _, err = agreement.ReadProposal(ctx, reader, "agreement-2", bindings)
	var missing *secretstore.Error
	if errors.As(err, &missing) && errors.Is(err, secretstore.ErrNotFound) {
		fmt.Println("wait for", missing.Name)
	}
	// Output:
	// agreement-1 myorg/web@1.0.0[amd64] [db]
	// map[password:[redacted]]
	// tag for the tracker: true
	// wait for myorg/api
}
