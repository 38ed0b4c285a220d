package agreement_test

import (
	"context"
	"crypto/ed25519"
	"crypto/hpke"
	"errors"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// The agbot seals a proposal carrying a service's secrets to the agent's
// public keys; the agent opens it and answers with a sealed reply.
func Example() {
	ctx := context.Background()
	agbot, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	if err != nil {
		log.Fatal(err)
	}
	agent, err := agreement.GenerateKeys(agreement.SuiteMLKEM768X25519)
	if err != nil {
		log.Fatal(err)
	}

	// Agbot: the proposal's secret-bearing part, sequence 1 of this agreement.
	proposal := agreement.Proposal{
		AgreementID: "agr-1",
		Services: []agreement.ServiceSecrets{{
			Service: agreement.ServiceRef{Org: "myorg", URL: "https://example.com/db-client", Version: "1.0.0"},
			Secrets: map[string]agreement.SecretDetails{
				"db": {Format: agreement.FormatJSON, Data: edgesecrets.Data{"username": []byte("app"), "password": []byte("s3cr3t")}},
			},
		}},
	}
	envelope, err := agreement.Seal(agbot, agent.Public(), proposal, agreement.Header{Sequence: 1}, agreement.Options{})
	if err != nil {
		log.Fatal(err)
	}

	// Agent: open with its keys, the agbot's public keys and its replay guard.
	guard := agreement.NewMemoryReplayGuard()
	h, got, err := agreement.Open[agreement.Proposal](ctx, agent, agbot.Public(), envelope, guard, agreement.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.Type, h.AgreementID, h.Sequence, h.Suite)
	for _, ss := range got.Services {
		fmt.Println(ss.Service, slices.Sorted(maps.Keys(ss.Secrets)), ss.Secrets["db"])
	}

	// The same envelope again is a replay.
	_, _, err = agreement.Open[agreement.Proposal](ctx, agent, agbot.Public(), envelope, guard, agreement.Options{})
	fmt.Println("replayed:", errors.Is(err, agreement.ErrReplay))

	// Agent answers; the agbot opens the reply with its own guard.
	replyEnv, err := agreement.Seal(agent, agbot.Public(), agreement.NewReply(h, true, ""), agreement.Header{Sequence: 1}, agreement.Options{})
	if err != nil {
		log.Fatal(err)
	}
	_, reply, err := agreement.Open[agreement.Reply](ctx, agbot, agent.Public(), replyEnv, agreement.NewMemoryReplayGuard(), agreement.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("accepted:", reply.Accepted, reply.InReplyTo.Type, reply.InReplyTo.Sequence)
	// Output:
	// proposal agr-1 1 MLKEM768-X25519/HKDF-SHA256/AES-256-GCM
	// myorg/https://example.com/db-client@1.0.0 [db] {Format:json Data:map[password:[redacted] username:[redacted]]}
	// replayed: true
	// accepted: true proposal 1
}

// An update carries only the changed secrets; an agent rejects kinds it
// does not know with a reply instead of failing.
func ExampleNewSecretsUpdate() {
	agbot, _ := agreement.GenerateKeys(agreement.SuiteX25519)
	agent, _ := agreement.GenerateKeys(agreement.SuiteX25519)

	u, err := agreement.NewSecretsUpdate("agr-1", agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{
		Service: agreement.ServiceRef{Org: "myorg", URL: "https://example.com/db-client"},
		Secrets: map[string]agreement.SecretDetails{"db": {Data: edgesecrets.Data{"password": []byte("n3w")}}},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	envelope, err := agreement.Seal(agbot, agent.Public(), u, agreement.Header{Sequence: 2}, agreement.Options{})
	if err != nil {
		log.Fatal(err)
	}

	h, update, err := agreement.Open[agreement.Update](context.Background(), agent, agbot.Public(), envelope, agreement.NewMemoryReplayGuard(), agreement.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(update) // never prints the payload
	switch update.Kind {
	case agreement.UpdateKindSecrets:
		su, err := update.Secrets()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("changed:", slices.Sorted(maps.Keys(su.Services[0].Secrets)))
	default:
		fmt.Println(agreement.NewReply(h, false, "unknown update kind "+update.Kind))
	}
	// Output:
	// {Version:1 AgreementID:agr-1 Kind:secrets Payload:[126 bytes]}
	// changed: [db]
}

// An agent keeps its private keys in a 0600 file and publishes the public
// keys; an identity certificate carries the encryption key as KEM id and
// bytes, from which the agbot rebuilds the keys to seal to.
func ExampleNewPublicKeys() {
	dir, err := os.MkdirTemp("", "agent")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.keys")

	keys, err := agreement.GenerateKeys("")
	if err != nil {
		log.Fatal(err)
	}
	if err := keys.WriteFile(path); err != nil {
		log.Fatal(err)
	}
	fi, _ := os.Stat(path)
	loaded, err := agreement.ReadPrivateKeysFile(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fi.Mode().Perm(), loaded.Public().String() == keys.Public().String())

	// In a CSR: the Ed25519 public key, and the HPKE key's KEM id and bytes.
	signing := keys.Signer().Public().(ed25519.PublicKey)
	enc := keys.Public().EncryptionKey()
	kemID, encBytes := enc.KEM().ID(), enc.Bytes()
	fmt.Printf("KEM 0x%04x, %d bytes\n", kemID, len(encBytes))

	// On the hub: rebuild the keys from the certificate's fields.
	kem, err := hpke.NewKEM(kemID)
	if err != nil {
		log.Fatal(err)
	}
	parsed, err := kem.NewPublicKey(encBytes)
	if err != nil {
		log.Fatal(err)
	}
	pub, err := agreement.NewPublicKeys(signing, parsed)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(pub.Suite(), pub.EncryptionKeyID() == keys.Public().EncryptionKeyID())
	// Output:
	// -rw------- true
	// KEM 0x647a, 1216 bytes
	// MLKEM768-X25519/HKDF-SHA256/AES-256-GCM true
}
