package agbot

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/relay"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// flakyCertStore is the hub's records, which a test can make lose every
// record or fail.
type flakyCertStore struct {
	identity.CertStore
	mu   sync.Mutex
	fail error // returned by Get when set
}

func (s *flakyCertStore) Get(ctx context.Context, provider, instanceID string) (identity.Record, error) {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return identity.Record{}, fail
	}
	return s.CertStore.Get(ctx, provider, instanceID)
}

func (s *flakyCertStore) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// Keys drops from the relay a certificate that no longer verifies because
// the agent's identity is lost, so that the agent publishes it again and
// learns why; any other failure leaves it.
func TestKeysDropsALostIdentitysCertificate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    error
		dropped bool
	}{
		{"no record for the instance", edgesecrets.ErrNotFound, true},
		{"the records are unavailable", errors.New("connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &flakyCertStore{CertStore: identity.NewMemoryCertStore()}
			keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
			require.NoError(t, err)
			ca, err := identity.NewCA(identity.CAOptions{})
			require.NoError(t, err)
			log, logs := logtest.NewLogger()
			a, err := New(Options{
				Delivery:   delivery.Options{Store: memory.New(), State: state.NewMemory(), Keys: keys},
				Identities: store, CA: ca,
				Attest: func(context.Context, identity.AttestationRequest) (time.Time, error) { return time.Now(), nil },
				Authenticate: func(context.Context, secretsapi.Credentials) (secretsapi.Caller, error) {
					return secretsapi.Caller{}, errors.New("no")
				},
				Deploy: func(context.Context, relay.Node) (Deployment, bool) { return Deployment{}, false },
				Logger: log,
			})
			require.NoError(t, err)
			issuer := a.issuer
			srv := httptest.NewServer(a.relay)
			t.Cleanup(srv.Close)
			client, err := relay.NewClient(srv.URL, srv.Client())
			require.NoError(t, err)

			n := relay.Node{Org: "myorg", Node: "node-1"}
			agentKeys, err := agreement.GenerateKeys(agreement.SuiteX25519)
			require.NoError(t, err)
			agent, err := identity.NewAgent(identity.AgentOptions{Instance: identity.Identity{Provider: "demo", Org: n.Org, Node: n.Node, InstanceID: n.Node},
				SigningKey: agentKeys.Signer(), EncryptionKey: agentKeys.Public().EncryptionKey(), Issuer: issuer})
			require.NoError(t, err)
			_, err = agent.Register(t.Context(), "attested")
			require.NoError(t, err)
			require.NoError(t, client.PublishCertificate(t.Context(), relay.Publication{Node: n, ChainPEM: agent.CertificateChain()}))
			got, err := a.keys(t.Context(), n.String())
			require.NoError(t, err)
			assert.Equal(t, agentKeys.Public().EncryptionKeyID(), got.EncryptionKeyID())

			store.set(tc.fail)
			_, err = a.keys(t.Context(), n.String())
			require.Error(t, err)
			assert.Equal(t, tc.dropped, errors.Is(err, identity.ErrIdentityLost))
			_, held := a.relay.Certificate(n)
			assert.Equal(t, !tc.dropped, held, "the certificate is dropped only for a lost identity")
			_, err = a.keys(t.Context(), n.String())
			require.Error(t, err)
			warned := strings.Count(logs.String(), "its certificate is dropped from the relay")
			if !tc.dropped {
				assert.Zero(t, warned)
				return
			}
			assert.Equal(t, 1, warned, "one WARN, however often the engine asks")
			_, _, certified, err := client.Poll(t.Context(), n, 0)
			require.NoError(t, err)
			assert.False(t, certified, "the agent is told to publish again")
			err = client.PublishCertificate(t.Context(), relay.Publication{Node: n, ChainPEM: agent.CertificateChain()})
			assert.ErrorIs(t, err, identity.ErrUnknownInstance, "and learns why")
			assert.True(t, agent.Refused(err))
		})
	}
}
