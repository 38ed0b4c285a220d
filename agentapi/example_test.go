package agentapi_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
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

// An agent stores the secrets of a decrypted proposal, serves the /secrets
// API to the service, applies an update, and removes the instance when the
// agreement ends.
func Example() {
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

	// The proposal's service runs on this node as instance "web-1".
	web := agreement.ServiceRef{Org: "acme", URL: "web", Version: "1.0.0"}
	proposal := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{
		Service: web,
		Secrets: map[string]agreement.SecretDetails{"db": {Data: edgesecrets.Data{"user": []byte("app"), "password": []byte("s3cr3t")}}},
	}}}
	_, err = store.ApplyProposal(ctx, proposal, agentapi.Instances{web: {ID: "web-1"}})
	fmt.Printf("proposal reply: %+v\n", agentapi.ReplyFor("ag-1", err))
	info, _ := store.Instance("web-1")
	mount := info.MountSource
	content, _ := os.ReadFile(filepath.Join(mount, "db"))
	fmt.Printf("bind-mount .../%s at %s; file db holds %s\n", filepath.Base(mount), agentapi.MountTarget, content)

	// The hub rotated the password.
	update, _ := agreement.NewSecretsUpdate("ag-1", agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{
		Service: web,
		Secrets: map[string]agreement.SecretDetails{"db": {Data: edgesecrets.Data{"user": []byte("app"), "password": []byte("n3w")}}},
	}}})
	changes, err := store.ApplyUpdate(ctx, update)
	fmt.Println("update written:", changes, "accepted:", agentapi.ReplyFor("ag-1", err).Accepted)

	// The service asks the agent's API, with its instance id and token.
	tokens := &agentapi.TokenTable{}
	_ = tokens.Set("web-1", "t0ken")
	handler, _ := agentapi.NewHandler(store, agentapi.HandlerOptions{Authenticate: tokens.Authenticate})
	server := httptest.NewServer(handler)
	defer server.Close()
	call := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, server.URL+path, nil)
		req.SetBasicAuth("web-1", "t0ken")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	fmt.Println(call("GET", "/secrets"))
	_, body := call("GET", "/secrets/db")
	var got map[string]struct{ Details string }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		fmt.Println(err)
		return
	}
	details, _ := base64.StdEncoding.DecodeString(got["db"].Details)
	fmt.Printf("db details: %s\n", details)
	status, _ := call("POST", "/secrets/db?received=true")
	fmt.Println(status)
	fmt.Println(call("GET", "/secrets"))

	// The agreement ends: the files are overwritten, then deleted.
	removed, err := store.RemoveAgreement(ctx, "ag-1")
	fmt.Println("removed:", removed, err)
	// Output:
	// proposal reply: {Version:1 AgreementID:ag-1 InReplyTo:{Type: Sequence:0} Accepted:true Reason: Unknown:false}
	// bind-mount .../web-1 at /open-horizon-secrets; file db holds {"password":"s3cr3t","user":"app"}
	// update written: map[web-1:[db]] accepted: true
	// 200 ["db"]
	// db details: {"password":"n3w","user":"app"}
	// 201
	// 404 {"error":"no secrets have been updated"}
	// removed: [web-1] <nil>
}

// An agent gives each service instance it starts a fresh token, serves the
// /secrets API with the table, and deletes the token when it removes the
// instance. Printing the table shows the instance ids only.
func ExampleTokenTable() {
	dir, err := os.MkdirTemp("", "agentapi-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := agentapi.Open(context.Background(), agentapi.Options{Root: filepath.Join(dir, "secrets")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	var tokens agentapi.TokenTable
	handler, err := agentapi.NewHandler(store, agentapi.HandlerOptions{Authenticate: tokens.Authenticate})
	if err != nil {
		log.Fatal(err)
	}
	server := httptest.NewServer(handler)
	defer server.Close()
	list := func(id, token string) int {
		req, _ := http.NewRequest("GET", server.URL+"/secrets", nil)
		req.SetBasicAuth(id, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// The agent starts two instances and hands each its id and token
	// (with its mount) when it starts the container.
	webToken := rand.Text()
	if err := tokens.Set("web-1", webToken); err != nil {
		log.Fatal(err)
	}
	if err := tokens.Set("db-1", rand.Text()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(&tokens)
	fmt.Println("web-1 lists its updates:", list("web-1", webToken)) // 404: authenticated, nothing updated

	// The agent removes the instance: its token no longer authenticates.
	tokens.Delete("web-1")
	fmt.Println("web-1 after removal:", list("web-1", webToken))
	fmt.Println(tokens.IDs())
	// Output:
	// map[db-1:[redacted] web-1:[redacted]]
	// web-1 lists its updates: 404
	// web-1 after removal: 401
	// [db-1]
}
