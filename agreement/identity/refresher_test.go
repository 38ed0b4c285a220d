package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The refresher tests run in synctest bubbles: time moves only when every
// goroutine waits, so a renewal due in two hours happens at once, at
// exactly that time.

// scriptedRenewer lets the test answer each Renew call.
type scriptedRenewer struct {
	mu      sync.Mutex
	cert    *x509.Certificate
	calls   chan time.Time // the time of each call
	answers chan error     // nil: succeed with a certificate from next
	next    func(now time.Time) *x509.Certificate
}

func newScriptedRenewer(lifetime time.Duration) *scriptedRenewer {
	r := &scriptedRenewer{calls: make(chan time.Time), answers: make(chan error)}
	r.next = func(now time.Time) *x509.Certificate {
		return &x509.Certificate{NotBefore: now, NotAfter: now.Add(lifetime)}
	}
	r.cert = r.next(now())
	return r
}

func (r *scriptedRenewer) certificate() *x509.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert
}

func (r *scriptedRenewer) Renew(ctx context.Context) (*x509.Certificate, error) {
	r.calls <- now()
	if err := <-r.answers; err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cert = r.next(now())
	return r.cert, nil
}

// expectCall waits for Renew, answers it, and returns when it was called.
func (r *scriptedRenewer) expectCall(t *testing.T, answer error) time.Time {
	t.Helper()
	at := <-r.calls
	r.answers <- answer
	return at
}

// noCall checks that Renew is not being called now.
func (r *scriptedRenewer) noCall(t *testing.T) {
	t.Helper()
	synctest.Wait()
	select {
	case at := <-r.calls:
		t.Fatalf("unexpected Renew at %v", at)
	default:
	}
}

type refresherRun struct {
	cancel context.CancelFunc
	done   chan error
}

// startRefresher runs a refresher of r in the test's bubble until the test
// ends.
func startRefresher(t *testing.T, r renewer, opts refresherOptions) *refresherRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	run := &refresherRun{cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- newRefresher(r, opts).run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-run.done
	})
	return run
}

func (run *refresherRun) result(t *testing.T) error {
	t.Helper()
	err := <-run.done
	run.done <- err // for the cleanup
	return err
}

var errHubDown = errors.New("hub down")

func halfJitter() float64 { return 0.5 }

func TestRefresherFiresAtTwoThirds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptedRenewer(3 * time.Hour)
		startRefresher(t, r, refresherOptions{})

		time.Sleep(2*time.Hour - time.Second)
		r.noCall(t)
		assert.Equal(t, t0.Add(2*time.Hour), r.expectCall(t, nil), "renewal is due after 2/3 of the lifetime")

		// The next wait follows the new certificate.
		assert.Equal(t, t0.Add(4*time.Hour), r.expectCall(t, nil))
	})
}

func TestRenewalTime(t *testing.T) {
	for _, tc := range []struct{ notBefore, notAfter, want time.Time }{
		{t0, t0.Add(3 * time.Hour), t0.Add(2 * time.Hour)},
		{t0, t0.Add(24 * time.Hour), t0.Add(16 * time.Hour)},
		// A span past the range of time.Duration still renews in its first half, not at overflow.
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(math.MaxInt64 / 3 * 2)},
	} {
		assert.Equal(t, tc.want, renewalTime(&x509.Certificate{NotBefore: tc.notBefore, NotAfter: tc.notAfter}))
	}
}

func TestRefresherBackoffGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptedRenewer(3 * time.Hour)
		startRefresher(t, r, refresherOptions{initial: time.Second, max: 10 * time.Second, jitter: halfJitter})

		at := r.expectCall(t, errHubDown)
		var delays []time.Duration
		for i := range 6 {
			answer := errHubDown
			if i == 5 {
				answer = nil
			}
			next := r.expectCall(t, answer)
			delays = append(delays, next.Sub(at))
			at = next
		}
		// Base 1 s doubling, capped at 10 s; the delay is 3/4 of the base with jitter 0.5.
		assert.Equal(t, []time.Duration{750 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second, 6 * time.Second, 7500 * time.Millisecond, 7500 * time.Millisecond}, delays)

		// Success resets: the next failure starts from the initial backoff again.
		at = r.expectCall(t, errHubDown)
		assert.Equal(t, 750*time.Millisecond, r.expectCall(t, nil).Sub(at))
	})
}

func TestRefresherDoesNotSpinOnShortCertificates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptedRenewer(time.Hour)
		// The hub answers with certificates that are due at once.
		r.next = func(now time.Time) *x509.Certificate {
			return &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Minute)}
		}
		startRefresher(t, r, refresherOptions{initial: 7 * time.Second})
		first := r.expectCall(t, nil)
		second := r.expectCall(t, nil)
		assert.Equal(t, 7*time.Second, second.Sub(first), "the next attempt waits at least the initial backoff")
		assert.Equal(t, 7*time.Second, r.expectCall(t, nil).Sub(second))
	})
}

func TestRefresherJitterStaysInRange(t *testing.T) {
	r := newRefresher(newScriptedRenewer(time.Hour), refresherOptions{initial: time.Second, max: time.Minute})
	seen := map[time.Duration]bool{}
	for n := range 10 {
		base := min(time.Second<<n, time.Minute)
		for range 50 {
			d := r.backoff(n)
			require.GreaterOrEqual(t, d, base/2)
			require.Less(t, d, base)
			seen[d] = true
		}
	}
	assert.Greater(t, len(seen), 100, "the default jitter spreads retries")
}

func TestRefresherExpiryWarning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptedRenewer(30 * time.Second) // due at t0+20s, expires at t0+30s
		type warning struct {
			notAfter, nextAttempt time.Time
			err                   error
		}
		var mu sync.Mutex
		var warnings []warning
		startRefresher(t, r, refresherOptions{
			initial: 4 * time.Second, max: time.Minute, jitter: halfJitter,
			onWarning: func(notAfter, nextAttempt time.Time, err error) {
				mu.Lock()
				warnings = append(warnings, warning{notAfter, nextAttempt.UTC().Round(0), err})
				mu.Unlock()
			},
		})
		count := func() int { mu.Lock(); defer mu.Unlock(); return len(warnings) }

		assert.Equal(t, t0.Add(20*time.Second), r.expectCall(t, errHubDown)) // next at 23 s
		assert.Equal(t, t0.Add(23*time.Second), r.expectCall(t, errHubDown)) // next at 29 s, still before expiry
		// The refresher takes each answer on its own goroutine: count once
		// it has, and sleeps until the next attempt.
		synctest.Wait()
		assert.Zero(t, count(), "no warning while the next attempt comes before expiry")
		assert.Equal(t, t0.Add(29*time.Second), r.expectCall(t, errHubDown)) // next at 41 s, after expiry
		synctest.Wait()
		assert.Equal(t, 1, count(), "a warning as soon as the next attempt comes after expiry")
		next := r.expectCall(t, nil)
		assert.Equal(t, t0.Add(41*time.Second), next)
		require.Equal(t, 1, count())
		mu.Lock()
		got := warnings[0]
		mu.Unlock()
		assert.Equal(t, t0.Add(30*time.Second), got.notAfter)
		assert.Equal(t, next, got.nextAttempt)
		assert.ErrorIs(t, got.err, errHubDown)
	})
}

func TestRefresherStopsWhenRefused(t *testing.T) {
	for name, refusal := range map[string]error{
		"revoked": newError(opRefresh, testID, ErrForbidden, "instance revoked", ErrRevoked),
		"expired": newError(opRefresh, testID, ErrUnauthenticated, "certificate expired", ErrExpired),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newScriptedRenewer(time.Hour)
				run := startRefresher(t, r, refresherOptions{})
				r.expectCall(t, refusal)
				assert.ErrorIs(t, run.result(t), refusal, "no retry can fix it: register again")
			})
		})
	}
}

func TestRefresherCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptedRenewer(time.Hour)
		run := startRefresher(t, r, refresherOptions{})
		synctest.Wait()
		run.cancel()
		assert.ErrorIs(t, run.result(t), context.Canceled)
	})
}

func TestAgentRunWithoutCertificate(t *testing.T) {
	h := newHub(t)
	agent := newTestAgent(t, h.Issuer, newAgentKeys(t), nil)
	assert.ErrorContains(t, agent.Run(context.Background()), "register first")
}

// TestAgentRunRenewsAgainstIssuer runs the real parts together.
func TestAgentRunRenewsAgainstIssuer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHub(t, func(o *IssuerOptions) { o.MaxLifetime = 3 * time.Hour })
		agent := newTestAgent(t, h.Issuer, newAgentKeys(t), nil)
		first, err := agent.Register(context.Background(), "good")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- agent.Run(ctx) }()
		defer func() {
			cancel()
			<-done
		}()

		time.Sleep(time.Until(renewalTime(first)) - time.Second)
		synctest.Wait()
		assert.Same(t, first, agent.certificate(), "not renewed before 2/3 of the lifetime")
		time.Sleep(time.Second)
		synctest.Wait()
		require.NotSame(t, first, agent.certificate(), "renewed after 2/3 of the lifetime")
		rec := h.record(t, testID)
		assert.Equal(t, serialString(agent.certificate()), rec.CurrentSerial)
		assert.Equal(t, serialString(first), rec.PreviousSerial)
	})
}
