package edgesecrets_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// node links agbot and agent in process; a real agbot uses the exchange and certificates.
type node struct {
	*agentapi.Receiver
	keys *agreement.PublicKeys
}

func (n node) Keys(context.Context, string) (*agreement.PublicKeys, error) { return n.keys, nil }
func (n node) Send(ctx context.Context, m delivery.Message) ([]byte, error) {
	got, err := n.Receive(ctx, m.Envelope) // open, replay-check, apply
	return got.Reply, err                  // sealed to the agbot
}

// must stops the example at its first error.
func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}

// An agbot embeds a delivery engine; an agent a Receiver and a Handler.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop() // stops the engine
	dir, _ := os.MkdirTemp("", "edgesecrets-example")
	defer os.RemoveAll(dir)
	agbotKeys, agentKeys := must(agreement.GenerateKeys("")), must(agreement.GenerateKeys("")) // the default suite
	// The agent: root-only files per service instance, and the /secrets API.
	tokens := &agentapi.TokenTable{}
	files := must(agentapi.Open(ctx, agentapi.Options{Root: filepath.Join(dir, "agent"), Tokens: tokens}))
	receiver := must(agentapi.NewReceiver(files, agentapi.ReceiverOptions{
		Keys: agentKeys, Agbot: agbotKeys.Public(),
		Assign: func(_ context.Context, p agreement.Proposal) (agentapi.Instances, error) {
			return agentapi.Instances{p.Services[0].Service: {ID: "web-1"}}, nil
		},
		Provision: func(context.Context, agreement.Proposal, agentapi.Instances) error {
			return tokens.Set("web-1", "token-of-web-1")
		},
	}))
	api := must(agentapi.NewHandler(files, agentapi.HandlerOptions{Authenticate: tokens.Authenticate}))
	// The agbot: the store, a state file, and the engine.
	store := memory.New()
	must(store.Put(ctx, &secretstore.Secret{Name: "myorg/db", Data: secretstore.Data{"password": []byte("s3cret")}}, secretstore.PutOptions{}))
	state, _, err := boltstate.Open(filepath.Join(dir, "agbot.db"), boltstate.Options{}) // and the file's identity records
	if err != nil {
		log.Fatal(err)
	}
	defer state.Close()
	link := node{receiver, agentKeys.Public()}
	engine := must(delivery.New(delivery.Options{Store: store, State: state, Keys: agbotKeys, Agents: link, Transport: link,
		Interval: time.Second})) // how often it polls the store; a minute by default
	go engine.Run(ctx)
	// An agreement, its binding resolved (binding.Report.Bindings does it).
	err = engine.Register(ctx, delivery.Agreement{ID: "agr-1", Node: "node-1", Services: []binding.ServiceBinding{{
		Service: agreement.ServiceRef{Org: "myorg", URL: "web", Version: "1.0.0"},
		Secrets: map[string]binding.BoundSecret{"db": {StoreNames: []string{"myorg/db"}}},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("agreement in sync:", must(engine.Wait(ctx, "agr-1")).InSync)
	info, _ := files.Instance("web-1")
	entries, _ := os.ReadDir(info.MountSource) // bind-mount it at agentapi.MountTarget
	fmt.Println("service's files:", entries[0].Name())
	// The secret rotates; the service polls the agent's API to learn it.
	must(store.Put(ctx, &secretstore.Secret{Name: "myorg/db", Data: secretstore.Data{"password": []byte("rotated")}}, secretstore.PutOptions{}))
	req := httptest.NewRequest(http.MethodGet, "/secrets", nil)
	req.SetBasicAuth("web-1", "token-of-web-1")
	rec := httptest.NewRecorder()
	for api.ServeHTTP(rec, req); rec.Code != http.StatusOK; api.ServeHTTP(rec, req) {
		rec = httptest.NewRecorder()
		time.Sleep(50 * time.Millisecond) // 404 until the update arrives
	}
	fmt.Println("updated:", rec.Body.String())
	// Output:
	// agreement in sync: true
	// service's files: db
	// updated: ["db"]
}
