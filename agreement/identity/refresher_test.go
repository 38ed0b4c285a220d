package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scriptedRenewer lets the test answer each Renew call.
type scriptedRenewer struct {
	mu      sync.Mutex
	cert    *x509.Certificate
	calls   chan time.Time // the clock time of each call
	answers chan error     // nil: succeed with a certificate from next
	next    func(now time.Time) *x509.Certificate
	clock   Clock
}

func newScriptedRenewer(clock Clock, lifetime time.Duration) *scriptedRenewer {
	r := &scriptedRenewer{calls: make(chan time.Time), answers: make(chan error), clock: clock}
	r.next = func(now time.Time) *x509.Certificate {
		return &x509.Certificate{NotBefore: now, NotAfter: now.Add(lifetime)}
	}
	r.cert = r.next(clock.Now())
	return r
}

func (r *scriptedRenewer) Certificate() *x509.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert
}

func (r *scriptedRenewer) Renew(ctx context.Context) (*x509.Certificate, error) {
	r.calls <- r.clock.Now()
	if err := <-r.answers; err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cert = r.next(r.clock.Now())
	return r.cert, nil
}

// expectCall waits for Renew and answers it.
func (r *scriptedRenewer) expectCall(t *testing.T, answer error) time.Time {
	t.Helper()
	select {
	case at := <-r.calls:
		r.answers <- answer
		return at
	case <-time.After(10 * time.Second):
		t.Fatal("Renew was not called")
		return time.Time{}
	}
}

func (r *scriptedRenewer) noCall(t *testing.T) {
	t.Helper()
	select {
	case at := <-r.calls:
		t.Fatalf("unexpected Renew at %v", at)
	case <-time.After(50 * time.Millisecond):
	}
}

type refresherRun struct {
	cancel context.CancelFunc
	done   chan error
}

func startRefresher(t *testing.T, opts RefresherOptions) *refresherRun {
	t.Helper()
	r, err := NewRefresher(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	run := &refresherRun{cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-run.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return run
}

func (run *refresherRun) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-run.done:
		run.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

var errHubDown = errors.New("hub down")

func halfJitter() float64 { return 0.5 }

func TestRefresherFiresAtTwoThirds(t *testing.T) {
	clock := newFakeClock()
	r := newScriptedRenewer(clock, 3*time.Hour)
	startRefresher(t, RefresherOptions{Renewer: r, Clock: clock})

	w := clock.waiter(t)
	assert.Equal(t, t0.Add(2*time.Hour), w.at, "renewal is due after 2/3 of the lifetime")
	clock.Set(w.at.Add(-time.Second))
	r.noCall(t)
	clock.Set(w.at)
	assert.Equal(t, t0.Add(2*time.Hour), r.expectCall(t, nil))

	// The next wait follows the new certificate.
	w = clock.waiter(t)
	assert.Equal(t, t0.Add(4*time.Hour), w.at)
}

func TestRenewalTime(t *testing.T) {
	for _, tc := range []struct{ notBefore, notAfter, want time.Time }{
		{t0, t0.Add(3 * time.Hour), t0.Add(2 * time.Hour)},
		{t0, t0.Add(24 * time.Hour), t0.Add(16 * time.Hour)},
		// A span past the range of time.Duration still renews in its first half, not at overflow.
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(math.MaxInt64 / 3 * 2)},
	} {
		assert.Equal(t, tc.want, RenewalTime(&x509.Certificate{NotBefore: tc.notBefore, NotAfter: tc.notAfter}))
	}
}

func TestRefresherBackoffGrows(t *testing.T) {
	clock := newFakeClock()
	r := newScriptedRenewer(clock, 3*time.Hour)
	startRefresher(t, RefresherOptions{Renewer: r, Clock: clock, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, Jitter: halfJitter})

	clock.Set(clock.waiter(t).at)
	var delays []time.Duration
	for range 6 {
		r.expectCall(t, errHubDown)
		w := clock.waiter(t)
		delays = append(delays, w.d)
		clock.Set(w.at)
	}
	// Base 1 s doubling, capped at 10 s; the delay is 3/4 of the base with jitter 0.5.
	assert.Equal(t, []time.Duration{750 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second, 6 * time.Second, 7500 * time.Millisecond, 7500 * time.Millisecond}, delays)

	// Success resets: the next failure starts from the initial backoff again.
	r.expectCall(t, nil)
	clock.Set(clock.waiter(t).at)
	r.expectCall(t, errHubDown)
	assert.Equal(t, 750*time.Millisecond, clock.waiter(t).d)
}

func TestRefresherDoesNotSpinOnShortCertificates(t *testing.T) {
	clock := newFakeClock()
	r := newScriptedRenewer(clock, time.Hour)
	startRefresher(t, RefresherOptions{Renewer: r, Clock: clock, InitialBackoff: 7 * time.Second})
	clock.Set(clock.waiter(t).at)
	// The hub answers with a certificate that is due at once.
	r.next = func(now time.Time) *x509.Certificate {
		return &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Minute)}
	}
	r.expectCall(t, nil)
	w := clock.waiter(t)
	assert.Equal(t, 7*time.Second, w.d, "the next attempt waits at least the initial backoff")
	clock.Set(w.at)
	r.expectCall(t, nil)
	assert.Equal(t, 7*time.Second, clock.waiter(t).d)
}

func TestRefresherJitterStaysInRange(t *testing.T) {
	r, err := NewRefresher(RefresherOptions{Renewer: newScriptedRenewer(newFakeClock(), time.Hour), InitialBackoff: time.Second, MaxBackoff: time.Minute})
	require.NoError(t, err)
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
	clock := newFakeClock()
	r := newScriptedRenewer(clock, 30*time.Second) // due at t0+20s, expires at t0+30s
	var mu sync.Mutex
	var warnings []ExpiryWarning
	startRefresher(t, RefresherOptions{
		Renewer: r, Clock: clock, InitialBackoff: 4 * time.Second, MaxBackoff: time.Minute, Jitter: halfJitter,
		OnExpiryWarning: func(w ExpiryWarning) { mu.Lock(); warnings = append(warnings, w); mu.Unlock() },
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(warnings) }

	clock.Set(clock.waiter(t).at)
	r.expectCall(t, errHubDown) // at 20 s; next at 23 s
	clock.Set(clock.waiter(t).at)
	r.expectCall(t, errHubDown) // at 23 s; next at 29 s, still before expiry
	w := clock.waiter(t)
	assert.Equal(t, t0.Add(29*time.Second), w.at)
	assert.Zero(t, count(), "no warning while the next attempt comes before expiry")
	clock.Set(w.at)
	r.expectCall(t, errHubDown) // at 29 s; next at 41 s, after expiry
	w = clock.waiter(t)
	require.Equal(t, 1, count())
	mu.Lock()
	got := warnings[0]
	mu.Unlock()
	assert.Equal(t, t0.Add(30*time.Second), got.NotAfter)
	assert.Equal(t, t0.Add(41*time.Second), got.NextAttempt)
	assert.Equal(t, w.at, got.NextAttempt)
	assert.ErrorIs(t, got.Err, errHubDown)
}

func TestRefresherStopsWhenRefused(t *testing.T) {
	for name, refusal := range map[string]error{
		"revoked": newError(OpRefresh, testID, ErrForbidden, "instance revoked", ErrRevoked),
		"expired": newError(OpRefresh, testID, ErrUnauthenticated, "certificate expired", ErrExpired),
	} {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			r := newScriptedRenewer(clock, time.Hour)
			run := startRefresher(t, RefresherOptions{Renewer: r, Clock: clock})
			clock.Set(clock.waiter(t).at)
			r.expectCall(t, refusal)
			assert.ErrorIs(t, run.result(t), refusal, "no retry can fix it: register again")
		})
	}
}

func TestRefresherCancel(t *testing.T) {
	clock := newFakeClock()
	r := newScriptedRenewer(clock, time.Hour)
	run := startRefresher(t, RefresherOptions{Renewer: r, Clock: clock})
	clock.waiter(t)
	run.cancel()
	assert.ErrorIs(t, run.result(t), context.Canceled)
}

func TestRefresherWithoutCertificate(t *testing.T) {
	h := newHub(t)
	r, err := NewRefresher(RefresherOptions{Renewer: newTestAgent(t, h.Issuer, newAgentKeys(t), h.clock, nil)})
	require.NoError(t, err)
	assert.ErrorContains(t, r.Run(context.Background()), "register first")
}

// TestRefresherRenewsAgentAgainstIssuer runs the real parts together on one
// fake clock.
func TestRefresherRenewsAgentAgainstIssuer(t *testing.T) {
	h := newHub(t, func(o *IssuerOptions) { o.Policy.MaxLifetime = 3 * time.Hour })
	agent := newTestAgent(t, h.Issuer, newAgentKeys(t), h.clock, nil)
	first, err := agent.Register(context.Background(), "good")
	require.NoError(t, err)
	startRefresher(t, RefresherOptions{Renewer: agent, Clock: h.clock})

	w := h.clock.waiter(t)
	assert.Equal(t, RenewalTime(first), w.at)
	h.clock.Set(w.at)
	require.Eventually(t, func() bool { return agent.Certificate() != first }, 10*time.Second, time.Millisecond)
	rec := h.record(t, testID)
	assert.Equal(t, serialString(agent.Certificate()), rec.CurrentSerial)
	assert.Equal(t, serialString(first), rec.PreviousSerial)
}
