package identity

import "time"

// Clock is the time source of the Issuer, the Verifier and the Refresher,
// injected so tests control time. The zero value of every options struct
// uses the system clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After waits for d to elapse and then sends the current time, like
	// time.After.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func clockOrSystem(c Clock) Clock {
	if c == nil {
		return systemClock{}
	}
	return c
}
