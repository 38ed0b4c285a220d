package agreement_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// senderFunc adapts a function to agreement.EnvelopeSender. A real sender
// carries the envelope to the node (over the exchange, a queue, HTTP) and
// waits for the agent's answer.
type senderFunc func(ctx context.Context, agreementID string, envelope []byte) ([]byte, error)

func (f senderFunc) Send(ctx context.Context, agreementID string, envelope []byte) ([]byte, error) {
	return f(ctx, agreementID, envelope)
}

// The agbot's outbox delivers updates sealed end to end: a SealingTransport
// seals each attempt to the agent's keys with a fresh sequence; the agent
// opens it with its replay guard, applies it and answers with a sealed reply
// naming the update.
func ExampleSealingTransport() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agbotKeys, err := agreement.GenerateKeys(agreement.DefaultSuite)
	if err != nil {
		log.Fatal(err)
	}
	agentKeys, err := agreement.GenerateKeys(agreement.DefaultSuite)
	if err != nil {
		log.Fatal(err)
	}

	// On the node: the agent (its replay guard would be persisted).
	guard := agreement.NewMemoryReplayGuard()
	toAgent := senderFunc(func(ctx context.Context, _ string, envelope []byte) ([]byte, error) {
		h, u, err := agreement.OpenUpdate(ctx, agentKeys, agbotKeys.Public(), envelope, guard)
		if err != nil {
			return nil, err // forged, tampered or replayed: no answer
		}
		reply := agreement.NewReply(h, true, "")
		if su, err := u.Secrets(); err != nil {
			reply = agreement.NewReply(h, false, "cannot apply: "+err.Error())
		} else {
			fmt.Println("agent applies", h.AgreementID, su.Services[0].Service, su.Services[0].SecretNames())
		}
		return agreement.SealReply(agentKeys, agbotKeys.Public(), reply, agreement.Header{Sequence: h.Sequence})
	})

	// On the agbot.
	transport, err := agreement.NewSealingTransport(agreement.SealingTransportOptions{
		Keys: agbotKeys,
		AgentKeys: func(context.Context, string) (*agreement.PublicKeys, error) {
			return agentKeys.Public(), nil // from the agent's identity certificate
		},
		Sender: toAgent,
	})
	if err != nil {
		log.Fatal(err)
	}
	outbox, err := agreement.NewOutbox(ctx, transport, agreement.OutboxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	go outbox.Run(ctx)

	u, err := agreement.NewSecretsUpdate("agr-1", agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{
		Service: agreement.ServiceRef{Org: "myorg", URL: "db-client"},
		Secrets: map[string]agreement.SecretDetails{"db": {Data: secretstore.Data{"password": []byte("n3w")}}},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	if err := outbox.Queue(ctx, u); err != nil {
		log.Fatal(err)
	}
	rec, _ := outbox.Lookup("agr-1")
	for rec.Status == agreement.StatusPending {
		time.Sleep(10 * time.Millisecond)
		rec, _ = outbox.Lookup("agr-1")
	}
	fmt.Println(rec.AgreementID, rec.Status, "after", rec.Attempts, "attempt")
	// Output:
	// agent applies agr-1 myorg/db-client [db]
	// agr-1 accepted after 1 attempt
}
