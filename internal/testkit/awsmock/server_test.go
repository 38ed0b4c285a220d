package awsmock_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
)

const (
	keyID     = "AKIDMOCKTEST"
	secretKey = "mock-secret-key"
)

type fixture struct {
	srv    *smmock.Server
	url    string
	clock  *clockwork.FakeClock
	client *secretsmanager.Client
}

// newFixture serves an endpoint that verifies signatures, with an SDK
// client that does not retry (so error answers are seen as they are).
func newFixture(t *testing.T, opts smmock.Options) *fixture {
	t.Helper()
	c := clockwork.NewFakeClockAt(time.Date(2030, 6, 7, 8, 9, 10, 0, time.UTC))
	opts.Now = c.Now
	if opts.Credentials == nil {
		opts.Credentials = map[string]string{keyID: secretKey}
	}
	srv := smmock.New(opts)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &fixture{srv: srv, url: ts.URL, clock: c, client: client(ts.URL, keyID, secretKey, 1)}
}

func client(url, key, secret string, attempts int) *secretsmanager.Client {
	return secretsmanager.NewFromConfig(aws.Config{
		Region:       "eu-west-1",
		Credentials:  credentials.NewStaticCredentialsProvider(key, secret, ""),
		BaseEndpoint: aws.String(url),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
				o.RateLimiter = ratelimit.None
			})
		},
	})
}

// code returns the AWS error code of err, failing the test if it has none.
func code(t *testing.T, err error) string {
	t.Helper()
	var ae smithy.APIError
	require.True(t, errors.As(err, &ae), "want an AWS API error, got %v", err)
	return ae.ErrorCode()
}

func (f *fixture) create(t *testing.T, name, value string, tags ...types.Tag) *secretsmanager.CreateSecretOutput {
	t.Helper()
	out, err := f.client.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value), Tags: tags})
	require.NoError(t, err)
	return out
}

func (f *fixture) describe(t *testing.T, id string) *secretsmanager.DescribeSecretOutput {
	t.Helper()
	out, err := f.client.DescribeSecret(t.Context(), &secretsmanager.DescribeSecretInput{SecretId: aws.String(id)})
	require.NoError(t, err)
	return out
}

func (f *fixture) put(t *testing.T, name, value string) string {
	t.Helper()
	out, err := f.client.PutSecretValue(t.Context(), &secretsmanager.PutSecretValueInput{SecretId: aws.String(name), SecretString: aws.String(value)})
	require.NoError(t, err)
	return aws.ToString(out.VersionId)
}

func (f *fixture) value(t *testing.T, in *secretsmanager.GetSecretValueInput) string {
	t.Helper()
	out, err := f.client.GetSecretValue(t.Context(), in)
	require.NoError(t, err)
	return aws.ToString(out.SecretString)
}

func TestSigV4(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	f.create(t, "s", "v")

	_, err := client(f.url, keyID, "wrong", 1).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")})
	assert.Equal(t, "InvalidSignatureException", code(t, err), "wrong secret key")
	_, err = client(f.url, "AKIDOTHER", secretKey, 1).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")})
	assert.Equal(t, "UnrecognizedClientException", code(t, err), "unknown access key")

	open := smmock.New(smmock.Options{})
	ts := httptest.NewServer(open)
	t.Cleanup(ts.Close)
	_, err = client(ts.URL, "ANYKEY", "any", 1).CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("s"), SecretString: aws.String("v")})
	require.NoError(t, err, "without Credentials any well-formed signature passes")

	for _, c := range []struct {
		name, auth, date, code string
	}{
		{"missing", "", "20300607T080910Z", "MissingAuthenticationTokenException"},
		{"other algorithm", "AWS3 Credential=x", "20300607T080910Z", "IncompleteSignatureException"},
		{"bad scope", "AWS4-HMAC-SHA256 Credential=K/20300607/us-east-1/secretsmanager, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("a", 64), "20300607T080910Z", "IncompleteSignatureException"},
		{"other service", "AWS4-HMAC-SHA256 Credential=K/20300607/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("a", 64), "20300607T080910Z", "InvalidSignatureException"},
		{"host unsigned", "AWS4-HMAC-SHA256 Credential=K/20300607/us-east-1/secretsmanager/aws4_request, SignedHeaders=x-amz-date, Signature=" + strings.Repeat("a", 64), "20300607T080910Z", "IncompleteSignatureException"},
		{"short signature", "AWS4-HMAC-SHA256 Credential=K/20300607/us-east-1/secretsmanager/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc", "20300607T080910Z", "IncompleteSignatureException"},
		{"date mismatch", "AWS4-HMAC-SHA256 Credential=K/20300608/us-east-1/secretsmanager/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("a", 64), "20300607T080910Z", "IncompleteSignatureException"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := raw(t, open, "POST", "secretsmanager.DescribeSecret", "application/x-amz-json-1.1", c.auth, c.date, `{"SecretId":"s"}`)
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Equal(t, c.code, body.Type)
		})
	}
}

// goodAuth is a well-formed Authorization header for a server without
// Credentials.
const goodAuth = "AWS4-HMAC-SHA256 Credential=K/20300607/us-east-1/secretsmanager/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

type errBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

func raw(t *testing.T, h http.Handler, method, target, contentType, auth, date, body string) (int, errBody) {
	t.Helper()
	req := httptest.NewRequest(method, "/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Amz-Date", date)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var eb errBody
	if rec.Code != http.StatusOK {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), "error answers are JSON")
		assert.Equal(t, eb.Type, rec.Header().Get("X-Amzn-Errortype"))
	}
	assert.NotEmpty(t, rec.Header().Get("X-Amzn-Requestid"))
	return rec.Code, eb
}

func TestEnvelope(t *testing.T) {
	srv := smmock.New(smmock.Options{})
	const date = "20300607T080910Z"
	for _, c := range []struct {
		name, method, target, ctype, body string
		status                            int
		code                              string
	}{
		{"GET", "GET", "secretsmanager.ListSecrets", "application/x-amz-json-1.1", "{}", 405, "MethodNotAllowedException"},
		{"unknown target", "POST", "secretsmanager.RotateSecret", "application/x-amz-json-1.1", "{}", 400, "UnknownOperationException"},
		{"other service", "POST", "kms.ListSecrets", "application/x-amz-json-1.1", "{}", 400, "UnknownOperationException"},
		{"content type", "POST", "secretsmanager.ListSecrets", "application/json", "{}", 400, "SerializationException"},
		{"not JSON", "POST", "secretsmanager.ListSecrets", "application/x-amz-json-1.1", "{nope", 400, "SerializationException"},
		{"not an object", "POST", "secretsmanager.ListSecrets", "application/x-amz-json-1.1", "[]", 400, "SerializationException"},
		{"wrong member type", "POST", "secretsmanager.ListSecrets", "application/x-amz-json-1.1", `{"MaxResults":"ten"}`, 400, "SerializationException"},
		{"bad base64", "POST", "secretsmanager.CreateSecret", "application/x-amz-json-1.1", `{"Name":"n","SecretBinary":"!!"}`, 400, "SerializationException"},
		{"too large", "POST", "secretsmanager.CreateSecret", "application/x-amz-json-1.1", `{"Name":"` + strings.Repeat("x", smmock.MaxRequestBytes) + `"}`, 413, "RequestEntityTooLargeException"},
		{"empty body is {}", "POST", "secretsmanager.ListSecrets", "application/x-amz-json-1.1", "", 200, ""},
		{"unknown members ignored", "POST", "secretsmanager.ListSecrets", "application/x-amz-json-1.1", `{"FutureMember":1}`, 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := raw(t, srv, c.method, c.target, c.ctype, goodAuth, date, c.body)
			assert.Equal(t, c.status, status)
			assert.Equal(t, c.code, body.Type)
		})
	}
	assert.NotContains(t, func() string {
		_, b := raw(t, srv, "POST", "secretsmanager.CreateSecret", "application/x-amz-json-1.1", goodAuth, date, `{"Name":"n","SecretString":"hunter2", "Tags": 5}`)
		return b.Message
	}(), "hunter2", "decode errors do not quote the request")
}

func TestVersionsAndStaging(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	v1 := aws.ToString(f.create(t, "s", "one").VersionId)
	v2 := f.put(t, "s", "two")
	assert.Equal(t, "two", f.value(t, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")}))
	assert.Equal(t, "one", f.value(t, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s"), VersionStage: aws.String("AWSPREVIOUS")}))
	v3 := f.put(t, "s", "three")
	d, err := f.client.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String("s")})
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{v2: {"AWSPREVIOUS"}, v3: {"AWSCURRENT"}}, d.VersionIdsToStages, "the oldest version is deprecated")
	assert.Equal(t, "one", f.value(t, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s"), VersionId: aws.String(v1)}), "deprecated versions stay readable by id")
	_, err = f.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s"), VersionId: aws.String(v1), VersionStage: aws.String("AWSCURRENT")})
	assert.Equal(t, "InvalidParameterException", code(t, err))
	_, err = f.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s"), VersionStage: aws.String("NOPE")})
	assert.Equal(t, "ResourceNotFoundException", code(t, err))

	t.Run("custom stage leaves AWSCURRENT", func(t *testing.T) {
		out, err := f.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("s"), SecretString: aws.String("pending"), VersionStages: []string{"NEXT"}})
		require.NoError(t, err)
		assert.Equal(t, []string{"NEXT"}, out.VersionStages)
		assert.Equal(t, "three", f.value(t, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")}))
	})
	t.Run("ARN works as SecretId", func(t *testing.T) {
		assert.Equal(t, "three", f.value(t, &secretsmanager.GetSecretValueInput{SecretId: d.ARN}))
		assert.Regexp(t, `^arn:aws:secretsmanager:us-east-1:123456789012:secret:s-[A-Za-z0-9]{6}$`, aws.ToString(d.ARN))
	})
	t.Run("old versions trimmed", func(t *testing.T) {
		f.create(t, "many", "0")
		for i := range smmock.MaxVersions + 5 {
			f.put(t, "many", fmt.Sprint(i+1))
		}
		info, ok := f.srv.Secret("many")
		require.True(t, ok)
		assert.Len(t, info.Versions, smmock.MaxVersions)
	})
}

func TestClientRequestToken(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	tok := "00000000-0000-4000-8000-000000000001"
	out, err := f.client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("s"), SecretString: aws.String("v"), ClientRequestToken: aws.String(tok)})
	require.NoError(t, err)
	assert.Equal(t, tok, aws.ToString(out.VersionId), "the token becomes the VersionId")
	_, err = f.client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("s"), SecretString: aws.String("v"), ClientRequestToken: aws.String(tok)})
	require.NoError(t, err, "a repeated CreateSecret is recognised")
	_, err = f.client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("s"), SecretString: aws.String("v")})
	assert.Equal(t, "ResourceExistsException", code(t, err), "another CreateSecret of the name")

	tok2 := "00000000-0000-4000-8000-000000000002"
	for range 2 {
		out, err := f.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("s"), SecretString: aws.String("w"), ClientRequestToken: aws.String(tok2)})
		require.NoError(t, err)
		assert.Equal(t, tok2, aws.ToString(out.VersionId))
	}
	info, _ := f.srv.Secret("s")
	assert.Len(t, info.Versions, 2, "the repeated PutSecretValue made no version")
	_, err = f.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("s"), SecretString: aws.String("different"), ClientRequestToken: aws.String(tok2)})
	assert.Equal(t, "ResourceExistsException", code(t, err), "a version cannot change")
	_, err = f.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("s"), SecretString: aws.String("x"), ClientRequestToken: aws.String("short")})
	assert.Equal(t, "ValidationException", code(t, err))
}

func TestUpdateSecretVersionStage(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	v1 := aws.ToString(f.create(t, "s", "one").VersionId)
	out, err := f.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("s"), SecretString: aws.String("two"), VersionStages: []string{"NEXT"}})
	require.NoError(t, err)
	v2 := aws.ToString(out.VersionId)
	move := func(stage, to, from string) error {
		in := &secretsmanager.UpdateSecretVersionStageInput{SecretId: aws.String("s"), VersionStage: aws.String(stage)}
		if to != "" {
			in.MoveToVersionId = aws.String(to)
		}
		if from != "" {
			in.RemoveFromVersionId = aws.String(from)
		}
		_, err := f.client.UpdateSecretVersionStage(ctx, in)
		return err
	}
	assert.Equal(t, "InvalidParameterException", code(t, move("AWSCURRENT", v2, "")), "label attached elsewhere needs RemoveFromVersionId")
	assert.Equal(t, "InvalidParameterException", code(t, move("AWSCURRENT", v2, v2)), "RemoveFromVersionId must hold the label")
	assert.Equal(t, "ResourceNotFoundException", code(t, move("AWSCURRENT", "no-such-version-id-000000000000000", v1)))
	assert.Equal(t, "InvalidParameterException", code(t, move("AWSCURRENT", "", v1)), "AWSCURRENT cannot just be removed")
	assert.Equal(t, "InvalidParameterException", code(t, move("X", "", "")))
	require.NoError(t, move("AWSCURRENT", v2, v1), "compare-and-set move")
	assert.Equal(t, "two", f.value(t, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")}))
	assert.Equal(t, "one", f.value(t, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s"), VersionStage: aws.String("AWSPREVIOUS")}))
	assert.Equal(t, "InvalidParameterException", code(t, move("AWSCURRENT", v1, v1)), "a stale RemoveFromVersionId loses")
	require.NoError(t, move("NEXT", "", v2), "remove a custom label")
	info, _ := f.srv.Secret("s")
	cur, _ := info.Current()
	assert.Equal(t, []string{"AWSCURRENT"}, cur.Stages)
}

func TestDeletion(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	f.create(t, "s", "v")
	del := func(id string, days *int64, force *bool) (*secretsmanager.DeleteSecretOutput, error) {
		return f.client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(id), RecoveryWindowInDays: days, ForceDeleteWithoutRecovery: force})
	}
	for _, c := range []struct {
		name  string
		days  *int64
		force *bool
	}{
		{"window 6", aws.Int64(6), nil},
		{"window 31", aws.Int64(31), nil},
		{"window 0", aws.Int64(0), nil},
		{"window and force", aws.Int64(7), aws.Bool(true)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := del("s", c.days, c.force)
			assert.Equal(t, "InvalidParameterException", code(t, err))
			info, _ := f.srv.Secret("s")
			assert.True(t, info.DeletedDate.IsZero(), "nothing deleted")
		})
	}
	out, err := del("s", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, f.clock.Now().Add(30*24*time.Hour), aws.ToTime(out.DeletionDate), "default window is 30 days")

	_, err = f.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")})
	assert.Equal(t, "InvalidRequestException", code(t, err))
	_, err = f.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("s"), SecretString: aws.String("x")})
	assert.Equal(t, "InvalidRequestException", code(t, err))
	_, err = f.client.TagResource(ctx, &secretsmanager.TagResourceInput{SecretId: aws.String("s"), Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	assert.Equal(t, "InvalidRequestException", code(t, err))
	_, err = f.client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("s"), SecretString: aws.String("x")})
	assert.Equal(t, "InvalidRequestException", code(t, err))
	_, err = del("s", nil, nil)
	assert.Equal(t, "InvalidRequestException", code(t, err), "already scheduled")
	d, err := f.client.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String("s")})
	require.NoError(t, err)
	assert.Equal(t, f.clock.Now(), aws.ToTime(d.DeletedDate))
	list, err := f.client.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	require.NoError(t, err)
	assert.Empty(t, list.SecretList)
	list, err = f.client.ListSecrets(ctx, &secretsmanager.ListSecretsInput{IncludePlannedDeletion: aws.Bool(true)})
	require.NoError(t, err)
	assert.Len(t, list.SecretList, 1)

	_, err = f.client.RestoreSecret(ctx, &secretsmanager.RestoreSecretInput{SecretId: aws.String("s")})
	require.NoError(t, err)
	assert.Equal(t, "v", f.value(t, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")}))

	_, err = del("s", aws.Int64(7), nil)
	require.NoError(t, err)
	f.clock.Advance(7*24*time.Hour - time.Second)
	_, ok := f.srv.Secret("s")
	assert.True(t, ok, "kept during the window")
	f.clock.Advance(time.Second)
	_, ok = f.srv.Secret("s")
	assert.False(t, ok, "purged when the window ends")

	f.create(t, "f", "v")
	_, err = del("f", nil, nil)
	require.NoError(t, err)
	_, err = del("f", nil, aws.Bool(true))
	require.NoError(t, err, "forcing the deletion of a scheduled secret")
	assert.Empty(t, f.srv.Names())
	_, err = del("never", nil, aws.Bool(true))
	require.NoError(t, err, "forcing the deletion of a missing secret succeeds")
	_, err = del("never", nil, nil)
	assert.Equal(t, "ResourceNotFoundException", code(t, err))
	_, err = f.client.RestoreSecret(ctx, &secretsmanager.RestoreSecretInput{SecretId: aws.String("never")})
	assert.Equal(t, "ResourceNotFoundException", code(t, err))
}

func TestListSecretsPagingAndFilters(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("app/s%02d", i)
		want = append(want, name)
		f.create(t, name, "{}", types.Tag{Key: aws.String("team"), Value: aws.String(fmt.Sprintf("t%d", i%3))})
		f.clock.Advance(time.Second)
	}
	f.create(t, "application", "{}")
	f.create(t, "other/x", "{}", types.Tag{Key: aws.String("owner"), Value: aws.String("Ops Team")})

	var got []string
	pages := 0
	in := &secretsmanager.ListSecretsInput{MaxResults: aws.Int32(10), Filters: []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{"app/"}}}}
	for p := secretsmanager.NewListSecretsPaginator(f.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		pages++
		for _, e := range page.SecretList {
			got = append(got, aws.ToString(e.Name))
			assert.NotEmpty(t, e.SecretVersionsToStages)
		}
		if pages == 1 {
			f.create(t, "app/zz-added-while-paging", "{}") // newest: sorts before the token, so not repeated
		}
	}
	assert.Equal(t, 3, pages)
	slices.Sort(got)
	assert.Equal(t, want, got, "every secret once, newest first across pages")

	names := func(filters ...types.Filter) []string {
		t.Helper()
		out, err := f.client.ListSecrets(ctx, &secretsmanager.ListSecretsInput{Filters: filters, SortBy: types.SortByTypeName, SortOrder: types.SortOrderTypeAsc})
		require.NoError(t, err)
		var ns []string
		for _, e := range out.SecretList {
			ns = append(ns, aws.ToString(e.Name))
		}
		return ns
	}
	assert.Equal(t, []string{"other/x"}, names(types.Filter{Key: types.FilterNameStringTypeTagKey, Values: []string{"own"}}))
	assert.Equal(t, []string{"app/s02", "app/s05", "app/s08"}, names(types.Filter{Key: types.FilterNameStringTypeTagValue, Values: []string{"t2"}}, types.Filter{Key: types.FilterNameStringTypeName, Values: []string{"app/s0"}}))
	assert.Equal(t, []string{"application", "other/x"}, names(types.Filter{Key: types.FilterNameStringTypeName, Values: []string{"!app/"}}))
	assert.Equal(t, []string{"other/x"}, names(types.Filter{Key: types.FilterNameStringTypeAll, Values: []string{"OPS"}}), "all: case-insensitive word prefix")
	assert.Empty(t, names(types.Filter{Key: types.FilterNameStringTypeName, Values: []string{"App/"}}), "name filter is case-sensitive")

	for _, in := range []*secretsmanager.ListSecretsInput{
		{MaxResults: aws.Int32(101)},
		{Filters: []types.Filter{{Key: "colour", Values: []string{"x"}}}},
		{Filters: []types.Filter{{Key: types.FilterNameStringTypeName, Values: slices.Repeat([]string{"x"}, 11)}}},
		{SortBy: "size"},
	} {
		_, err := f.client.ListSecrets(ctx, in)
		assert.Equal(t, "ValidationException", code(t, err))
	}
	_, err := f.client.ListSecrets(ctx, &secretsmanager.ListSecretsInput{NextToken: aws.String("garbage")})
	assert.Equal(t, "InvalidNextTokenException", code(t, err))
}

func TestBatchGetSecretValue(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	for i := range 5 {
		f.create(t, fmt.Sprintf("b/%d", i), fmt.Sprint(i))
	}
	_, err := f.client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String("b/4")})
	require.NoError(t, err)
	out, err := f.client.BatchGetSecretValue(ctx, &secretsmanager.BatchGetSecretValueInput{SecretIdList: []string{"b/0", "b/3", "b/4", "nope", "b/0"}})
	require.NoError(t, err)
	var got []string
	for _, v := range out.SecretValues {
		got = append(got, aws.ToString(v.Name)+"="+aws.ToString(v.SecretString))
		assert.Equal(t, []string{"AWSCURRENT"}, v.VersionStages)
	}
	assert.Equal(t, []string{"b/0=0", "b/3=3"}, got)
	require.Len(t, out.Errors, 2)
	assert.Equal(t, "InvalidRequestException", aws.ToString(out.Errors[0].ErrorCode))
	assert.Equal(t, "b/4", aws.ToString(out.Errors[0].SecretId))
	assert.Equal(t, "ResourceNotFoundException", aws.ToString(out.Errors[1].ErrorCode))

	var all []string
	in := &secretsmanager.BatchGetSecretValueInput{MaxResults: aws.Int32(2), Filters: []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{"b/"}}}}
	for p := secretsmanager.NewBatchGetSecretValuePaginator(f.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(page.SecretValues), 2)
		for _, v := range page.SecretValues {
			all = append(all, aws.ToString(v.Name))
		}
	}
	slices.Sort(all)
	assert.Equal(t, []string{"b/0", "b/1", "b/2", "b/3"}, all)

	for _, in := range []*secretsmanager.BatchGetSecretValueInput{
		{SecretIdList: []string{"b/0"}, Filters: []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{"b"}}}},
		{},
		{SecretIdList: []string{"b/0"}, MaxResults: aws.Int32(1)},
	} {
		_, err := f.client.BatchGetSecretValue(ctx, in)
		assert.Equal(t, "InvalidParameterException", code(t, err))
	}
	_, err = f.client.BatchGetSecretValue(ctx, &secretsmanager.BatchGetSecretValueInput{SecretIdList: slices.Repeat([]string{"x"}, 21)})
	assert.Equal(t, "ValidationException", code(t, err))
}

func TestTagsAndValidation(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	tagsOf := func() map[string]string {
		info, _ := f.srv.Secret("s")
		return info.Tags
	}
	tg := func(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }
	f.create(t, "s", "v", tg("a", "1"), tg("b", "2"))
	_, err := f.client.TagResource(ctx, &secretsmanager.TagResourceInput{SecretId: aws.String("s"), Tags: []types.Tag{tg("b", "3"), tg("c", "4")}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "1", "b": "3", "c": "4"}, tagsOf())
	_, err = f.client.UntagResource(ctx, &secretsmanager.UntagResourceInput{SecretId: aws.String("s"), TagKeys: []string{"a", "zz"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"b": "3", "c": "4"}, tagsOf())

	for _, c := range []struct {
		tags []types.Tag
		code string
	}{
		{[]types.Tag{tg("aws:x", "1")}, "InvalidParameterException"},
		{[]types.Tag{tg("a*", "1")}, "ValidationException"},
		{[]types.Tag{tg(strings.Repeat("k", 129), "1")}, "ValidationException"},
		{[]types.Tag{tg("k", strings.Repeat("v", 257))}, "ValidationException"},
		{[]types.Tag{tg("d", "1"), tg("d", "2")}, "InvalidParameterException"},
	} {
		_, err := f.client.TagResource(ctx, &secretsmanager.TagResourceInput{SecretId: aws.String("s"), Tags: c.tags})
		assert.Equal(t, c.code, code(t, err), "tags %v", c.tags)
	}
	var many []types.Tag
	for i := range 49 {
		many = append(many, tg(fmt.Sprintf("k%d", i), "v"))
	}
	_, err = f.client.TagResource(ctx, &secretsmanager.TagResourceInput{SecretId: aws.String("s"), Tags: many})
	assert.Equal(t, "ValidationException", code(t, err), "2 + 49 tags is over 50")
	assert.Equal(t, map[string]string{"b": "3", "c": "4"}, tagsOf(), "refused tag calls changed nothing")

	for _, c := range []struct {
		in   *secretsmanager.CreateSecretInput
		code string
	}{
		{&secretsmanager.CreateSecretInput{Name: aws.String("has space")}, "InvalidParameterException"},
		{&secretsmanager.CreateSecretInput{Name: aws.String(strings.Repeat("n", 513))}, "ValidationException"},
		{&secretsmanager.CreateSecretInput{Name: aws.String("both"), SecretString: aws.String("s"), SecretBinary: []byte("b")}, "InvalidParameterException"},
		{&secretsmanager.CreateSecretInput{Name: aws.String("big"), SecretString: aws.String(strings.Repeat("x", smmock.MaxSecretStringBytes+1))}, "ValidationException"},
	} {
		_, err := f.client.CreateSecret(ctx, c.in)
		assert.Equal(t, c.code, code(t, err), "CreateSecret %s", aws.ToString(c.in.Name)[:min(10, len(aws.ToString(c.in.Name)))])
	}
	_, err = f.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("s")})
	assert.Equal(t, "InvalidParameterException", code(t, err), "PutSecretValue needs a value")
	bin, err := f.client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("bin"), SecretBinary: []byte{0, 0xff}})
	require.NoError(t, err)
	got, err := f.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: bin.Name})
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0xff}, got.SecretBinary)
	assert.Nil(t, got.SecretString)
}

func TestThrottlingFaultsAndCounters(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	f.create(t, "s", "v")
	f.create(t, "other", "v")
	f.srv.ResetCounters()

	f.srv.SetThrottling(true)
	_, err := f.client.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String("s")})
	assert.Equal(t, "ThrottlingException", code(t, err))
	retrying := client(f.url, keyID, secretKey, 4)
	_, err = retrying.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String("s")})
	assert.Equal(t, "ThrottlingException", code(t, err))
	assert.Equal(t, int64(5), f.srv.Calls(smmock.OpDescribeSecret), "1 + 4 attempts, all throttled")
	f.srv.SetThrottling(false)

	f.srv.InjectFault(smmock.Fault{Op: smmock.OpDescribeSecret, Code: "ThrottlingException", Count: 3})
	_, err = retrying.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String("s")})
	require.NoError(t, err, "the SDK retries past 3 throttled attempts")
	assert.Equal(t, int64(9), f.srv.Calls(smmock.OpDescribeSecret))

	f.srv.InjectFault(smmock.Fault{Op: smmock.OpPutSecretValue, Count: 1, AfterApply: true})
	_, err = f.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("s"), SecretString: aws.String("w")})
	assert.Equal(t, "InternalServiceError", code(t, err))
	var re interface{ HTTPStatusCode() int }
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 500, re.HTTPStatusCode())
	assert.Equal(t, "w", f.value(t, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")}), "AfterApply performed the write")

	arn := aws.ToString(f.describe(t, "s").ARN)
	f.srv.InjectFault(smmock.Fault{Code: "AccessDeniedException", SecretID: "s"})
	for _, id := range []string{"s", arn} {
		_, err = f.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		assert.Equal(t, "AccessDeniedException", code(t, err), "a SecretID fault hits its secret, by name or ARN")
	}
	_, err = f.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("other")})
	require.NoError(t, err, "but no other secret")
	_, err = f.client.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	require.NoError(t, err, "nor a request naming no secret")
	f.srv.ClearFaults()

	f.srv.InjectFault(smmock.Fault{Code: "AccessDeniedException"})
	_, err = f.client.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	assert.Equal(t, "AccessDeniedException", code(t, err), "an Op-less fault hits every operation")
	f.srv.ClearFaults()
	_, err = f.client.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	require.NoError(t, err)

	calls := f.srv.AllCalls()
	assert.Equal(t, int64(1), calls[smmock.OpPutSecretValue])
	assert.Equal(t, int64(3), calls[smmock.OpListSecrets])
	assert.Equal(t, int64(1), f.srv.Writes(), "only PutSecretValue is a write")
	assert.True(t, smmock.IsWrite(smmock.OpUpdateSecretVersionStage))
	assert.False(t, smmock.IsWrite(smmock.OpBatchGetSecretValue))
}

func TestConcurrentRequests(t *testing.T) {
	f := newFixture(t, smmock.Options{})
	ctx := t.Context()
	f.create(t, "c", "0")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 5 {
				_, err := f.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("c"), SecretString: aws.String(fmt.Sprint(i, j))})
				assert.NoError(t, err)
				_, err = f.client.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	info, _ := f.srv.Secret("c")
	assert.Len(t, info.Versions, 41)
	stages := 0
	for _, v := range info.Versions {
		stages += len(v.Stages)
	}
	assert.Equal(t, 2, stages, "exactly one AWSCURRENT and one AWSPREVIOUS")
}
