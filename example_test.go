package edgesecrets_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/agent"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// must stops the example at its first error.
func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}

// A service definition and a deployment policy binding its secret "db", as the exchange has them.
const service, policy = `{"org": "myorg", "url": "web", "version": "1.0.0", "arch": "amd64",
	"deployment": {"services": {"web": {"image": "example/web:1", "secrets": {"db": {}}}}}}`,
	`{"service": {"name": "web", "org": "myorg", "arch": "amd64", "serviceVersions": [{"version": "1.0.0"}]},
	"secretBinding": [{"serviceOrgid": "myorg", "serviceUrl": "web", "secrets": [{"db": "db"}]}]}`

// An agbot and an agent, each one front door, over HTTP.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop() // stops both
	dir, _ := os.MkdirTemp("", "edgesecrets-example")
	defer os.RemoveAll(dir)
	// The hub: the store, a state with the identity records (durable, shared: boltstate, pgstate), keys.
	store := memory.New()
	must(store.Put(ctx, &secretstore.Secret{Name: "myorg/db", Data: edgesecrets.Data{"password": []byte("s3cret")}}, secretstore.PutOptions{}))
	st, identities, agbotKeys := state.NewMemory(), identity.NewMemoryCertStore(), must(agreement.GenerateKeys(agreement.DefaultSuite))
	deployment := agbot.Deployment{Target: must(binding.DecodeDeploymentPolicy(strings.NewReader(policy))),
		Resolver: must(binding.NewCatalog(must(binding.DecodeServiceDefinition(strings.NewReader(service)))))}
	hub := must(agbot.New(agbot.Options{
		Delivery:   delivery.Options{Store: store, State: st, Keys: agbotKeys, Interval: time.Second},
		Identities: identities, CA: must(identity.NewCA(identity.CAOptions{})),
		Attest: func(context.Context, identity.AttestationRequest) (time.Time, error) {
			return time.Now(), nil // ask the node's provider whether it made this document
		},
		Authenticate: func(context.Context, secretsapi.Credentials) (secretsapi.Caller, error) {
			return secretsapi.Caller{}, fmt.Errorf("ask the exchange who the caller is")
		},
		Deploy: func(context.Context, relay.Node) (agbot.Deployment, bool) { return deployment, true },
	}))
	hubServer := httptest.NewServer(hub.Handler()) // the agbot's server, as its own handler
	defer hubServer.Close()
	go func() { _ = hub.Run(ctx) }()
	// The node: its keys, the agbot's pinned, root-only files, the services' API.
	instances := make(chan agent.Instance, 1)
	node := must(agent.New(ctx, agent.Options{
		Instance: identity.Identity{Provider: "cloud", Org: "myorg", Node: "node-1", InstanceID: "i-1"},
		Keys:     must(agreement.GenerateKeys(agreement.DefaultSuite)), Agbot: agbotKeys.Public(), Agbots: []string{hubServer.URL},
		Attest: func(context.Context) (identity.Attestation, error) { return "the provider's document", nil },
		Files:  agentapi.Options{Root: filepath.Join(dir, "agent")},
		OnInstance: func(_ context.Context, inst agent.Instance) error {
			instances <- inst // start the container: inst.Mount at agentapi.MountTarget, inst.Token
			return nil
		},
	}))
	defer node.Close()
	go func() { _ = node.Run(ctx) }()
	web := <-instances
	fmt.Println("service's files:", must(os.ReadDir(web.Mount))[0].Name())
	// The secret rotates; the service polls the agent's API to learn it.
	must(store.Put(ctx, &secretstore.Secret{Name: "myorg/db", Data: edgesecrets.Data{"password": []byte("rotated")}}, secretstore.PutOptions{}))
	req := httptest.NewRequest(http.MethodGet, "/secrets", nil)
	req.SetBasicAuth(web.ID, string(web.Token))
	rec := httptest.NewRecorder()
	for node.Handler().ServeHTTP(rec, req); rec.Code != http.StatusOK; node.Handler().ServeHTTP(rec, req) {
		rec = httptest.NewRecorder()
		time.Sleep(50 * time.Millisecond) // 404 until the update arrives
	}
	fmt.Println("updated:", rec.Body.String())
	// Output:
	// service's files: db
	// updated: ["db"]
}
