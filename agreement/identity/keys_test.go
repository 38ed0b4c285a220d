package identity_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// An agent registering with its agreement key set is verified by the agbot
// as exactly that key set, for both suites, and a proposal sealed to the
// verified keys opens with the agent's private keys.
func TestVerifiedKeysAreTheAgreementKeys(t *testing.T) {
	for _, suite := range []agreement.Suite{agreement.SuiteMLKEM768X25519, agreement.SuiteX25519} {
		t.Run(string(suite), func(t *testing.T) {
			ctx := t.Context()
			issuer, err := identity.NewIssuer(identity.IssuerOptions{
				Attest: func(context.Context, identity.AttestationRequest) (time.Time, error) {
					return time.Now(), nil
				},
			})
			require.NoError(t, err)
			agentKeys, err := agreement.GenerateKeys(suite)
			require.NoError(t, err)
			agent, err := identity.NewAgent(identity.AgentOptions{
				Instance:      identity.Identity{Provider: "test", Org: "acme", Node: "node-1", InstanceID: "i-1"},
				SigningKey:    agentKeys.Signer(),
				EncryptionKey: agentKeys.Public().EncryptionKey(),
				Issuer:        issuer,
			})
			require.NoError(t, err)
			_, err = agent.Register(ctx, "attestation")
			require.NoError(t, err)

			verified, err := issuer.Verifier().Verify(ctx, agent.CertificateChain())
			require.NoError(t, err)
			pub, err := verified.PublicKeys()
			require.NoError(t, err)
			require.Equal(t, agentKeys.Public().String(), pub.String(), "verified keys are the agent's agreement keys")

			agbotKeys, err := agreement.GenerateKeys(suite)
			require.NoError(t, err)
			proposal := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{
				Service: agreement.ServiceRef{Org: "acme", URL: "svc"},
				Secrets: map[string]agreement.SecretDetails{"db": {Data: map[string][]byte{"k": []byte("v")}}},
			}}}
			env, err := agreement.Seal(agbotKeys, pub, proposal, agreement.Header{Sequence: 1}, agreement.Options{})
			require.NoError(t, err)
			_, got, err := agreement.Open[agreement.Proposal](ctx, agentKeys, agbotKeys.Public(), env, agreement.NewMemoryReplayGuard(), agreement.Options{})
			require.NoError(t, err)
			require.Equal(t, "ag-1", got.AgreementID)
		})
	}
}
