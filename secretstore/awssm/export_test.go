package awssm

import (
	"context"

	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// NewDriver returns the driver New wraps, for the conformance harness.
func NewDriver(ctx context.Context, opts Options) (driver.Store, error) {
	d, _, err := newDriver(ctx, opts)
	return d, err
}
