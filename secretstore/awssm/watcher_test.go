package awssm_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/storewatch"
	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore/awssm"
)

// seed creates n secrets "<scope>/app/sNNNN" straight through the SDK and
// returns their store names ("app/sNNNN").
func seed(t testing.TB, e *env, scope string, n int) []string {
	t.Helper()
	names := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		names[i] = fmt.Sprintf("app/s%04d", i)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, err := e.client.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
				Name: aws.String(scope + "/" + names[i]), SecretString: aws.String(`{"v":"1"}`)})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	return names
}

func callsMade(srv *smmock.Server) int64 {
	var n int64
	for _, c := range srv.AllCalls() {
		n += c
	}
	return n
}

// A watch cycle over 1,000 secrets lists their metadata in pages of 100
// (ListSecrets, filtered on their common name prefix) instead of one
// DescribeSecret each: at most 15 calls a cycle, credential check
// included, and a rotation or deletion is seen in the first cycle after
// it.
func TestWatcherCycleListsInsteadOfDescribing(t *testing.T) {
	const n = 1000
	ctx := t.Context()
	e := newEnv(t)
	names := seed(t, e, "org1", n)
	seed(t, e, "org2", 150) // another scope, not listed
	s := e.store(awssm.Options{Scope: "org1"})
	w, err := storewatch.New(s, storewatch.Options{})
	require.NoError(t, err)
	require.NoError(t, w.Watch(names...))

	e.srv.ResetCounters()
	first := w.Poll(ctx)
	require.NoError(t, first.StoreFailure())
	assert.Equal(t, n, first.Answered)
	assert.Len(t, first.Events, n, "each name appears")
	assert.LessOrEqual(t, callsMade(e.srv), int64(15), "calls for the first cycle: %v", e.srv.AllCalls())
	assert.Equal(t, int64(10), e.srv.Calls(smmock.OpListSecrets)-1, "ten pages, and the credential check")

	for _, i := range []int{500, 999} {
		_, err := e.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
			SecretId: aws.String("org1/" + names[i]), SecretString: aws.String(`{"v":"2"}`)})
		require.NoError(t, err)
	}
	_, err = e.client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String("org1/" + names[700])})
	require.NoError(t, err)

	e.srv.ResetCounters()
	second := w.Poll(ctx)
	assert.Equal(t, []string{"changed " + names[500], "deleted " + names[700], "changed " + names[999]}, summary(second.Events),
		"the first cycle after the changes sees them")
	assert.LessOrEqual(t, callsMade(e.srv), int64(15), "calls for the second cycle: %v", e.srv.AllCalls())
	for _, ev := range second.Events {
		if ev.Kind == storewatch.Changed {
			md, err := s.Stat(ctx, ev.Name)
			require.NoError(t, err)
			assert.Equal(t, md.Version, ev.Version, "the listing's AWSCURRENT is the version Stat reports")
		}
	}
}

func summary(events []storewatch.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Kind.String()+" "+e.Name)
	}
	return out
}

// BenchmarkWatcherCycle compares a steady-state watch cycle over 1,000
// secrets that lists their metadata (the store as it is) with one that
// describes each secret (the store behind mock.Store, which has no
// listing), over loopback HTTP with SigV4 verification. It reports the
// Secrets Manager calls per cycle beside the time.
func BenchmarkWatcherCycle(b *testing.B) {
	const n = 1000
	e := newEnv(b)
	names := seed(b, e, "org1", n)
	store := e.store(awssm.Options{Scope: "org1"})
	for _, mode := range []string{"ListSecrets", "DescribeEach"} {
		b.Run(mode, func(b *testing.B) {
			s := store
			if mode == "DescribeEach" {
				s = mock.NewStore(store).Store
			}
			w, err := storewatch.New(s, storewatch.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Watch(names...); err != nil {
				b.Fatal(err)
			}
			w.Poll(b.Context()) // the baseline
			e.srv.ResetCounters()
			for b.Loop() {
				if c := w.Poll(b.Context()); c.Answered != n || len(c.Events) != 0 {
					b.Fatalf("answered %d, %d events", c.Answered, len(c.Events))
				}
			}
			b.ReportMetric(float64(callsMade(e.srv))/float64(b.N), "calls/cycle")
		})
	}
}
