package sim

import (
	"context"
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
)

// handlerTransport serves every request with one handler, in process: no
// socket, so that a synctest bubble's goroutines block only on what the
// code under test waits for.
type handlerTransport struct{ h http.Handler }

// RoundTrip implements http.RoundTripper.
func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// newAWSStore returns the AWS Secrets Manager backend (awssm) over the
// wire-level endpoint awsmock, reached in process: the store the agbots
// read when Config.Store is StoreAWS. Deletions are immediate (no
// recovery window), so that a secret deleted can be created again.
func newAWSStore(ctx context.Context) (*secretstore.Store, error) {
	srv := awsmock.New(awsmock.Options{})
	return awssm.New(ctx, awssm.Options{ForceDelete: true, AWSConfig: &aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDSIM", "sim-secret-key", ""),
		BaseEndpoint: aws.String("http://secretsmanager.sim"),
		HTTPClient:   &http.Client{Transport: handlerTransport{srv}},
	}})
}
