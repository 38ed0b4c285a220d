package agentapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// An agent's whole message loop: the Receiver opens each envelope with the
// agent's keys and the store's replay guard, applies it and returns the
// sealed reply to send back.
func ExampleReceiver() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "agentapi-receiver")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	agentKeys, _ := agreement.GenerateKeys("")
	agbotKeys, _ := agreement.GenerateKeys("")

	tokens := &agentapi.TokenTable{} // its Authenticate is the handler's
	store, err := agentapi.Open(ctx, agentapi.Options{Root: filepath.Join(dir, "secrets"), Tokens: tokens})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	receiver, err := agentapi.NewReceiver(store, agentapi.ReceiverOptions{
		Keys: agentKeys, Agbot: agbotKeys.Public(),
		Assign: func(_ context.Context, p agreement.Proposal) (agentapi.Instances, error) {
			return agentapi.Instances{p.Services[0].Service: {ID: "web-1"}}, nil
		},
		Provision: func(_ context.Context, _ agreement.Proposal, inst agentapi.Instances) error {
			return tokens.Set("web-1", "t0ken") // and start the container
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	// What the agbot sends, in sequence order: a proposal, then its
	// cancellation.
	web := agreement.ServiceRef{Org: "acme", URL: "web", Version: "1.0.0"}
	proposal, _ := agreement.Seal(agbotKeys, agentKeys.Public(), agreement.Proposal{AgreementID: "ag-1",
		Services: []agreement.ServiceSecrets{{Service: web, Secrets: map[string]agreement.SecretDetails{
			"db": {Data: edgesecrets.Data{"password": []byte("s3cr3t")}}}}}}, agreement.Header{Sequence: 1}, agreement.Options{})
	cancel, _ := agreement.Seal(agbotKeys, agentKeys.Public(), agreement.Update{AgreementID: "ag-1", Kind: agreement.UpdateKindCancel, Payload: json.RawMessage(`{}`)}, agreement.Header{Sequence: 2}, agreement.Options{})

	for _, envelope := range [][]byte{proposal, cancel, proposal} {
		got, err := receiver.Receive(ctx, envelope)
		if errors.Is(err, agreement.ErrReplay) {
			fmt.Println("replayed proposal: refused, no reply")
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		// send(got.Reply) to the agbot
		fmt.Printf("%s %d: applied=%t written=%v removed=%v tokens=%v\n",
			got.Header.Type, got.Header.Sequence, got.Err == nil, got.Changes, got.Removed, tokens.IDs())
	}
	// Output:
	// proposal 1: applied=true written=map[web-1:[db]] removed=[] tokens=[web-1]
	// update 2: applied=true written=map[] removed=[web-1] tokens=[]
	// replayed proposal: refused, no reply
}
