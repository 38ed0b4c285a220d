package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// renewer is what a refresher renews: an *Agent.
type renewer interface {
	// certificate returns the current certificate, or nil.
	certificate() *x509.Certificate
	// Renew replaces it with a new one.
	Renew(ctx context.Context) (*x509.Certificate, error)
}

// renewalTime is when a certificate should be renewed: after two thirds
// of its lifetime, NotBefore + 2/3 (NotAfter − NotBefore).
func renewalTime(cert *x509.Certificate) time.Time {
	// Divide first: a saturated Sub times 2 would overflow.
	return cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) / 3 * 2)
}

// refresherOptions are the renewal settings of AgentOptions.
type refresherOptions struct {
	initial, max time.Duration
	jitter       func() float64
	onWarning    func(notAfter, nextAttempt time.Time, err error)
	log          *slog.Logger
}

// refresher keeps a certificate renewed: it waits until renewalTime, calls
// Renew, and on failure retries with jittered exponential backoff, warning
// when the certificate will expire before the next attempt.
type refresher struct {
	renewer renewer
	refresherOptions
}

func newRefresher(r renewer, opts refresherOptions) *refresher {
	if opts.initial <= 0 {
		opts.initial = 5 * time.Second
	}
	if opts.max <= 0 {
		opts.max = 5 * time.Minute
	}
	if opts.max < opts.initial {
		opts.max = opts.initial
	}
	if opts.jitter == nil {
		opts.jitter = rand.Float64
	}
	if opts.log == nil {
		opts.log = slog.New(slog.DiscardHandler)
	}
	return &refresher{renewer: r, refresherOptions: opts}
}

// Run keeps the certificate renewed: after two thirds of its lifetime it
// calls Renew, and on failure retries with jittered exponential backoff
// (AgentOptions.InitialBackoff, MaxBackoff, Jitter), warning
// (OnExpiryWarning) when the certificate would expire before the next
// attempt. It returns when ctx ends (ctx.Err()) or when a renewal fails in
// a way no retry can fix (that error): the instance is refused
// (ErrForbidden; with ErrRevoked for good) or the certificate expired
// (ErrUnauthenticated, "certificate expired"); the agent must register
// again, unless revoked. Call it after Register or
// LoadCertificate.
func (a *Agent) Run(ctx context.Context) error {
	return newRefresher(a, a.renewal).run(ctx)
}

// run renews until ctx ends or a renewal fails in a way no retry can fix.
func (r *refresher) run(ctx context.Context) error {
	for renewed := false; ; renewed = true {
		cert := r.renewer.certificate()
		if cert == nil {
			return newError(opRefresh, Identity{}, secretstore.ErrInvalid, "no certificate to renew: register first", nil)
		}
		wait := time.Until(renewalTime(cert))
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
func (r *refresher) renew(ctx context.Context, cert *x509.Certificate) error {
	for failures := 0; ; {
		_, err := r.renewer.Renew(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrForbidden) || errors.Is(err, errExpired) {
			r.log.ErrorContext(ctx, "identity: renewal refused; register again", "error", err)
			return err
		}
		delay := r.backoff(failures)
		failures++
		next := time.Now().Add(delay)
		r.log.WarnContext(ctx, "identity: renewal failed; retrying", "error", err, "retryIn", delay, "failures", failures)
		if !next.Before(cert.NotAfter) {
			r.log.WarnContext(ctx, "identity: certificate expires before the next renewal attempt", "notAfter", cert.NotAfter, "nextAttempt", next)
			if r.onWarning != nil {
				r.onWarning(cert.NotAfter, next, err)
			}
		}
		if err := r.sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// backoff returns the delay after the n-th consecutive failure (n from
// 0): base d = min(initial·2ⁿ, max), delay in [d/2, d).
func (r *refresher) backoff(n int) time.Duration {
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

func (r *refresher) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
