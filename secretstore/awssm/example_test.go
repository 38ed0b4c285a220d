package awssm_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/edgesecrets/edgesecrets"
	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
)

// A store over Secrets Manager, built from an aws.Config. Here the endpoint
// is the wire-level mock; in production leave BaseEndpoint unset and let
// the default credential chain find the keys.
func Example() {
	endpoint := httptest.NewServer(smmock.New(smmock.Options{}))
	defer endpoint.Close()
	ctx := context.Background()

	store, err := awssm.New(ctx, awssm.Options{
		AWSConfig: &aws.Config{
			Region:       "eu-west-1",
			Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
			BaseEndpoint: aws.String(endpoint.URL),
		},
		Scope:              "myorg",
		RecoveryWindowDays: 7,
	})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	secret := &secretstore.Secret{
		Name:   "db/credentials",
		Data:   edgesecrets.Data{"user": []byte("app"), "key": {0xde, 0xad, 0xbe, 0xef}},
		Labels: map[string]string{"team": "edge"},
	}
	changed, err := store.Put(ctx, secret, secretstore.PutOptions{})
	fmt.Println("changed:", changed, err)
	changed, err = store.Put(ctx, secret, secretstore.PutOptions{})
	fmt.Println("changed again:", changed, err)

	got, err := store.Get(ctx, "db/credentials")
	if err != nil {
		panic(err)
	}
	fmt.Println(got.Data, got.Labels)
	fmt.Printf("%x\n", got.Data["key"])

	names, _ := store.List(ctx, "db/")
	fmt.Println(names)
	// Output:
	// changed: true <nil>
	// changed again: false <nil>
	// map[key:[redacted] user:[redacted]] map[team:edge]
	// deadbeef
	// [db/credentials]
}

// Opening the backend from a JSON store config. defaultScope is the name
// prefix in AWS.
func Example_config() {
	endpoint := httptest.NewServer(smmock.New(smmock.Options{}))
	defer endpoint.Close()

	cfg, err := secretstore.ParseConfig(strings.NewReader(`{
		"type": "awssm",
		"defaultScope": "myorg",
		"awssm": {
			"region": "eu-west-1",
			"endpoint": "` + endpoint.URL + `",
			"accessKeyId": "AKIDEXAMPLE",
			"secretAccessKey": "example-secret",
			"recoveryWindowDays": 7,
			"maxAttempts": 5
		}
	}`))
	if err != nil {
		panic(err)
	}
	store, err := secretstore.Open(context.Background(), cfg, secretstore.OpenOptions{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	_, err = store.Stat(context.Background(), "missing")
	fmt.Println(err)

	_, err = secretstore.ParseConfig(strings.NewReader(`{"type":"awssm","awssm":{"recoveryWindowDays":3,"forceDelete":true}}`))
	fmt.Println(err)
	// Output:
	// secretstore: stat "missing": not found: secretsmanager DescribeSecret: ResourceNotFoundException (HTTP 400)
	// secretstore: invalid config: 2 problems:
	//   - awssm: recoveryWindowDays 3 is outside AWS's 7..30 days
	//   - awssm: forceDelete and recoveryWindowDays exclude each other
}
