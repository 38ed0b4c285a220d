package delivery_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
)

// awsHarness is a harness whose engine reads a wire-level Secrets Manager
// endpoint through the AWS backend, which lists the watched secrets
// (ListSecrets) and asks about a few of them one by one each cycle, and
// polls it every second. It deploys four agreements, each bound to its own
// secret.
func awsHarness(t *testing.T) (*harness, *smmock.Server, map[string]*testAgent) {
	t.Helper()
	srv := smmock.New(smmock.Options{})
	endpoint := httptest.NewServer(srv)
	t.Cleanup(endpoint.Close)
	store, err := awssm.New(t.Context(), awssm.Options{AWSConfig: &aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", ""),
		BaseEndpoint: aws.String(endpoint.URL),
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	h := newHarness(t, func(o *delivery.Options) {
		o.Store, o.Interval, o.Grace, o.InitialDelay, o.MaxDelay, o.ReplyTimeout = store, time.Second, delivery.NoGrace, 100*time.Millisecond, time.Second, 5*time.Second
	})
	agents := map[string]*testAgent{}
	for _, x := range []string{"a", "b", "c", "d"} {
		agents[x] = h.agent("node-" + x)
		_, err := store.Put(t.Context(), &secretstore.Secret{Name: "org/" + x, Data: edgesecrets.Data{"password": []byte(canary + x)}}, secretstore.PutOptions{})
		require.NoError(t, err)
		h.register("agr-"+x, "node-"+x, "org/"+x)
	}
	h.start()
	for x := range agents {
		h.wait("agr-"+x, time.Minute)
	}
	return h, srv, agents
}

// Secrets Manager answering the agbot's listing but denying it every
// secret's own reads (an identity policy or SCP that denies DescribeSecret
// and GetSecretValue): the credential check (a ListSecrets) passes and
// the listed names look present, but every name asked about one by one is
// refused. That is the agbot's own access: nothing is cancelled, even
// without a grace period, and health says so.
func TestAWSReadsDeniedWhileListingWorksCancelsNothing(t *testing.T) {
	h, srv, agents := awsHarness(t)
	defer h.stop()

	for _, op := range []string{smmock.OpDescribeSecret, smmock.OpGetSecretValue, smmock.OpBatchGetSecretValue} {
		srv.InjectFault(smmock.Fault{Op: op, Code: "AccessDeniedException"})
	}
	time.Sleep(6 * time.Second) // six cycles: every name asked about one by one at least once
	assert.Empty(t, h.cancelled(), "no cancellation")
	for x, a := range agents {
		st := h.status("agr-" + x)
		assert.Equal(t, state.PhaseActive, st.Phase)
		got, _ := a.file("agr-"+x, "pw")
		assert.Equal(t, jsonFile(canary+x), got, "the node keeps its secret")
	}
	assert.Contains(t, h.engine.Health(context.Background()).StoreProblem, "refuses", "health says the store refuses the agbot")
}

// The same store denying one secret only (a resource policy): the listing
// still shows it, the names asked about one by one find it refused and the
// others fine, so its agreement, and only its, is cancelled.
func TestAWSOneSecretDeniedCancelsOnlyItsAgreement(t *testing.T) {
	h, srv, _ := awsHarness(t)
	defer h.stop()

	for _, op := range []string{smmock.OpDescribeSecret, smmock.OpGetSecretValue} {
		srv.InjectFault(smmock.Fault{Op: op, SecretID: "org/b", Code: "AccessDeniedException"})
	}
	eventually(t, 30*time.Second, func() bool { return len(h.cancelled()) > 0 }, "the denied secret's agreement is cancelled")
	time.Sleep(2 * time.Second)
	got := h.cancelled()
	assert.Len(t, got, 1, "only one agreement: %v", got)
	assert.Contains(t, got, "agr-b", fmt.Sprint(got))
}
