package awssm_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
)

const (
	testKeyID     = "AKIDEDGESECRETSTEST"
	testSecretKey = "test-secret-access-key"
	testRegion    = "us-east-1"
	testAttempts  = 3
)

// env is a Secrets Manager endpoint served over loopback HTTP, with an SDK
// client for looking behind the store's back.
type env struct {
	t      testing.TB
	srv    *smmock.Server
	url    string
	clock  *serverClock
	client *secretsmanager.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	c := &serverClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv := smmock.New(smmock.Options{Now: c.Now, Credentials: map[string]string{testKeyID: testSecretKey}})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	e := &env{t: t, srv: srv, url: ts.URL, clock: c}
	e.client = secretsmanager.NewFromConfig(e.awsConfig())
	return e
}

// serverClock is the endpoint's clock, which the tests move: the endpoint
// serves over loopback HTTP, which testing/synctest does not fake.
type serverClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *serverClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *serverClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fastRetryer is the SDK's standard retryer with a 1 ms backoff and no
// client-side retry quota, so retry tests are quick and deterministic.
func fastRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = testAttempts
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		o.RateLimiter = ratelimit.None
	})
}

func (e *env) awsConfig() aws.Config {
	return aws.Config{
		Region:       testRegion,
		Credentials:  credentials.NewStaticCredentialsProvider(testKeyID, testSecretKey, ""),
		BaseEndpoint: aws.String(e.url),
		Retryer:      fastRetryer,
	}
}

// store returns a store over the endpoint; opts.AWSConfig is filled in.
func (e *env) store(opts awssm.Options) *secretstore.Store {
	e.t.Helper()
	cfg := e.awsConfig()
	opts.AWSConfig = &cfg
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = time.Millisecond // quick retries
	}
	s, err := awssm.New(e.t.Context(), opts)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e *env) put(s *secretstore.Store, name string, data edgesecrets.Data, labels map[string]string) {
	e.t.Helper()
	_, err := s.Put(e.t.Context(), &secretstore.Secret{Name: name, Data: data, Labels: labels}, secretstore.PutOptions{})
	require.NoError(e.t, err, "put %q", name)
}

// secretString reads the raw SecretString AWS holds for path.
func (e *env) secretString(path string) string {
	e.t.Helper()
	out, err := e.client.GetSecretValue(e.t.Context(), &secretsmanager.GetSecretValueInput{SecretId: aws.String(path)})
	require.NoError(e.t, err)
	return aws.ToString(out.SecretString)
}

func (e *env) info(path string) smmock.SecretInfo {
	e.t.Helper()
	info, ok := e.srv.Secret(path)
	require.True(e.t, ok, "endpoint holds %q", path)
	return info
}

// harness runs the conformance suite against a fresh endpoint per case.
type harness struct {
	e    *env
	opts awssm.Options
}

func (h *harness) MakeDriver(ctx context.Context) (driver.Store, error) {
	opts := h.opts
	cfg := h.e.awsConfig()
	opts.AWSConfig = &cfg
	return awssm.NewDriver(ctx, opts)
}

func (h *harness) BackendWrites() int64 { return h.e.srv.Writes() }

func (h *harness) Close() {}

func harnessMaker(opts awssm.Options) func(context.Context, *testing.T) (storetest.Harness, error) {
	return func(_ context.Context, t *testing.T) (storetest.Harness, error) {
		return &harness{e: newEnv(t), opts: opts}, nil
	}
}

func d(kv ...string) edgesecrets.Data {
	out := edgesecrets.Data{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = []byte(kv[i+1])
	}
	return out
}
