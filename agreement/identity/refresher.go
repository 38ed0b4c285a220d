package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/edgesecrets/edgesecrets"
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
	// register, when set, registers again (Agent.reregister): the
	// refresher then registers when there is no certificate and when the
	// identity is lost, instead of returning.
	register func(ctx context.Context) (*x509.Certificate, error)
	// lost delivers Agent.Refused's reports; nil: none.
	lost <-chan error
}

// refresher keeps a certificate renewed: it waits until renewalTime, calls
// Renew, and on failure retries with jittered exponential backoff, warning
// when the certificate will expire before the next attempt. Given
// register, it also keeps the agent registered.
type refresher struct {
	renewer renewer
	refresherOptions

	// Registrations, for the backoff between them: attempts since the
	// identity last held for the maximum backoff, when the next may
	// start, when the last succeeded, and why it was made.
	attempts     int
	nextAt       time.Time
	registeredAt time.Time
	lastCause    error // why the last registration was made; nil: the first
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
// attempt.
//
// With AgentOptions.Attest, Run also keeps the agent registered: it
// registers first when the agent has no certificate, and again whenever
// the identity is lost, that is when a renewal or a report through Refused
// says so (ErrIdentityLost: no record for the instance, revoked, or
// expired), retrying with the same backoff for as long as it runs. It
// returns when ctx ends (ctx.Err()) or when a renewal is refused in a way
// no registration fixes either (ErrForbidden without ErrRevoked, e.g. a
// serial the hub no longer accepts).
//
// Without Attest, call it after Register or LoadCertificate; it also
// returns an error matching ErrIdentityLost, from a renewal or from
// Refused: the agent must register again, unless revoked.
func (a *Agent) Run(ctx context.Context) error {
	opts := a.renewal
	opts.lost = a.lost
	if a.attest != nil {
		opts.register = a.reregister
	}
	return newRefresher(a, opts).run(ctx)
}

// run renews until ctx ends or a renewal fails in a way no retry can fix,
// and registers again when the identity is lost, given register.
func (r *refresher) run(ctx context.Context) error {
	var lost error   // why the agent must register again
	var renewed bool // the certificate came from a renewal
	for {
		cert := r.renewer.certificate()
		if cert == nil || lost != nil {
			switch {
			case r.register == nil && lost != nil:
				return lost
			case r.register == nil:
				return newError(opRefresh, Identity{}, edgesecrets.ErrInvalid, "no certificate to renew: register first", nil)
			}
			if err := r.registerAgain(ctx, lost); err != nil {
				return err
			}
			lost, renewed = nil, false
			continue
		}
		wait := time.Until(renewalTime(cert))
		if renewed && wait < r.initial {
			// A certificate due as soon as it is issued (the hub cut its
			// lifetime short) must not turn into a tight loop against the hub.
			r.log.WarnContext(ctx, "identity: the renewed certificate is already due for renewal", "notBefore", cert.NotBefore, "notAfter", cert.NotAfter)
			wait = r.initial
		}
		err := r.sleep(ctx, wait, r.lost)
		if err == nil {
			err = r.renew(ctx, cert)
		}
		if renewed = err == nil; renewed {
			continue
		}
		if r.register != nil && ctx.Err() == nil && errors.Is(err, ErrIdentityLost) {
			lost = err
			continue
		}
		return err
	}
}

// renew calls Renew until it succeeds, backing off between failures. It
// returns a refusal no retry fixes, a loss reported meanwhile, or ctx's
// error.
func (r *refresher) renew(ctx context.Context, cert *x509.Certificate) error {
	for failures := 0; ; {
		_, err := r.renewer.Renew(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrForbidden) || errors.Is(err, ErrIdentityLost) {
			if r.register == nil || !errors.Is(err, ErrIdentityLost) {
				r.log.ErrorContext(ctx, "identity: renewal refused; register again", "error", err)
			}
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
		if err := r.sleep(ctx, delay, r.lost); err != nil {
			return err
		}
	}
}

// registerAgain registers until it succeeds or ctx ends. cause is why
// (nil: the agent has no certificate yet); it is logged at WARN, once.
// Attempts are spaced by the backoff, counted across losses that come
// soon after a registration, so an agbot that keeps refusing a new
// certificate does not drive the agent into a loop against the hub.
func (r *refresher) registerAgain(ctx context.Context, cause error) error {
	if r.attempts > 0 && time.Since(r.registeredAt) >= r.max {
		r.attempts = 0 // the identity held long enough: start afresh
	}
	// A loss soon after a registration for a loss continues that episode.
	continued := cause != nil && r.attempts > 0 && r.lastCause != nil
	r.lastCause = cause
	warned := cause != nil
	switch {
	case continued:
		r.log.InfoContext(ctx, "identity: lost again soon after registering; registering again after the backoff", "error", cause, "at", r.nextAt)
	case warned:
		r.log.WarnContext(ctx, "identity: the identity is lost (no record, revoked or expired); registering again", "error", cause)
	}
	for failures := 0; ; {
		if err := r.sleep(ctx, time.Until(r.nextAt), nil); err != nil {
			return err
		}
		cert, err := r.register(ctx)
		delay := r.backoff(r.attempts)
		r.attempts++
		r.nextAt = time.Now().Add(delay)
		if err == nil {
			r.registeredAt = time.Now()
			r.log.InfoContext(ctx, "identity: registered", "again", cause != nil, "notAfter", cert.NotAfter, "failures", failures)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failures++
		level := slog.LevelInfo
		if !warned {
			level, warned = slog.LevelWarn, true
		}
		r.log.Log(ctx, level, "identity: registering failed; retrying", "error", err, "retryIn", delay, "failures", failures)
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

// sleep waits d. It returns ctx's error when ctx ends first, or a loss
// reported on lost meanwhile (a nil lost: none).
func (r *refresher) sleep(ctx context.Context, d time.Duration, lost <-chan error) error {
	if d <= 0 {
		select {
		case err := <-lost:
			return err
		default:
			return ctx.Err()
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-lost:
		return err
	case <-t.C:
		return nil
	}
}
