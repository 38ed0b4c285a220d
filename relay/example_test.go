package relay_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/relay"
)

// The agent publishes its certified identity; the agbot posts an envelope
// sealed to it; the agent fetches it and posts its sealed reply, which the
// relay checks and hands to the agbot waiting for it.
func Example() {
	ctx := context.Background()
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	// The hub: an identity issuer (attestation accepted as is, for the
	// example), the agbot's keys and the relay.
	issuer, err := identity.NewIssuer(identity.IssuerOptions{Attest: func(context.Context, identity.AttestationRequest) (time.Time, error) {
		return time.Now(), nil
	}})
	must(err)
	agbotKeys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	must(err)
	server := relay.NewServer(relay.ServerOptions{Verifier: issuer.Verifier(), Keys: agbotKeys})
	hub := httptest.NewServer(server)
	defer hub.Close()
	n := relay.Node{Org: "myorg", Node: "node-1"}

	// Agent: register and publish the certificate.
	agentKeys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	must(err)
	id, err := identity.NewAgent(identity.AgentOptions{
		Instance:   identity.Identity{Provider: "demo", Org: n.Org, Node: n.Node, InstanceID: "i-1"},
		SigningKey: agentKeys.Signer(), EncryptionKey: agentKeys.Public().EncryptionKey(), Issuer: issuer})
	must(err)
	_, err = id.Register(ctx, "attestation")
	must(err)
	client, err := relay.NewClient(hub.URL, nil)
	must(err)
	must(client.PublishCertificate(ctx, relay.Publication{Node: n, ChainPEM: id.CertificateChain()}))

	// Agbot: seal a proposal to the agent and post it.
	p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{
		Service: agreement.ServiceRef{Org: "myorg", URL: "web"},
		Secrets: map[string]agreement.SecretDetails{"db": {Data: edgesecrets.Data{"password": []byte("s3cr3t")}}}}}}
	envelope, err := agreement.Seal(agbotKeys, agentKeys.Public(), p, agreement.Header{Sequence: 1}, agreement.Options{})
	must(err)
	msgID, replies, err := server.Post(n, envelope)
	must(err)
	defer server.Done(msgID)

	// Agent: fetch, open, answer.
	m, ok, err := client.Next(ctx, n, 0)
	must(err)
	h, got, err := agreement.Open[agreement.Proposal](ctx, agentKeys, agbotKeys.Public(), m.Envelope, agreement.NewMemoryReplayGuard(), agreement.Options{})
	must(err)
	fmt.Println("agent got message", m.ID, ok, "for", got.AgreementID)
	reply, err := agreement.Seal(agentKeys, agbotKeys.Public(), agreement.NewReply(h, true, ""), agreement.Header{Sequence: 1}, agreement.Options{})
	must(err)
	must(client.Reply(ctx, m.ID, reply))
	fmt.Println("a stranger's reply:", client.Reply(ctx, m.ID, []byte("junk")))

	// Agbot: the one reply that checked out.
	_, r, err := agreement.Open[agreement.Reply](ctx, agbotKeys, agentKeys.Public(), <-replies, agreement.NewMemoryReplayGuard(), agreement.Options{})
	must(err)
	fmt.Println("agbot got: accepted", r.Accepted)
	// Output:
	// agent got message 1 true for ag-1
	// a stranger's reply: relay: POST /relay/messages/1/reply: status 403
	// agbot got: accepted true
}
