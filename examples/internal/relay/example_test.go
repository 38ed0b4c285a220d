package relay_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/edgesecrets/edgesecrets/examples/internal/relay"
)

// The agbot posts a sealed envelope for a node; the node's agent fetches
// it and posts its sealed reply, which reaches the agbot waiting for it.
func Example() {
	ctx := context.Background()
	server := relay.NewServer(relay.ServerOptions{})
	hub := httptest.NewServer(server)
	defer hub.Close()
	n := relay.Node{Org: "myorg", Node: "node-1"}

	// Agbot.
	id, replies, err := server.Post(n, []byte("<sealed proposal>"))
	if err != nil {
		panic(err)
	}
	defer server.Done(id)

	// Agent.
	client, err := relay.NewClient(hub.URL, nil)
	if err != nil {
		panic(err)
	}
	m, ok, err := client.Next(ctx, n, 0)
	if err != nil || !ok {
		panic(fmt.Sprint("no message: ", err))
	}
	fmt.Printf("agent got message %d: %s\n", m.ID, m.Envelope)
	if err := client.Reply(ctx, m.ID, []byte("<sealed reply>")); err != nil {
		panic(err)
	}

	fmt.Printf("agbot got: %s\n", <-replies)
	// Output:
	// agent got message 1: <sealed proposal>
	// agbot got: <sealed reply>
}
