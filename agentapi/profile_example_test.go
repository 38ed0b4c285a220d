package agentapi_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// An Open Horizon service, such as open-horizon/examples' helloSecretWorld,
// calls the agent's /api/v1/secrets with its ESS credentials and reads the
// secret's "value". Open Horizon's agent gives every instance of a service
// the same ESS id and tells them apart by their tokens; an Authenticate
// function does the same here.
func ExampleHandlerOptions_openHorizon() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "agentapi-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := agentapi.Open(ctx, agentapi.Options{Root: filepath.Join(dir, "secrets")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	hello := agreement.ServiceRef{Org: "myorg", URL: "hello-secret", Version: "1.0.0"}
	proposal := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{
		Service: hello,
		Secrets: map[string]agreement.SecretDetails{"hw_who": {Data: edgesecrets.Data{"key": []byte("name"), "value": []byte("World")}}},
	}}}
	if _, err := store.ApplyProposal(ctx, proposal, agentapi.Instances{hello: {ID: "hello-1"}}); err != nil {
		log.Fatal(err)
	}

	// The ESS credentials the agent mounted at $HZN_ESS_AUTH:
	// {"id": "myorg/hello-secret", "token": "t0ken"}.
	ess := func(_ context.Context, id, token string) (string, bool) {
		if id == "myorg/hello-secret" && token == "t0ken" { // a real agent compares in constant time
			return "hello-1", true
		}
		return "", false
	}
	handler, err := agentapi.NewHandler(store, agentapi.HandlerOptions{OpenHorizon: true, Authenticate: ess})
	if err != nil {
		log.Fatal(err)
	}
	server := httptest.NewServer(handler)
	defer server.Close()
	call := func(method, path, token string) {
		req, _ := http.NewRequest(method, server.URL+path, nil)
		req.SetBasicAuth("myorg/hello-secret", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s %s: %d\n%s\n", method, path, resp.StatusCode, body)
	}
	call("GET", "/api/v1/secrets/hw_who", "t0ken")
	call("GET", "/api/v1/secrets", "t0ken")
	call("GET", "/api/v1/secrets/hw_who", "wrong")
	// Output:
	// GET /api/v1/secrets/hw_who: 200
	// {
	//   "key": "name",
	//   "value": "World"
	// }
	// GET /api/v1/secrets: 404
	//
	// GET /api/v1/secrets/hw_who: 403
	// Unauthorized
}
