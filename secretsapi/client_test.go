package secretsapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// client is what deploycheck uses, as alice, against f's agbot.
func (f *fixture) client(t *testing.T, org string, attempts int) *secretsapi.Client {
	t.Helper()
	c, err := secretsapi.NewClient(f.server.URL, secretsapi.ClientOptions{
		Org: org, HTTPClient: f.server.Client(), MaxAttempts: attempts, RetryDelay: time.Millisecond,
		Authorize: func(r *http.Request) { r.SetBasicAuth("myorg/alice", "alice-pw") },
	})
	require.NoError(t, err)
	return c
}

func name(t *testing.T, s string) binding.VaultSecretName {
	t.Helper()
	n, err := binding.ParseVaultSecretName(s)
	require.NoError(t, err)
	return n
}

// The existence client over both routes against the real handler: answers,
// refusals, and never a read of a value.
func TestClientAgainstTheHandler(t *testing.T) {
	for _, org := range []string{"", "myorg"} {
		route := map[string]string{"": "design route", "myorg": "Open Horizon route"}[org]
		t.Run(route, func(t *testing.T) {
			f := newFixture(t, secretsapi.Options{})
			c := f.client(t, org, 1)
			ctx := context.Background()
			for secret, want := range map[string]bool{"hw-secret-name": true, "nope": false, "user/alice/token": true, "node/n1/cert": true, "user/alice/node/n1/missing": false} {
				got, err := c.SecretExists(ctx, name(t, secret))
				require.NoError(t, err, secret)
				assert.Equal(t, want, got, secret)
			}
			for _, hidden := range []string{"user/bob/token", "user/bob/nothing"} {
				_, err := c.SecretExists(ctx, name(t, hidden))
				assert.ErrorIs(t, err, edgesecrets.ErrPermission, hidden)
			}
			assert.Empty(t, f.store.Calls("get", ""), "existence never reads a value")
			assert.Len(t, f.store.Calls("stat", ""), 5)
			h, err := c.Health(ctx)
			require.NoError(t, err)
			assert.NotNil(t, h.LiveHealth)
		})
	}
}

// The client keeps retrying 503 a few times: the store comes back.
func TestClientRetriesAnUnavailableStore(t *testing.T) {
	for _, org := range []string{"", "myorg"} {
		f := newFixture(t, secretsapi.Options{})
		f.store.SetFaults(mock.Faults{Op: "stat", Fail: edgesecrets.ErrUnavailable, Times: 2})
		got, err := f.client(t, org, 3).SecretExists(context.Background(), name(t, "hw-secret-name"))
		require.NoError(t, err)
		assert.True(t, got)
		assert.Len(t, f.store.Calls("stat", ""), 3, "two 503s, then the answer")

		f.store.SetFaults(mock.Faults{Op: "stat", Fail: edgesecrets.ErrUnavailable, Times: 10})
		_, err = f.client(t, org, 4).SecretExists(context.Background(), name(t, "hw-secret-name"))
		assert.ErrorIs(t, err, edgesecrets.ErrUnavailable)
		assert.Len(t, f.store.Calls("stat", ""), 3+4)
	}
	bare := newBareFixture(t)
	_, err := bare.client(t, "myorg", 2).SecretExists(context.Background(), name(t, "db"))
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	assert.ErrorContains(t, err, "503")
}
