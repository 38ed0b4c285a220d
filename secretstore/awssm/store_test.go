package awssm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/binarykey"
	"github.com/edgesecrets/edgesecrets/internal/storereader"
	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
)

func TestUnchangedPutIssuesNoPutSecretValue(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{Scope: "org"})
	labels := map[string]string{"team": "edge"}
	e.put(s, "db", d("user", "alice", "pass", "p1"), labels)
	before := e.srv.AllCalls()

	changed, err := s.Put(t.Context(), &secretstore.Secret{Name: "db", Data: d("pass", "p1", "user", "alice"), Labels: map[string]string{"team": "edge"}}, secretstore.PutOptions{})
	require.NoError(t, err)
	assert.False(t, changed)
	after := e.srv.AllCalls()
	for _, op := range smmock.Operations() {
		if smmock.IsWrite(op) {
			assert.Equal(t, before[op], after[op], "unchanged Put issued no %s", op)
		}
	}
	assert.Equal(t, before[smmock.OpDescribeSecret]+1, after[smmock.OpDescribeSecret], "unchanged Put describes once")
	assert.Equal(t, before[smmock.OpGetSecretValue]+1, after[smmock.OpGetSecretValue], "unchanged Put reads the value once")

	changed, err = s.Put(t.Context(), &secretstore.Secret{Name: "db", Data: d("user", "alice", "pass", "p2"), Labels: labels}, secretstore.PutOptions{})
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, after[smmock.OpPutSecretValue]+1, e.srv.Calls(smmock.OpPutSecretValue), "changed value: one PutSecretValue")
	assert.Equal(t, int64(0), e.srv.Calls(smmock.OpTagResource)+e.srv.Calls(smmock.OpUntagResource), "labels unchanged: no tag calls")
}

func TestValueEncoding(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{Scope: "org"})

	t.Run("text values are a plain JSON object", func(t *testing.T) {
		e.put(s, "text", d("user", "alice", "json", `{"a":"<b>"}`), nil)
		assert.JSONEq(t, `{"user":"alice","json":"{\"a\":\"<b>\"}"}`, e.secretString("org/text"))
		assert.NotContains(t, e.secretString("org/text"), binarykey.Marker)
	})
	t.Run("non-UTF-8 values are base64 and listed", func(t *testing.T) {
		bin := []byte{0xff, 0x00, 0xfe, 'x'}
		e.put(s, "bin", edgesecrets.Data{"key": bin, "name": []byte("ok")}, nil)
		var raw map[string]any
		require.NoError(t, json.Unmarshal([]byte(e.secretString("org/bin")), &raw))
		assert.Equal(t, map[string]any{"key": "/wD+eA==", "name": "ok", binarykey.Marker: []any{"key"}}, raw)
		got, err := s.Get(t.Context(), "bin")
		require.NoError(t, err)
		assert.Equal(t, bin, []byte(got.Data["key"]))
		assert.Equal(t, []string{"key", "name"}, got.Data.Keys(), "the reserved member is not data")
	})
	t.Run("reserved key rejected", func(t *testing.T) {
		writes := e.srv.Writes()
		_, err := s.Put(t.Context(), &secretstore.Secret{Name: "r", Data: d(binarykey.Marker, "x")}, secretstore.PutOptions{})
		require.ErrorIs(t, err, edgesecrets.ErrInvalid)
		assert.Contains(t, err.Error(), binarykey.Marker)
		assert.Equal(t, writes, e.srv.Writes())
	})
	t.Run("too large rejected without a write", func(t *testing.T) {
		writes := e.srv.Writes()
		_, err := s.Put(t.Context(), &secretstore.Secret{Name: "big", Data: edgesecrets.Data{"k": bytes.Repeat([]byte("x"), 65536)}}, secretstore.PutOptions{})
		require.ErrorIs(t, err, edgesecrets.ErrInvalid)
		assert.Contains(t, err.Error(), "65536")
		assert.Equal(t, writes, e.srv.Writes())
	})
	t.Run("foreign JSON values", func(t *testing.T) {
		_, err := e.client.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String("org/foreign"), SecretString: aws.String(`{"port": 5432, "tls": true, "opts": {"a": [1, 2]}, "host": "db"}`)})
		require.NoError(t, err)
		got, err := s.Get(t.Context(), "foreign")
		require.NoError(t, err)
		assert.Equal(t, d("port", "5432", "tls", "true", "opts", `{"a":[1,2]}`, "host", "db"), got.Data)
	})
	t.Run("not a JSON object", func(t *testing.T) {
		const plain = "hunter2-plain-text-secret"
		_, err := e.client.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String("org/plain"), SecretString: aws.String(plain)})
		require.NoError(t, err)
		_, err = s.Get(t.Context(), "plain")
		require.ErrorIs(t, err, edgesecrets.ErrInvalid)
		assert.NotContains(t, err.Error(), "hunter2")
		_, err = e.client.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String("org/blob"), SecretBinary: []byte("hunter2")})
		require.NoError(t, err)
		_, err = s.Get(t.Context(), "blob")
		require.ErrorIs(t, err, edgesecrets.ErrInvalid)
		assert.Contains(t, err.Error(), "SecretBinary")

		changed, err := s.Put(t.Context(), &secretstore.Secret{Name: "plain", Data: d("k", "v")}, secretstore.PutOptions{})
		require.NoError(t, err, "Put replaces a secret that is not a JSON object")
		assert.True(t, changed)
		assert.JSONEq(t, `{"k":"v"}`, e.secretString("org/plain"))
	})
}

func TestPendingDeletion(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{Scope: "org", RecoveryWindowDays: 7})
	ctx := t.Context()
	e.put(s, "app", d("k", "old"), map[string]string{"old": "1", "keep": "x"})
	e.put(s, "other", d("k", "v"), nil)
	oldVersion := e.info("org/app")

	require.NoError(t, s.Delete(ctx, "app"))
	info := e.info("org/app")
	assert.Equal(t, e.clock.Now(), info.DeletedDate)
	assert.Equal(t, e.clock.Now().Add(7*24*time.Hour), info.DeletionDate, "recovery window of 7 days was sent")

	_, err := s.Get(ctx, "app")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "Get of a secret pending deletion")
	assert.Contains(t, err.Error(), "scheduled for deletion")
	_, err = s.Stat(ctx, "app")
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "Stat of a secret pending deletion")
	names, err := s.List(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"other"}, names, "List omits secrets pending deletion")
	batch, err := s.GetBatch(ctx, []string{"app", "other"})
	require.NoError(t, err)
	assert.Equal(t, []string{"other"}, slices.Sorted(maps.Keys(batch)), "GetBatch omits secrets pending deletion")
	require.NoError(t, s.Delete(ctx, "app"), "deleting a secret pending deletion again")

	t.Run("compare-and-set sees no secret", func(t *testing.T) {
		cur, _ := oldVersion.Current()
		_, err := s.Put(ctx, &secretstore.Secret{Name: "app", Data: d("k", "x")}, secretstore.PutOptions{IfVersion: cur.ID})
		require.ErrorIs(t, err, edgesecrets.ErrConflict)
		assert.False(t, e.info("org/app").DeletedDate.IsZero(), "still pending deletion")
	})
	t.Run("Put restores and replaces", func(t *testing.T) {
		changed, err := s.Put(ctx, &secretstore.Secret{Name: "app", Data: d("k", "new"), Labels: map[string]string{"keep": "x", "new": "2"}}, secretstore.PutOptions{CreateOnly: true})
		require.NoError(t, err, "create-only Put of a secret pending deletion")
		assert.True(t, changed)
		assert.Equal(t, int64(1), e.srv.Calls(smmock.OpRestoreSecret))
		info := e.info("org/app")
		assert.True(t, info.DeletedDate.IsZero(), "restored")
		assert.Equal(t, map[string]string{"keep": "x", "new": "2"}, info.Tags, "old labels replaced")
		got, err := s.Get(ctx, "app")
		require.NoError(t, err)
		assert.Equal(t, "new", string(got.Data["k"]))
	})
	t.Run("unchanged data still counts as a change", func(t *testing.T) {
		require.NoError(t, s.Delete(ctx, "app"))
		puts := e.srv.Calls(smmock.OpPutSecretValue)
		changed, err := s.Put(ctx, &secretstore.Secret{Name: "app", Data: d("k", "new"), Labels: map[string]string{"keep": "x", "new": "2"}}, secretstore.PutOptions{})
		require.NoError(t, err)
		assert.True(t, changed, "the secret was missing, now it exists")
		assert.Equal(t, puts, e.srv.Calls(smmock.OpPutSecretValue), "restoring brought back the same value: no new version")
	})
	t.Run("a failed Put leaves it deleted", func(t *testing.T) {
		require.NoError(t, s.Delete(ctx, "app"))
		e.srv.InjectFault(smmock.Fault{Op: smmock.OpPutSecretValue, Code: "AccessDeniedException", Count: 1})
		_, err := s.Put(ctx, &secretstore.Secret{Name: "app", Data: d("k", "newer")}, secretstore.PutOptions{})
		require.ErrorIs(t, err, edgesecrets.ErrPermission)
		assert.False(t, e.info("org/app").DeletedDate.IsZero(), "scheduled for deletion again, so the old value is not back")
		_, err = s.Get(ctx, "app")
		require.ErrorIs(t, err, edgesecrets.ErrNotFound)
	})
	t.Run("purged after the window", func(t *testing.T) {
		require.NoError(t, s.Delete(ctx, "other"))
		e.clock.Advance(7*24*time.Hour + time.Second)
		_, ok := e.srv.Secret("org/other")
		require.False(t, ok, "purged")
		creates := e.srv.Calls(smmock.OpCreateSecret)
		e.put(s, "other", d("k", "fresh"), nil)
		assert.Equal(t, creates+1, e.srv.Calls(smmock.OpCreateSecret), "a purged name is created anew")
	})
}

func TestForceDelete(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{ForceDelete: true})
	e.put(s, "gone", d("k", "v"), nil)
	require.NoError(t, s.Delete(t.Context(), "gone"))
	_, ok := e.srv.Secret("gone")
	assert.False(t, ok, "forced deletion removes the secret at once")
	require.NoError(t, s.Delete(t.Context(), "gone"), "idempotent")
}

func TestRecoveryWindowValidation(t *testing.T) {
	e := newEnv(t)
	cfg := e.awsConfig()
	for _, c := range []struct {
		name string
		opts awssm.Options
		want []string
	}{
		{"too short", awssm.Options{RecoveryWindowDays: 6}, []string{"recoveryWindowDays 6 is outside AWS's 7..30 days"}},
		{"too long", awssm.Options{RecoveryWindowDays: 31}, []string{"recoveryWindowDays 31 is outside AWS's 7..30 days"}},
		{"with force", awssm.Options{RecoveryWindowDays: 7, ForceDelete: true}, []string{"forceDelete and recoveryWindowDays exclude each other"}},
		{"every problem", awssm.Options{RecoveryWindowDays: 3, ForceDelete: true, Scope: "bad scope", ListPageSize: 101}, []string{
			`scope "bad scope": AWS secret names allow only ASCII letters, digits and / _ + = . @ -, not ' '`,
			"recoveryWindowDays 3 is outside AWS's 7..30 days",
			"forceDelete and recoveryWindowDays exclude each other",
			"list page size 101 is outside 1..100",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.AWSConfig = &cfg
			_, err := awssm.New(t.Context(), c.opts)
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			var ce *secretstore.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, c.want, ce.Problems)
		})
	}
	for _, days := range []int{7, 30} {
		s := e.store(awssm.Options{RecoveryWindowDays: days})
		name := fmt.Sprintf("w%d", days)
		e.put(s, name, d("k", "v"), nil)
		require.NoError(t, s.Delete(t.Context(), name))
		assert.Equal(t, e.clock.Now().Add(time.Duration(days)*24*time.Hour), e.info(name).DeletionDate, "window %d", days)
	}
}

func TestTagsRoundTrip(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{Scope: "org"})
	ctx := t.Context()
	labels := map[string]string{"team": "edge", "cost center": "42", "path": "a/b:c=d+e-f@g.h_i", "empty": "", "ünï": "çødé"}
	e.put(s, "tagged", d("k", "v"), labels)
	assert.Equal(t, labels, e.info("org/tagged").Tags, "labels are the secret's tags")
	assert.Equal(t, int64(0), e.srv.Calls(smmock.OpTagResource), "a new secret gets its tags from CreateSecret")
	md, err := s.Stat(ctx, "tagged")
	require.NoError(t, err)
	assert.Equal(t, labels, md.Labels)
	got, err := s.Get(ctx, "tagged")
	require.NoError(t, err)
	assert.Equal(t, labels, got.Labels)

	version := md.Version
	e.put(s, "tagged", d("k", "v"), map[string]string{"team": "core", "new": "1", "empty": ""})
	assert.Equal(t, map[string]string{"team": "core", "new": "1", "empty": ""}, e.info("org/tagged").Tags)
	assert.Equal(t, int64(1), e.srv.Calls(smmock.OpTagResource), "changed and added labels in one TagResource")
	assert.Equal(t, int64(1), e.srv.Calls(smmock.OpUntagResource), "removed labels in one UntagResource")
	assert.Equal(t, int64(0), e.srv.Calls(smmock.OpPutSecretValue), "a label change writes no value")
	md, err = s.Stat(ctx, "tagged")
	require.NoError(t, err)
	assert.Equal(t, version, md.Version, "tags are not versioned")

	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"aws:x": "1"}, `label key "aws:x" uses the reserved aws: prefix`},
		{map[string]string{"AWS:x": "1"}, "reserved aws: prefix"},
		{map[string]string{"a*b": "1"}, `label key "a*b" has characters AWS tags do not allow`},
		{map[string]string{"k": "semi;colon"}, `value of label "k" has characters AWS tags do not allow`},
		{map[string]string{strings.Repeat("k", 129): "1"}, "longer than 128 characters"},
		{map[string]string{"k": strings.Repeat("v", 257)}, `value of label "k" is longer than 256 characters`},
		{manyLabels(51), "51 labels, AWS allows at most 50 tags"},
	} {
		writes := e.srv.Writes()
		_, err := s.Put(ctx, &secretstore.Secret{Name: "tagged", Data: d("k", "changed"), Labels: c.labels}, secretstore.PutOptions{})
		require.ErrorIs(t, err, edgesecrets.ErrInvalid, "labels %v", c.labels)
		assert.Contains(t, err.Error(), c.want)
		assert.Equal(t, writes, e.srv.Writes(), "rejected labels wrote nothing")
	}
	e.put(s, "fifty", d("k", "v"), manyLabels(50))
	assert.Len(t, e.info("org/fifty").Tags, 50)
}

func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("l%02d", i)] = "v"
	}
	return m
}

func TestListPaging(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{Scope: "org", ListPageSize: 2})
	ctx := t.Context()
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("svc/s%d", i)
		want = append(want, name)
		e.put(s, name, d("k", "v"), nil)
	}
	e.put(s, "svcx", d("k", "v"), nil)
	for _, foreign := range []string{"orgx/svc/s9", "other/org/svc/s8", "org"} {
		_, err := e.client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(foreign), SecretString: aws.String("{}")})
		require.NoError(t, err)
	}
	e.srv.ResetCounters()
	got, err := s.List(ctx, "svc/")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, int64(4), e.srv.Calls(smmock.OpListSecrets), "7 secrets in pages of 2 take 4 calls")

	all, err := s.List(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, append(want, "svcx"), all, "only names inside the scope")

	_, err = s.List(ctx, "bad prefix/")
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
}

func TestThrottling(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{})
	e.put(s, "x", d("k", "v"), nil)
	ctx := t.Context()

	t.Run("retried until it passes", func(t *testing.T) {
		e.srv.ResetCounters()
		e.srv.InjectFault(smmock.Fault{Op: smmock.OpDescribeSecret, Code: "ThrottlingException", Count: testAttempts - 1})
		_, err := s.Stat(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, int64(testAttempts), e.srv.Calls(smmock.OpDescribeSecret), "throttled twice, third attempt served")
	})
	t.Run("surfaced as ErrUnavailable after the retries", func(t *testing.T) {
		e.srv.ResetCounters()
		e.srv.SetThrottling(true)
		defer e.srv.SetThrottling(false)
		_, err := s.Get(ctx, "x")
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
		assert.Equal(t, int64(testAttempts), e.srv.Calls(smmock.OpDescribeSecret), "the store retried")
		var ae *awssm.APIError
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, "ThrottlingException", ae.Code)
		assert.Zero(t, ae.Attempts, "the SDK made one attempt per call")
		assert.NotEmpty(t, ae.RequestID, "the request id is kept for support")
		assert.NotContains(t, err.Error(), ae.RequestID, "but not in the message")
		assert.NotContains(t, err.Error(), "Rate exceeded", "AWS's message is not in the error")
		assert.Equal(t, `secretstore: get "x": unavailable: secretsmanager DescribeSecret: ThrottlingException (HTTP 400) (attempt 3)`, err.Error())
	})
}

func TestErrorMapping(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{})
	e.put(s, "x", d("k", "top-secret-value"), nil)
	for _, c := range []struct {
		code     string
		status   int
		kind     error
		attempts int64
	}{
		{"AccessDeniedException", 400, edgesecrets.ErrPermission, 1},
		{"ExpiredTokenException", 400, edgesecrets.ErrPermission, 1},
		{"InternalServiceError", 500, edgesecrets.ErrUnavailable, testAttempts},
		{"ServiceUnavailable", 503, edgesecrets.ErrUnavailable, testAttempts},
		{"DecryptionFailure", 400, edgesecrets.ErrUnavailable, testAttempts},
		{"SomethingNew", 400, edgesecrets.ErrUnavailable, testAttempts},
		{"SomethingNew", 403, edgesecrets.ErrPermission, 1},
		{"InvalidParameterException", 400, edgesecrets.ErrInvalid, 1},
	} {
		t.Run(fmt.Sprintf("%s %d", c.code, c.status), func(t *testing.T) {
			e.srv.ClearFaults()
			e.srv.ResetCounters()
			e.srv.InjectFault(smmock.Fault{Op: smmock.OpGetSecretValue, Code: c.code, Status: c.status})
			_, err := s.Get(t.Context(), "x")
			require.ErrorIs(t, err, c.kind)
			assert.Equal(t, c.attempts, e.srv.Calls(smmock.OpGetSecretValue), "attempts")
			assert.Contains(t, err.Error(), c.code)
			assert.NotContains(t, err.Error(), "injected fault", "AWS's message is left out")
			assert.NotContains(t, err.Error(), "top-secret-value")
		})
	}
	e.srv.ClearFaults()

	t.Run("wrong secret key", func(t *testing.T) {
		cfg := e.awsConfig()
		cfg.Credentials = credentials.NewStaticCredentialsProvider(testKeyID, "wrong", "")
		bad, err := awssm.New(t.Context(), awssm.Options{AWSConfig: &cfg})
		require.NoError(t, err)
		_, err = bad.Get(t.Context(), "x")
		require.ErrorIs(t, err, edgesecrets.ErrPermission)
		assert.Contains(t, err.Error(), "InvalidSignatureException")
	})
	t.Run("unknown access key", func(t *testing.T) {
		cfg := e.awsConfig()
		cfg.Credentials = credentials.NewStaticCredentialsProvider("AKIDUNKNOWN", testSecretKey, "")
		bad, err := awssm.New(t.Context(), awssm.Options{AWSConfig: &cfg})
		require.NoError(t, err)
		_, err = bad.Stat(t.Context(), "x")
		require.ErrorIs(t, err, edgesecrets.ErrPermission)
		assert.Contains(t, err.Error(), "UnrecognizedClientException")
	})
	t.Run("endpoint down", func(t *testing.T) {
		ts := httptest.NewServer(e.srv)
		cfg := e.awsConfig()
		cfg.BaseEndpoint = aws.String(ts.URL)
		ts.Close()
		down, err := awssm.New(t.Context(), awssm.Options{AWSConfig: &cfg})
		require.NoError(t, err)
		_, err = down.Get(t.Context(), "x")
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
		assert.Contains(t, err.Error(), "network error")
	})
	t.Run("closed store", func(t *testing.T) {
		closed := e.store(awssm.Options{})
		require.NoError(t, closed.Close())
		_, err := closed.Get(t.Context(), "x")
		require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	})
}

func TestIdempotentRetriedPut(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{})
	ctx := t.Context()

	t.Run("PutSecretValue response lost", func(t *testing.T) {
		e.put(s, "p", d("k", "1"), nil)
		e.srv.ResetCounters()
		e.srv.InjectFault(smmock.Fault{Op: smmock.OpPutSecretValue, Code: "InternalServiceError", Count: 1, AfterApply: true})
		changed, err := s.Put(ctx, &secretstore.Secret{Name: "p", Data: d("k", "2")}, secretstore.PutOptions{})
		require.NoError(t, err, "the store's next attempt reads what its lost attempt wrote")
		assert.True(t, changed, "the write landed")
		assert.Equal(t, int64(1), e.srv.Calls(smmock.OpPutSecretValue), "sent once")
		info := e.info("p")
		require.Len(t, info.Versions, 2, "but only one new version exists")
		assert.Equal(t, []string{"AWSPREVIOUS"}, info.Versions[0].Stages)
		assert.Equal(t, []string{"AWSCURRENT"}, info.Versions[1].Stages)
		got, err := s.Get(ctx, "p")
		require.NoError(t, err)
		assert.Equal(t, "2", string(got.Data["k"]))
	})
	t.Run("CreateSecret response lost", func(t *testing.T) {
		e.srv.ResetCounters()
		e.srv.InjectFault(smmock.Fault{Op: smmock.OpCreateSecret, Code: "InternalServiceError", Count: 1, AfterApply: true})
		changed, err := s.Put(ctx, &secretstore.Secret{Name: "c", Data: d("k", "1"), Labels: map[string]string{"a": "b"}}, secretstore.PutOptions{CreateOnly: true})
		require.NoError(t, err, "the write sent again is recognised by its token rather than failing as ResourceExists")
		assert.True(t, changed)
		assert.Equal(t, int64(1), e.srv.Calls(smmock.OpCreateSecret), "the resent write saw its own version and created nothing")
		assert.Len(t, e.info("c").Versions, 1)
	})
	t.Run("compare-and-set response lost", func(t *testing.T) {
		e.put(s, "cas", d("k", "1"), nil)
		base, err := s.Stat(ctx, "cas")
		require.NoError(t, err)
		e.srv.ResetCounters()
		e.srv.InjectFault(smmock.Fault{Op: smmock.OpUpdateSecretVersionStage, Code: "InternalServiceError", Count: 1, AfterApply: true})
		changed, err := s.Put(ctx, &secretstore.Secret{Name: "cas", Data: d("k", "2")}, secretstore.PutOptions{IfVersion: base.Version})
		require.NoError(t, err, "the resent compare-and-set finds AWSCURRENT already on its own version")
		assert.True(t, changed)
		got, err := s.Get(ctx, "cas")
		require.NoError(t, err)
		assert.Equal(t, "2", string(got.Data["k"]))
		assert.Len(t, e.info("cas").Versions, 2, "one new version")
	})
}

func TestCompareAndSet(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	// A writer that slips in between the store's read and its stage move.
	api := &interleaving{API: e.client}
	s, err := awssm.New(ctx, awssm.Options{Client: api})
	require.NoError(t, err)
	e.put(s, "cas", d("v", "1"), nil)
	base, err := s.Stat(ctx, "cas")
	require.NoError(t, err)

	api.beforeMove = func() {
		_, err := e.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("cas"), SecretString: aws.String(`{"v":"other"}`)})
		require.NoError(t, err)
	}
	_, err = s.Put(ctx, &secretstore.Secret{Name: "cas", Data: d("v", "2")}, secretstore.PutOptions{IfVersion: base.Version})
	require.ErrorIs(t, err, edgesecrets.ErrConflict, "AWSCURRENT moved between read and write")
	got, err := s.Get(ctx, "cas")
	require.NoError(t, err)
	assert.Equal(t, "other", string(got.Data["v"]), "the losing write is not current")
	for _, v := range e.info("cas").Versions {
		if !slices.Contains(v.Stages, "AWSCURRENT") && !slices.Contains(v.Stages, "AWSPREVIOUS") {
			assert.Empty(t, v.Stages, "the losing version is left deprecated")
		}
	}

	cur, err := s.Stat(ctx, "cas")
	require.NoError(t, err)
	e.srv.ResetCounters()
	changed, err := s.Put(ctx, &secretstore.Secret{Name: "cas", Data: d("v", "3")}, secretstore.PutOptions{IfVersion: cur.Version})
	require.NoError(t, err)
	assert.True(t, changed)
	now, ok := e.info("cas").Current()
	require.True(t, ok)
	assert.Contains(t, now.Stages, "EDGESECRETS_PENDING", "written through the pending stage")
	assert.Equal(t, int64(1), e.srv.Calls(smmock.OpUpdateSecretVersionStage), "one stage move")

	t.Run("labels only", func(t *testing.T) {
		cur, err := s.Stat(ctx, "cas")
		require.NoError(t, err)
		changed, err := s.Put(ctx, &secretstore.Secret{Name: "cas", Data: d("v", "3"), Labels: map[string]string{"a": "b"}}, secretstore.PutOptions{IfVersion: cur.Version})
		require.NoError(t, err)
		assert.True(t, changed)
		_, err = s.Put(ctx, &secretstore.Secret{Name: "cas", Data: d("v", "3")}, secretstore.PutOptions{IfVersion: base.Version})
		require.ErrorIs(t, err, edgesecrets.ErrConflict, "a stale version is refused for a label change too")
	})
}

type interleaving struct {
	awssm.API
	beforeMove func()
}

func (i *interleaving) UpdateSecretVersionStage(ctx context.Context, in *secretsmanager.UpdateSecretVersionStageInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.UpdateSecretVersionStageOutput, error) {
	if f := i.beforeMove; f != nil && aws.ToString(in.VersionStage) == "AWSCURRENT" {
		i.beforeMove = nil
		f()
	}
	return i.API.UpdateSecretVersionStage(ctx, in, opts...)
}

func TestGetBatch(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{Scope: "org", RecoveryWindowDays: 7})
	ctx := t.Context()
	var names []string
	for i := range 45 {
		name := fmt.Sprintf("b/%02d", i)
		names = append(names, name)
		e.put(s, name, d("i", fmt.Sprint(i)), map[string]string{"n": fmt.Sprint(i)})
	}
	require.NoError(t, s.Delete(ctx, "b/07"))
	e.srv.ResetCounters()
	got, err := s.GetBatch(ctx, append(names, "b/missing", "b/00"))
	require.NoError(t, err)
	assert.Equal(t, int64(3), e.srv.Calls(smmock.OpBatchGetSecretValue), "47 names in chunks of 20")
	assert.Equal(t, int64(0), e.srv.Calls(smmock.OpGetSecretValue))
	assert.Len(t, got, 44, "missing and pending-deletion names are absent")
	assert.NotContains(t, got, "b/07")
	for i, name := range names {
		if i == 7 {
			continue
		}
		sec := got[name]
		require.NotNil(t, sec, name)
		assert.Equal(t, name, sec.Name)
		assert.Equal(t, fmt.Sprint(i), string(sec.Data["i"]))
		assert.Equal(t, map[string]string{"n": fmt.Sprint(i)}, sec.Labels)
		md, err := s.Stat(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, md.Version, sec.Version)
		assert.Equal(t, md.UpdatedAt, sec.UpdatedAt)
	}

	e.srv.InjectFault(smmock.Fault{Op: smmock.OpBatchGetSecretValue, Code: "AccessDeniedException"})
	_, err = s.GetBatch(ctx, names[:3])
	require.ErrorIs(t, err, edgesecrets.ErrPermission)
	e.srv.ClearFaults()

	_, err = s.GetBatch(ctx, []string{"ok", "../escape"})
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)

	reader := storereader.New(s, storereader.Options{TTL: time.Hour})
	e.srv.ResetCounters()
	for range 3 {
		got, err := reader.GetBatch(ctx, names[:5])
		require.NoError(t, err)
		assert.Len(t, got, 5)
	}
	assert.Equal(t, int64(1), e.srv.Calls(smmock.OpBatchGetSecretValue), "the coalescing reader serves repeats from memory")
}

func TestOpenFromConfig(t *testing.T) {
	e := newEnv(t)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	raw := fmt.Sprintf(`{"type":"awssm","defaultScope":"edge/org","awssm":{"region":"us-east-1","endpoint":%q,
		"accessKeyId":%q,"secretAccessKey":%q,"recoveryWindowDays":7,"maxAttempts":2,"maxBackoff":"1ms"}}`, e.url, testKeyID, testSecretKey)
	cfg, err := secretstore.ParseConfig(strings.NewReader(raw))
	require.NoError(t, err)
	st, err := secretstore.Open(t.Context(), cfg, secretstore.OpenOptions{})
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Put(t.Context(), &secretstore.Secret{Name: "db", Data: d("k", "v")}, secretstore.PutOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"edge/org/db"}, e.srv.Names(), "defaultScope is the name prefix")
	require.NoError(t, st.Delete(t.Context(), "db"))
	assert.Equal(t, e.clock.Now().Add(7*24*time.Hour), e.info("edge/org/db").DeletionDate)

	e.srv.ResetCounters()
	e.srv.SetThrottling(true)
	_, err = st.Stat(t.Context(), "db")
	require.ErrorIs(t, err, edgesecrets.ErrUnavailable)
	assert.Equal(t, int64(2), e.srv.Calls(smmock.OpDescribeSecret), "maxAttempts reaches the SDK")
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []struct {
		name, json string
		want       []string
	}{
		{"minimal", `{"type":"awssm"}`, nil},
		{"full", `{"type":"awssm","defaultScope":"a/b","awssm":{"region":"eu-west-1","endpoint":"https://sm.example","profile":"p","recoveryWindowDays":30,"kmsKeyId":"alias/x","maxAttempts":5,"maxBackoff":"2s"}}`, nil},
		{"every problem", `{"type":"awssm","defaultScope":"has space","awssm":{"region":"EU West","endpoint":"localhost:4566",
			"profile":"p","accessKeyId":"AKID","sessionToken":"tok","recoveryWindowDays":1,"forceDelete":true,"maxAttempts":-1,"maxBackoff":"soon"}}`, []string{
			`awssm: region "EU West" is not a region name (lowercase letters, digits and hyphens, such as us-east-1)`,
			"awssm: endpoint must be an absolute http or https URL",
			"awssm: accessKeyId and secretAccessKey must be given together",
			"awssm: profile and static credentials exclude each other",
			"awssm: recoveryWindowDays 1 is outside AWS's 7..30 days",
			"awssm: forceDelete and recoveryWindowDays exclude each other",
			"awssm: maxAttempts -1 is outside 1..20 (0 means the default of 3)",
			`awssm: maxBackoff "soon" is not a positive duration such as 2s`,
			"defaultScope: AWS secret names allow only ASCII letters, digits and / _ + = . @ -, not ' '",
		}},
		{"session token alone", `{"type":"awssm","awssm":{"sessionToken":"t"}}`, []string{"awssm: sessionToken needs accessKeyId and secretAccessKey"}},
		{"unknown field", `{"type":"awssm","awssm":{"namePrefix":"x"}}`, []string{`awssm: unknown field "namePrefix"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := secretstore.ParseConfig(strings.NewReader(c.json))
			if c.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			var ce *secretstore.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, c.want, ce.Problems)
			assert.NotContains(t, err.Error(), "tok", "credentials are never quoted")
		})
	}
}

func TestLogsHoldNoValues(t *testing.T) {
	e := newEnv(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := e.store(awssm.Options{Logger: log, RecoveryWindowDays: 7})
	ctx := t.Context()
	const value = "canary-value-8d1f"
	e.put(s, "a", d("k", value), nil)
	require.NoError(t, s.Delete(ctx, "a"))
	e.put(s, "a", d("k", value+"2"), nil)
	e.srv.InjectFault(smmock.Fault{Code: "AccessDeniedException"})
	_, err := s.Get(ctx, "a")
	require.ErrorIs(t, err, edgesecrets.ErrPermission)
	_, err = s.Put(ctx, &secretstore.Secret{Name: "a", Data: d("k", value+"3")}, secretstore.PutOptions{})
	require.Error(t, err)
	require.NotEmpty(t, buf.String(), "failures are logged")
	assert.Contains(t, buf.String(), "AccessDeniedException")
	assert.NotContains(t, buf.String(), "canary-value")
	assert.NotContains(t, err.Error(), "canary-value")
}

// TestAPIErrorReachable: callers reach the AWS details with errors.As.
func TestAPIErrorReachable(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &secretstore.Error{Op: "get", Name: "x", Kind: edgesecrets.ErrUnavailable, Err: &awssm.APIError{Operation: "GetSecretValue", Code: "ThrottlingException", StatusCode: 400, Attempts: 3, RequestID: "rid"}})
	var ae *awssm.APIError
	require.True(t, errors.As(err, &ae))
	assert.Equal(t, "secretsmanager GetSecretValue: ThrottlingException (HTTP 400) after 3 attempts", ae.Error())
}
