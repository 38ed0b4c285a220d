package identity_test

import (
	"context"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// The whole life of an agent identity: the hub registers the agent on the
// provider's word, the agbot verifies it and gets the key to seal to, the
// agent renews, an administrator revokes, and the agbot stops sealing.
func Example() {
	ctx := context.Background()

	// Hub: the provider's attestor vouches for documents it issued.
	issuer, err := identity.NewIssuer(identity.IssuerOptions{
		Attest: func(ctx context.Context, req identity.AttestationRequest) (time.Time, error) {
			if string(req.Attestation) != "signed-document-for-"+req.Instance.InstanceID {
				return time.Time{}, errors.New("not our document")
			}
			return time.Now(), nil // when the provider issued the document
		},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(issuer.Handler(nil))
	defer srv.Close()

	// Agent: its keys (from the agreement package in a real agent).
	_, signingKey, _ := ed25519.GenerateKey(rand.Reader)
	encryptionKey, _ := hpke.MLKEM768X25519().GenerateKey()
	agent := must(identity.NewAgent(identity.AgentOptions{
		Instance:      identity.Identity{Provider: "openhorizon.factory1", Org: "acme", Node: "node-1", InstanceID: "i-42"},
		SigningKey:    signingKey,
		EncryptionKey: encryptionKey.PublicKey(),
		Hub:           must(identity.NewClient(identity.ClientOptions{BaseURL: srv.URL})),
	}))
	if _, err := agent.Register(ctx, "signed-document-for-i-42"); err != nil {
		panic(err)
	}

	// Agbot: verify before sealing.
	verifier := issuer.Verifier()
	got, err := verifier.Verify(ctx, agent.CertificateChain())
	if err != nil {
		panic(err)
	}
	fmt.Println("verified", got.Instance)
	fmt.Println("seal to the agent's key:", string(got.EncryptionKey.Bytes()) == string(encryptionKey.PublicKey().Bytes()))

	// Agent: renew (Run does this after 2/3 of the lifetime).
	if _, err := agent.Renew(ctx); err != nil {
		panic(err)
	}
	fmt.Println("renewed; still verifies:", must(verifier.Verify(ctx, agent.CertificateChain())) != nil)

	// Administrator: revoke. The agbot refuses; so does the hub on refresh.
	if err := issuer.Revoke(ctx, got.Instance); err != nil {
		panic(err)
	}
	_, err = verifier.Verify(ctx, agent.CertificateChain())
	fmt.Println("after revoke, verifier:", errors.Is(err, identity.ErrRevoked))
	_, err = agent.Renew(ctx)
	fmt.Println("after revoke, refresh:", errors.Is(err, identity.ErrRevoked), errors.Is(err, identity.ErrForbidden))

	// Output:
	// verified openhorizon.factory1/acme/node-1/i-42
	// seal to the agent's key: true
	// renewed; still verifies: true
	// after revoke, verifier: true
	// after revoke, refresh: true true
}

// An agent keeps its certificate fresh with Run: renewal after 2/3 of the
// lifetime, retries with jittered backoff while the hub is down, a warning
// when the certificate would lapse before the next attempt, and an end
// when the hub refuses for good (revoked, expired).
func ExampleAgent_Run() {
	agent, err := identity.NewAgent(identity.AgentOptions{
		// Instance, keys and Hub as in the package example.
		OnExpiryWarning: func(notAfter, nextAttempt time.Time, err error) {
			fmt.Printf("certificate expires %s, before the next attempt at %s: %v\n", notAfter, nextAttempt, err)
		},
	})
	if err != nil {
		return
	}
	go func() {
		// after agent.Register or agent.LoadCertificate
		err := agent.Run(context.Background())
		switch {
		case errors.Is(err, context.Canceled):
		case errors.Is(err, identity.ErrRevoked):
			fmt.Println("revoked for good:", err)
		default:
			fmt.Println("register again:", err)
		}
	}()
}

// The revoke endpoint is off until the embedder supplies an authorisation
// hook; here an organisation's administrator token.
func ExampleIssuer_Handler() {
	issuer := must(identity.NewIssuer(identity.IssuerOptions{
		Attest: func(context.Context, identity.AttestationRequest) (time.Time, error) {
			return time.Time{}, errors.New("no provider configured")
		}}))
	handler := issuer.Handler(func(r *http.Request, id identity.Identity) error {
		if r.Header.Get("Authorization") != "Bearer admin-of-"+id.Org {
			return identity.ErrUnauthenticated
		}
		return nil
	})
	srv := httptest.NewServer(handler)
	defer srv.Close()

	for _, token := range []string{"", "Bearer admin-of-acme"} {
		// DELETE /instance/{provider}/{org}/{node}/{instanceId}
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/instance/p/acme/node-1/i-1", nil)
		req.Header.Set("Authorization", token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 401
	// 404
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
