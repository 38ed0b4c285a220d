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

// node is the agent's side of the link: a real agbot reaches it through
// the exchange and takes its keys from its verified identity certificate.
type node struct {
	keys     *agreement.PrivateKeys
	receiver *agentapi.Receiver
}

func (n node) Keys(context.Context, string) (*agreement.PublicKeys, error) {
	return n.keys.Public(), nil
}

func (n node) Send(ctx context.Context, m delivery.Message) ([]byte, error) {
	got, err := n.receiver.Receive(ctx, m.Envelope) // open, replay-check, apply
	return got.Reply, err                           // sealed to the agbot
}

// An agbot embeds one delivery engine; an agent embeds a Receiver, which
// applies what the engine sealed to it, and a Handler, which serves the
// service its secrets. The README's "Embed an agbot and an agent" shows
// this example.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "edgesecrets-example")
	defer os.RemoveAll(dir)
	agbotKeys, _ := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	agentKeys, _ := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)

	// The agent: root-only files per service instance, and the /secrets API.
	tokens := &agentapi.TokenTable{}
	files, err := agentapi.Open(ctx, agentapi.Options{Root: filepath.Join(dir, "agent"), Tokens: tokens})
	if err != nil {
		log.Fatal(err)
	}
	receiver, err := agentapi.NewReceiver(files, agentapi.ReceiverOptions{
		Keys: agentKeys, Agbot: agbotKeys.Public(),
		Assign: func(_ context.Context, p agreement.Proposal) (agentapi.Instances, error) {
			return agentapi.Instances{p.Services[0].Service: {ID: "web-1"}}, nil
		},
		Provision: func(context.Context, agreement.Proposal, agentapi.Instances) error {
			return tokens.Set("web-1", "token-of-web-1") // and start the container with it
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	api, err := agentapi.NewHandler(files, agentapi.HandlerOptions{Tokens: tokens})
	if err != nil {
		log.Fatal(err)
	}

	// The agbot: the store, a state file, and the engine.
	store := memory.New()
	_, err = store.Put(ctx, &secretstore.Secret{Name: "myorg/db", Data: secretstore.Data{"password": []byte("s3cret")}}, secretstore.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	state, err := boltstate.Open(filepath.Join(dir, "agbot.db"), boltstate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer state.Close()
	link := node{keys: agentKeys, receiver: receiver}
	engine, err := delivery.New(delivery.Options{Store: store, State: state, Keys: agbotKeys, Agents: link, Transport: link,
		Interval: time.Second}) // how often it polls the store; a minute by default
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go engine.Run(runCtx)

	// An agreement, its binding resolved (binding.Report.Bindings does it).
	err = engine.Register(ctx, delivery.Agreement{ID: "agr-1", Node: "node-1", Services: []binding.ServiceBinding{{
		Service: agreement.ServiceRef{Org: "myorg", URL: "web", Version: "1.0.0"},
		Secrets: map[string]binding.BoundSecret{"db": {StoreNames: []string{"myorg/db"}}},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	if st, err := engine.Wait(ctx, "agr-1"); err == nil {
		fmt.Println("agreement in sync:", st.InSync)
	}
	mount, _ := files.MountSource("web-1") // bind-mount it at agentapi.MountTarget
	entries, _ := os.ReadDir(mount)
	fmt.Println("service's files:", entries[0].Name())

	// The secret rotates; the service polls the agent's API to learn it.
	_, err = store.Put(ctx, &secretstore.Secret{Name: "myorg/db", Data: secretstore.Data{"password": []byte("rotated")}}, secretstore.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for {
		req := httptest.NewRequest(http.MethodGet, "/secrets", nil)
		req.SetBasicAuth("web-1", "token-of-web-1")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			fmt.Println("updated:", rec.Body.String())
			break
		}
		time.Sleep(50 * time.Millisecond) // 404 until the update arrives
	}
	// Output:
	// agreement in sync: true
	// service's files: db
	// updated: ["db"]
}
