package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Renewer is what a Refresher renews: an *Agent.
type Renewer interface {
	// Certificate returns the current certificate, or nil.
	Certificate() *x509.Certificate
	// Renew replaces it with a new one.
	Renew(ctx context.Context) (*x509.Certificate, error)
}

// RenewalTime is when a certificate should be renewed: after two thirds
// of its lifetime, NotBefore + 2/3 (NotAfter − NotBefore).
func RenewalTime(cert *x509.Certificate) time.Time {
	// Divide first: a saturated Sub times 2 would overflow.
	return cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) / 3 * 2)
}

// ExpiryWarning reports that a renewal failed and the certificate will
// expire before the next attempt: unless that attempt is moved up or the
// hub recovers, the agent loses its identity and must register again.
type ExpiryWarning struct {
	// NotAfter is when the current certificate expires.
	NotAfter time.Time
	// NextAttempt is when the Refresher will try again.
	NextAttempt time.Time
	// Err is the last renewal failure.
	Err error
}

// RefresherOptions configures NewRefresher.
type RefresherOptions struct {
	// Renewer is renewed. Required.
	Renewer Renewer
	// Clock defaults to the system clock.
	Clock Clock
	// InitialBackoff is the base delay after the first failure; default
	// 5 s. Each further failure doubles it, up to MaxBackoff (default
	// 5 min).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// Jitter returns a number in [0, 1) choosing where in [d/2, d) a
	// delay of base d falls; default math/rand/v2.Float64.
	Jitter func() float64
	// OnExpiryWarning, when set, is called with each ExpiryWarning (which
	// is also logged).
	OnExpiryWarning func(ExpiryWarning)
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Refresher keeps a certificate renewed: it waits until RenewalTime, calls
// Renew, and on failure retries with jittered exponential backoff, warning
// when the certificate will expire before the next attempt.
type Refresher struct {
	renewer      Renewer
	clock        Clock
	initial, max time.Duration
	jitter       func() float64
	onWarning    func(ExpiryWarning)
	log          *slog.Logger
}

// NewRefresher returns a Refresher.
func NewRefresher(opts RefresherOptions) (*Refresher, error) {
	if opts.Renewer == nil {
		return nil, fmt.Errorf("identity: refresher: no Renewer")
	}
	r := &Refresher{
		renewer: opts.Renewer, clock: clockOrSystem(opts.Clock),
		initial: opts.InitialBackoff, max: opts.MaxBackoff,
		jitter: opts.Jitter, onWarning: opts.OnExpiryWarning, log: opts.Logger,
	}
	if r.initial <= 0 {
		r.initial = 5 * time.Second
	}
	if r.max <= 0 {
		r.max = 5 * time.Minute
	}
	if r.max < r.initial {
		r.max = r.initial
	}
	if r.jitter == nil {
		r.jitter = rand.Float64
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Run renews until ctx ends (returning ctx.Err()) or a renewal fails in a
// way no retry can fix (returning that error): the instance is refused
// (ErrForbidden, e.g. ErrRevoked) or the certificate expired (ErrExpired);
// either way the agent must register again.
func (r *Refresher) Run(ctx context.Context) error {
	for renewed := false; ; renewed = true {
		cert := r.renewer.Certificate()
		if cert == nil {
			return newError(OpRefresh, Identity{}, ErrInvalid, "no certificate to renew: register first", nil)
		}
		wait := RenewalTime(cert).Sub(r.clock.Now())
		if renewed && wait < r.initial {
			// A certificate due as soon as it is issued (the hub cut its
			// lifetime short) must not turn into a tight loop against the hub.
			r.log.WarnContext(ctx, "identity: the renewed certificate is already due for renewal", "notBefore", cert.NotBefore, "notAfter", cert.NotAfter)
			wait = r.initial
		}
		if err := r.sleep(ctx, wait); err != nil {
			return err
		}
		if err := r.renew(ctx, cert); err != nil {
			return err
		}
	}
}

// renew calls Renew until it succeeds, backing off between failures.
func (r *Refresher) renew(ctx context.Context, cert *x509.Certificate) error {
	for failures := 0; ; {
		_, err := r.renewer.Renew(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrForbidden) || errors.Is(err, ErrExpired) {
			r.log.ErrorContext(ctx, "identity: renewal refused; register again", "error", err)
			return err
		}
		delay := r.backoff(failures)
		failures++
		next := r.clock.Now().Add(delay)
		r.log.WarnContext(ctx, "identity: renewal failed; retrying", "error", err, "retryIn", delay, "failures", failures)
		if !next.Before(cert.NotAfter) {
			w := ExpiryWarning{NotAfter: cert.NotAfter, NextAttempt: next, Err: err}
			r.log.WarnContext(ctx, "identity: certificate expires before the next renewal attempt", "notAfter", w.NotAfter, "nextAttempt", w.NextAttempt)
			if r.onWarning != nil {
				r.onWarning(w)
			}
		}
		if err := r.sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// backoff returns the delay after the n-th consecutive failure (n from
// 0): base d = min(initial·2ⁿ, max), delay in [d/2, d).
func (r *Refresher) backoff(n int) time.Duration {
	d := r.initial
	for i := 0; i < n && d < r.max; i++ {
		if d > r.max/2 {
			d = r.max
			break
		}
		d *= 2
	}
	d = min(d, r.max)
	j := r.jitter()
	if j < 0 || j >= 1 {
		j = 0
	}
	return d/2 + time.Duration(float64(d/2)*j)
}

func (r *Refresher) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.clock.After(d):
		return nil
	}
}
