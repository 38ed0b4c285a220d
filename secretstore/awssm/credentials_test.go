package awssm_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/storewatch"
	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
)

// listRecorder is an awssm.API that remembers the ListSecrets inputs.
type listRecorder struct {
	awssm.API
	mu    sync.Mutex
	lists []*secretsmanager.ListSecretsInput
}

func (r *listRecorder) ListSecrets(ctx context.Context, in *secretsmanager.ListSecretsInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.ListSecretsOutput, error) {
	r.mu.Lock()
	r.lists = append(r.lists, in)
	r.mu.Unlock()
	return r.API.ListSecrets(ctx, in, opts...)
}

// The check is one ListSecrets call reading at most one entry, filtered on
// the scope, so it needs no IAM action a reading agbot lacks and costs one
// small request.
func TestCheckCredentialsIsOneSmallListSecrets(t *testing.T) {
	for _, scope := range []string{"", "org1/edge"} {
		t.Run("scope="+scope, func(t *testing.T) {
			e := newEnv(t)
			rec := &listRecorder{API: e.client}
			s, err := awssm.New(t.Context(), awssm.Options{Client: rec, Scope: scope})
			require.NoError(t, err)
			e.put(s, "a", d("k", "v"), nil)
			e.put(s, "b", d("k", "v"), nil)
			e.srv.ResetCounters()

			require.NoError(t, s.CheckCredentials(t.Context()))
			assert.Equal(t, map[string]int64{smmock.OpListSecrets: 1}, e.srv.AllCalls(), "one ListSecrets, nothing else")
			require.Len(t, rec.lists, 1)
			in := rec.lists[0]
			assert.Equal(t, int32(1), aws.ToInt32(in.MaxResults))
			assert.Nil(t, in.NextToken)
			if scope == "" {
				assert.Empty(t, in.Filters)
				return
			}
			require.Len(t, in.Filters, 1)
			assert.Equal(t, "name", string(in.Filters[0].Key))
			assert.Equal(t, []string{scope + "/"}, in.Filters[0].Values)
		})
	}
}

// What the check says about the agbot's own credentials, against the
// wire-level endpoint: spells of AccessDenied or expired tokens on every
// call are ErrPermission; a denial of one secret is not the credentials'
// fault; an endpoint that does not answer cannot tell.
func TestCheckCredentials(t *testing.T) {
	cases := []struct {
		name  string
		fault *smmock.Fault
		creds aws.CredentialsProvider
		down  bool
		want  error // nil: accepted
		code  string
	}{
		{name: "accepted"},
		{name: "AccessDenied on every call", fault: &smmock.Fault{Code: "AccessDeniedException"}, want: edgesecrets.ErrPermission, code: "AccessDeniedException"},
		{name: "expired session token", fault: &smmock.Fault{Code: "ExpiredTokenException"}, want: edgesecrets.ErrPermission, code: "ExpiredTokenException"},
		{name: "unrecognized client", creds: credentials.NewStaticCredentialsProvider("AKIDUNKNOWN", testSecretKey, ""), want: edgesecrets.ErrPermission, code: "UnrecognizedClientException"},
		{name: "wrong secret key", creds: credentials.NewStaticCredentialsProvider(testKeyID, "wrong", ""), want: edgesecrets.ErrPermission, code: "InvalidSignatureException"},
		{name: "one secret denied by its resource policy", fault: &smmock.Fault{Code: "AccessDeniedException", SecretID: "a"}},
		{name: "throttled past the retries", fault: &smmock.Fault{Code: "ThrottlingException"}, want: edgesecrets.ErrUnavailable, code: "ThrottlingException"},
		{name: "server errors", fault: &smmock.Fault{Code: "InternalServiceError"}, want: edgesecrets.ErrUnavailable, code: "InternalServiceError"},
		{name: "a refusal that says nothing of the credentials", fault: &smmock.Fault{Code: "InvalidParameterException"}, want: edgesecrets.ErrUnavailable, code: "InvalidParameterException"},
		{name: "endpoint down", down: true, want: edgesecrets.ErrUnavailable, code: "network error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.awsConfig()
			if c.creds != nil {
				cfg.Credentials = c.creds
			}
			if c.down {
				ts := httptest.NewServer(e.srv)
				ts.Close()
				cfg.BaseEndpoint = aws.String(ts.URL)
			}
			s, err := awssm.New(t.Context(), awssm.Options{AWSConfig: &cfg})
			require.NoError(t, err)
			if c.fault != nil {
				e.srv.InjectFault(*c.fault)
			}
			err = s.CheckCredentials(t.Context())
			if c.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, c.want)
			assert.Equal(t, c.want, edgesecrets.KindOf(err), "one kind only")
			assert.Contains(t, err.Error(), "check-credentials")
			assert.Contains(t, err.Error(), c.code)
			assert.NotContains(t, err.Error(), testSecretKey)
		})
	}
	t.Run("closed store", func(t *testing.T) {
		e := newEnv(t)
		s := e.store(awssm.Options{})
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.CheckCredentials(t.Context()), edgesecrets.ErrUnavailable)
	})
}

// A spell of AccessDenied on every call, seen by a watcher: every name
// reads Forbidden and the cycle shows a store-wide failure, not revoked
// secrets; when the spell ends the names are back and the check passes.
// A denial of one secret only shows that name Forbidden. Reads denied
// while the listing works (an identity denied DescribeSecret and
// GetSecretValue, but not ListSecrets) are a store-wide failure too:
// every name asked about alone is refused, the others only listed.
func TestWatcherTellsAccessDeniedSpellFromOneDeniedSecret(t *testing.T) {
	e := newEnv(t)
	s := e.store(awssm.Options{Scope: "org1"})
	names := []string{"a", "b", "c", "d", "e"}
	for _, n := range names {
		e.put(s, n, d("k", "v-"+n), nil)
	}
	w, err := storewatch.New(s, storewatch.Options{})
	require.NoError(t, err)
	require.NoError(t, w.Watch(names...))
	ctx := t.Context()
	require.Equal(t, 5, w.Poll(ctx).Answered)

	type want struct {
		answered, forbidden int
		alone               int // answered when asked about alone
		credentials         error
		storeFailure        bool
		events              []string
	}
	steps := []struct {
		name  string
		setup func()
		want  want
	}{
		{"AccessDenied spell on every call", func() { e.srv.InjectFault(smmock.Fault{Code: "AccessDeniedException"}) },
			want{forbidden: 5, credentials: edgesecrets.ErrPermission, storeFailure: true, events: []string{"forbidden a", "forbidden b", "forbidden c", "forbidden d", "forbidden e"}}},
		{"spell over", e.srv.ClearFaults,
			want{answered: 5, alone: 3, events: []string{"appeared a", "appeared b", "appeared c", "appeared d", "appeared e"}}},
		{"expired token on every call", func() { e.srv.InjectFault(smmock.Fault{Code: "ExpiredTokenException"}) },
			want{forbidden: 5, credentials: edgesecrets.ErrPermission, storeFailure: true, events: []string{"forbidden a", "forbidden b", "forbidden c", "forbidden d", "forbidden e"}}},
		{"renewed", e.srv.ClearFaults,
			want{answered: 5, alone: 3, events: []string{"appeared a", "appeared b", "appeared c", "appeared d", "appeared e"}}},
		{"reads denied, listing allowed", func() {
			for _, op := range []string{smmock.OpDescribeSecret, smmock.OpGetSecretValue} {
				e.srv.InjectFault(smmock.Fault{Op: op, Code: "AccessDeniedException"})
			}
		}, want{answered: 2, forbidden: 3, storeFailure: true, events: []string{"forbidden", "forbidden", "forbidden"}}},
		{"reads allowed again", e.srv.ClearFaults,
			want{answered: 5, alone: 3, events: []string{"appeared", "appeared", "appeared"}}},
		{"one secret denied", func() { e.srv.InjectFault(smmock.Fault{Code: "AccessDeniedException", SecretID: "org1/b"}) },
			want{answered: 4, alone: 2, forbidden: 1, events: []string{"forbidden b"}}},
	}
	for _, st := range steps {
		st.setup()
		c := w.Poll(ctx)
		assert.Equal(t, st.want.answered, c.Answered, st.name)
		assert.Equal(t, st.want.forbidden, c.Forbidden, st.name)
		assert.Equal(t, st.want.alone, c.AnsweredAlone, st.name)
		assert.True(t, c.CredentialsChecked, st.name)
		if st.want.credentials == nil {
			assert.NoError(t, c.Credentials, st.name)
		} else {
			assert.ErrorIs(t, c.Credentials, st.want.credentials, st.name)
		}
		assert.Equal(t, st.want.storeFailure, c.StoreFailure() != nil, st.name)
		// The names asked about alone take turns: where the step does
		// not name them, only the kinds are compared.
		var got []string
		for _, ev := range c.Events {
			if strings.Contains(st.want.events[0], " ") {
				got = append(got, ev.Kind.String()+" "+ev.Name)
			} else {
				got = append(got, ev.Kind.String())
			}
		}
		assert.Equal(t, st.want.events, got, st.name)
	}
}
