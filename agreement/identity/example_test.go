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
		Attestor: identity.AttestorFunc(func(ctx context.Context, req identity.AttestationRequest) (identity.Confirmation, error) {
			if string(req.Attestation) != "signed-document-for-"+req.Instance.InstanceID {
				return identity.Confirmation{}, errors.New("not our document")
			}
			return identity.Confirmation{IssuedAt: time.Now()}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(must(identity.NewHandler(identity.HandlerOptions{Issuer: issuer})))
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
	got, err := verifier.Verify(ctx, agent.CertificateChain()...)
	if err != nil {
		panic(err)
	}
	fmt.Println("verified", got.Instance)
	fmt.Println("seal to the agent's key:", string(got.EncryptionKey.Bytes()) == string(encryptionKey.PublicKey().Bytes()))

	// Agent: renew (a Refresher does this after 2/3 of the lifetime).
	if _, err := agent.Renew(ctx); err != nil {
		panic(err)
	}
	fmt.Println("renewed; still verifies:", must(verifier.Verify(ctx, agent.CertificateChain()...)) != nil)

	// Administrator: revoke. The agbot refuses; so does the hub on refresh.
	if err := issuer.Revoke(ctx, got.Instance); err != nil {
		panic(err)
	}
	_, err = verifier.Verify(ctx, agent.CertificateChain()...)
	fmt.Println("after revoke, verifier:", errors.Is(err, identity.ErrRevoked))
	_, err = agent.Renew(ctx)
	fmt.Println("after revoke, refresh:", errors.Is(err, identity.ErrRevoked), identity.StatusOf(err))

	// Output:
	// verified openhorizon.factory1/acme/node-1/i-42
	// seal to the agent's key: true
	// renewed; still verifies: true
	// after revoke, verifier: true
	// after revoke, refresh: true 403
}

// An agent keeps its certificate fresh with a Refresher: renewal after 2/3
// of the lifetime, retries with jittered backoff while the hub is down, a
// warning when the certificate would lapse before the next attempt, and an
// end when the hub refuses for good (revoked, expired).
func ExampleRefresher() {
	var agent *identity.Agent // after agent.Register
	refresher, err := identity.NewRefresher(identity.RefresherOptions{
		Renewer: agent,
		OnExpiryWarning: func(w identity.ExpiryWarning) {
			fmt.Printf("certificate expires %s, before the next attempt at %s: %v\n", w.NotAfter, w.NextAttempt, w.Err)
		},
	})
	if err != nil {
		panic(err)
	}
	go func() {
		err := refresher.Run(context.Background())
		if errors.Is(err, identity.ErrRevoked) || errors.Is(err, identity.ErrExpired) {
			fmt.Println("register again:", err)
		}
	}()
}

// The revoke endpoint is off until the embedder supplies an authorisation
// hook; here an organisation's administrator token.
func ExampleHandlerOptions() {
	issuer := must(identity.NewIssuer(identity.IssuerOptions{Attestor: identity.AttestorFunc(
		func(context.Context, identity.AttestationRequest) (identity.Confirmation, error) {
			return identity.Confirmation{}, errors.New("no provider configured")
		})}))
	handler := must(identity.NewHandler(identity.HandlerOptions{
		Issuer: issuer,
		AuthorizeRevoke: func(r *http.Request, id identity.Identity) error {
			if r.Header.Get("Authorization") != "Bearer admin-of-"+id.Org {
				return identity.ErrUnauthenticated
			}
			return nil
		},
	}))
	srv := httptest.NewServer(handler)
	defer srv.Close()

	id := identity.Identity{Provider: "p", Org: "acme", Node: "node-1", InstanceID: "i-1"}
	for _, token := range []string{"", "Bearer admin-of-acme"} {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+id.Path(), nil)
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
