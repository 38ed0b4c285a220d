package delivery_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"slices"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// exampleAgent is a node agent reduced to what the example needs: it
// opens each proposal, notes the secrets it carries and accepts it. A real
// agent applies it with package agentapi.
type exampleAgent struct {
	keys     *agreement.PrivateKeys
	agbot    *agreement.PublicKeys
	guard    agreement.ReplayGuard
	received []string
}

// Keys implements delivery.Agents: a real agbot takes them from the
// agent's verified identity certificate.
func (a *exampleAgent) Keys(context.Context, string) (*agreement.PublicKeys, error) {
	return a.keys.Public(), nil
}

// Send implements delivery.Transport over a direct, synchronous link.
func (a *exampleAgent) Send(ctx context.Context, m delivery.Message) ([]byte, error) {
	h, p, err := agreement.Open[agreement.Proposal](ctx, a.keys, a.agbot, m.Envelope, a.guard, agreement.Options{})
	if err != nil {
		return nil, err
	}
	for _, ss := range p.Services {
		a.received = append(a.received, slices.Sorted(maps.Keys(ss.Secrets))...)
	}
	return agreement.Seal(a.keys, a.agbot, agreement.NewReply(h, true, ""), agreement.Header{Sequence: h.Sequence}, agreement.Options{})
}

// An agbot runs one engine and registers each agreement with its bindings
// resolved to store names; the engine proposes it and keeps it current.
// Here the node has no node-level secret, so the organisation's is
// delivered.
func Example() {
	ctx := context.Background()
	store := memory.New()
	if _, err := store.Put(ctx, &secretstore.Secret{Name: "org/db", Data: edgesecrets.Data{"password": []byte("s3cret")}}, secretstore.PutOptions{}); err != nil {
		log.Fatal(err)
	}
	agbotKeys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	if err != nil {
		log.Fatal(err)
	}
	agentKeys, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	if err != nil {
		log.Fatal(err)
	}
	agent := &exampleAgent{keys: agentKeys, agbot: agbotKeys.Public(), guard: agreement.NewMemoryReplayGuard()}

	engine, err := delivery.New(delivery.Options{
		Store:     store,
		State:     state.NewMemory(), // an agbot keeps it in a file
		Keys:      agbotKeys,
		Agents:    agent,
		Transport: agent,
		OnCancel: func(_ context.Context, id string, c state.Cancellation) {
			log.Printf("agreement %s cancelled: %s", id, c.Reason)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- engine.Run(runCtx) }()

	err = engine.Register(ctx, delivery.Agreement{
		ID:   "agreement-1",
		Node: "node-1",
		Services: []binding.ServiceBinding{{
			Service: agreement.ServiceRef{Org: "myorg", URL: "my.service", Version: "1.0.0"},
			Secrets: map[string]binding.BoundSecret{
				"db_password": {StoreNames: []string{"node/node-1/db", "org/db"}},
			},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := engine.Wait(ctx, "agreement-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("in sync:", st.InSync)
	fmt.Println("delivering:", st.Slots[0].Name, "from", st.Slots[0].Acked.StoreName)
	fmt.Println("the agent received:", agent.received)

	stop()
	<-done
	// Output:
	// in sync: true
	// delivering: db_password from org/db
	// the agent received: [db_password]
}
