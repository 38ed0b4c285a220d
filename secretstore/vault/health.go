package vault

import (
	"context"
	"errors"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// HealthState is what Health found the server to be.
type HealthState string

// Health states.
const (
	// Unsealed: an active node, serving requests.
	Unsealed HealthState = "unsealed"
	// Standby: an unsealed standby (or performance standby) node; it
	// forwards or serves requests as its cluster is configured.
	Standby HealthState = "standby"
	// Sealed: the server answered but is sealed and serves no secrets.
	Sealed HealthState = "sealed"
	// Uninitialized: the server answered but has never been initialised.
	Uninitialized HealthState = "uninitialized"
	// Unreachable: no answer (network, TLS, timeout).
	Unreachable HealthState = "unreachable"
)

// Health is the result of a health check.
type Health struct {
	// State is the server's state.
	State HealthState
	// Version is the server's Vault version, when it answered.
	Version string
}

// Serving reports whether the server can serve requests.
func (h Health) Serving() bool { return h.State == Unsealed || h.State == Standby }

// OpHealth is the operation name health checks are recorded under.
const OpHealth = "health"

// Health asks the server's sys/health endpoint (which needs no token) for
// its state. A sealed or uninitialised server is a state, not an error: the
// error is non-nil only when the server could not be asked, with State
// Unreachable and kind ErrUnavailable, or when ctx ended.
func (s *Store) Health(ctx context.Context) (Health, error) {
	var h Health
	err := s.call(ctx, OpHealth, "", func(ctx context.Context) error {
		r, err := s.client.Sys().HealthWithContext(ctx)
		if err != nil {
			return err
		}
		h.Version = r.Version
		switch {
		case !r.Initialized:
			h.State = Uninitialized
		case r.Sealed:
			h.State = Sealed
		case r.Standby || r.PerformanceStandby:
			h.State = Standby
		default:
			h.State = Unsealed
		}
		return nil
	})
	if err != nil {
		return Health{State: Unreachable}, err
	}
	return h, nil
}

// Recorder receives the outcome of health checks; *secretstore.Monitor
// implements it, so a check feeds its last-interaction time and counters.
type Recorder interface {
	Record(op string, err error)
}

// CheckHealth calls Health and records the outcome on rec under OpHealth:
// success for a serving server; an ErrUnavailable error for a sealed,
// uninitialised or unreachable one, so the monitor does not count it as a
// successful interaction.
func (s *Store) CheckHealth(ctx context.Context, rec Recorder) (Health, error) {
	h, err := s.Health(ctx)
	rerr := err
	if err == nil && !h.Serving() {
		rerr = secretstore.NewError(OpHealth, "", secretstore.ErrUnavailable, errors.New("vault is "+string(h.State)))
	}
	rec.Record(OpHealth, rerr)
	return h, err
}
