package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agent"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/vault"
)

// printable is one exported type that can hold a value or credential,
// filled with canaries.
type printable struct {
	name string
	v    any
	// wire: the type's JSON is a protocol form that carries the values (the
	// plaintext of a sealed agreement message). It is checked through
	// every printer but json.Marshal inside another value; see the issue
	// report for what remains.
	wire bool
}

// TestCanaryEveryType prints every exported type of the module that can
// hold a secret value, token, key or attestation — filled with canaries —
// through fmt (every common verb, by value and by pointer), slog's text and
// JSON handlers (directly and inside another struct, where the JSON
// handler marshals) and encoding/json, and finds no canary in any form
// (DESIGN.md section 7, rule 1; issue 18).
func TestCanaryEveryType(t *testing.T) {
	var c canaries
	v := c.newValue
	data := func() edgesecrets.Data { return edgesecrets.Data{"password": []byte(v()), "user": []byte("app")} }
	details := agreement.SecretDetails{Format: agreement.FormatJSON, Data: data()}
	ref := agreement.ServiceRef{Org: "myorg", URL: "com.example.web", Version: "1.0.0"}
	services := []agreement.ServiceSecrets{{Service: ref, Secrets: map[string]agreement.SecretDetails{"db": details}}}
	update, err := agreement.NewSecretsUpdate("ag-1", agreement.SecretsUpdate{Services: services})
	require.NoError(t, err)

	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	seed := keys.Signer().(ed25519.PrivateKey).Seed()
	c.mu.Lock()
	c.values = append(c.values, string(seed), string(keys.Signer().(ed25519.PrivateKey)))
	c.mu.Unlock()
	_, caKey, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	c.mu.Lock()
	c.values = append(c.values, string(caKey.Seed()))
	c.mu.Unlock()
	ca, err := identity.NewCA(identity.CAOptions{})
	require.NoError(t, err)
	var attested identity.AttestationRequest
	issuer, err := identity.NewIssuer(identity.IssuerOptions{Signer: ca, Attest: func(_ context.Context, req identity.AttestationRequest) (time.Time, error) {
		attested = req
		return time.Time{}, errors.New("only looked at")
	}})
	require.NoError(t, err)
	me := identity.Identity{Provider: "demo", Org: "myorg", Node: "node-1", InstanceID: "i-1"}
	agentOpts := identity.AgentOptions{Instance: me, SigningKey: keys.Signer(), EncryptionKey: keys.Public().EncryptionKey(), Issuer: issuer}
	idAgent, err := identity.NewAgent(agentOpts)
	require.NoError(t, err)
	attestation := identity.Attestation(v())
	_, err = idAgent.Register(t.Context(), attestation)
	require.Error(t, err)
	require.Equal(t, attestation, attested.Attestation, "the attestor saw the document")

	cfg, err := secretstore.ParseConfig(bytes.NewReader(fmt.Appendf(nil,
		`{"type":"memory","vault":{"address":"http://127.0.0.1:8200","auth":{"method":"token","token":%q}},"awssm":{"region":"eu-west-1","accessKeyId":"AKIA","secretAccessKey":%q}}`,
		v(), v())))
	require.NoError(t, err)
	vaultAuth := vault.Auth{Method: "token", Token: edgesecrets.Sensitive(v()), SecretID: edgesecrets.Sensitive(v())}

	table := &agentapi.TokenTable{}
	require.NoError(t, table.Set("web-1", v()))
	require.NoError(t, table.Set("web-2", v()))
	devOpts := mock.DevAgentOptions{Token: edgesecrets.Sensitive(v()), Dir: filepath.Join(t.TempDir(), "dev")}
	dev, err := mock.NewDevAgent(t.Context(), devOpts)
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })

	types := []printable{
		{name: "edgesecrets.Data", v: data()},
		{name: "secretstore.Secret", v: secretstore.Secret{Name: "db", Data: data(), Version: "1"}},
		{name: "secretstore.Config", v: cfg},
		{name: "vault.Config", v: vault.Config{Address: "http://127.0.0.1:8200", Auth: vaultAuth}},
		{name: "vault.Auth", v: vaultAuth},
		{name: "edgesecrets.Sensitive", v: vaultAuth.Token},
		{name: "driver.Secret", v: driver.Secret{Data: data(), Version: "1"}},
		{name: "secretsapi.Credentials", v: secretsapi.Credentials{Org: "myorg", User: "alice", Secret: edgesecrets.Sensitive(v())}},
		{name: "agent.Instance", v: agent.Instance{ID: "web-1", Mount: "/m", Token: edgesecrets.Sensitive(v())}},
		{name: "agreement.PrivateKeys", v: keys},
		{name: "agreement.SecretDetails", v: details, wire: true},
		{name: "agreement.ServiceSecrets", v: services[0], wire: true},
		{name: "agreement.Proposal", v: agreement.Proposal{AgreementID: "ag-1", Services: services}, wire: true},
		{name: "agreement.SecretsUpdate", v: agreement.SecretsUpdate{Services: services}, wire: true},
		{name: "agreement.Update", v: update, wire: true},
		{name: "identity.Attestation", v: attestation},
		{name: "identity.AttestationRequest", v: attested},
		{name: "identity.AgentOptions", v: agentOpts},
		{name: "identity.Agent", v: idAgent},
		{name: "identity.CAOptions", v: identity.CAOptions{Key: caKey}},
		{name: "identity.NewCA", v: ca},
		{name: "agentapi.TokenTable", v: table},
		{name: "agentapi.HandlerOptions", v: agentapi.HandlerOptions{Authenticate: table.Authenticate}},
		{name: "agentapi.Options", v: agentapi.Options{Root: "/r", Tokens: table, SealKeys: keys, MemoryDir: "/m"}},
		{name: "agentapi.ReceiverOptions", v: agentapi.ReceiverOptions{Keys: keys, Agbot: keys.Public()}},
		{name: "mock.DevAgentOptions", v: devOpts},
		{name: "mock.DevAgent", v: dev},
		{name: "demo.Env", v: demo.Env{API: "http://127.0.0.1:1", Instance: "web", Token: v(), Mount: "/m"}},
	}
	values := c.all()
	for _, p := range types {
		t.Run(p.name, func(t *testing.T) {
			var out bytes.Buffer
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
				fmt.Fprintf(&out, verb+"\n", p.v)
				fmt.Fprintf(&out, verb+"\n", &p.v)
				fmt.Fprintf(&out, verb+"\n", []any{p.v})
				// A pointer inside another value: fmt's %s and %q of it
				// take its error path, which calls no method of the
				// pointed-to fields.
				fmt.Fprintf(&out, verb+"\n", []any{pointerTo(p.v)})
			}
			fmt.Fprintln(&out, fmt.Errorf("failed with %v", p.v))
			for _, h := range []slog.Handler{slog.NewTextHandler(&out, nil), slog.NewJSONHandler(&out, nil)} {
				slog.New(h).Info("direct", "v", p.v)
				if !p.wire {
					slog.New(h).Info("nested", "v", struct {
						Name  string
						Value any
					}{"x", p.v})
				}
			}
			if !p.wire {
				if b, err := json.Marshal(p.v); err == nil {
					out.Write(b)
				}
			}
			assert.Empty(t, leaks(out.String(), values), "%s prints a value:\n%s", p.name, out.String())
		})
	}
	assert.GreaterOrEqual(t, len(values), 15, "the canaries were made")
}

// pointerTo returns a pointer to a copy of v, or v itself when it is a
// pointer already.
func pointerTo(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		return v
	}
	p := reflect.New(rv.Type())
	p.Elem().Set(rv)
	return p.Interface()
}
