package vault

import (
	"context"
	"errors"
	"fmt"

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

// CheckCredentials implements secretstore.CredentialChecker: it asks
// Vault about the store's own token (auth/token/lookup-self, which every
// token may read through the default policy) and adds what the store
// knows itself. It returns nil when Vault accepts the token. A token Vault
// refuses is first replaced by a fresh login when the store can log in
// again, as for any request; when that is impossible or fails, the error
// matches secretstore.ErrPermission and says why, naming where the token
// came from, never the token: a token given by value or environment
// variable that reached its max TTL can never be renewed or replaced; a
// token file that holds no accepted token; a login Vault refuses. An
// unreachable, sealed or failing server is ErrUnavailable: the store
// cannot tell.
//
// A token created without the default policy cannot look itself up;
// the check then fails with ErrPermission too.
func (s *Store) CheckCredentials(ctx context.Context) error {
	err := s.call(ctx, secretstore.OpCheckCredentials, "", func(ctx context.Context) error {
		_, err := s.client.Auth().Token().LookupSelfWithContext(ctx)
		return err
	})
	if err == nil {
		s.auth.recovered()
		return nil
	}
	var se *secretstore.Error
	if errors.As(err, &se) && se.Kind == secretstore.ErrPermission && s.auth.tokenFailure() == nil {
		// Refused although no login failed: a token without the
		// default policy's grant, or one revoked a moment ago.
		se.Err = fmt.Errorf("vault refused auth/token/lookup-self: the token is no longer valid, or its policies lack the default policy's grant of it: %w", se.Err)
	}
	return secretstore.CredentialCheckError(err)
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
