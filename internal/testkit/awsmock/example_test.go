package awsmock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
)

// Serve the endpoint over loopback HTTP and point an unmodified SDK client
// at it.
func Example() {
	srv := smmock.New(smmock.Options{Credentials: map[string]string{"AKIDEXAMPLE": "example-secret"}})
	ts := httptest.NewServer(srv)
	defer ts.Close()

	client := secretsmanager.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
		BaseEndpoint: aws.String(ts.URL),
	})
	ctx := context.Background()
	if _, err := client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String("app/db"), SecretString: aws.String(`{"user":"app"}`),
	}); err != nil {
		panic(err)
	}
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("app/db")})
	if err != nil {
		panic(err)
	}
	fmt.Println(aws.ToString(out.SecretString), out.VersionStages)

	_, err = client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("app/none")})
	var ae smithy.APIError
	if errors.As(err, &ae) {
		fmt.Println(ae.ErrorCode())
	}
	fmt.Println(srv.Calls(smmock.OpGetSecretValue), "GetSecretValue calls,", srv.Writes(), "write")
	// Output:
	// {"user":"app"} [AWSCURRENT]
	// ResourceNotFoundException
	// 2 GetSecretValue calls, 1 write
}
