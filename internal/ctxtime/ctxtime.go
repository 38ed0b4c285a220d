// Package ctxtime holds the one way the module waits: for a duration or
// until a context ends, whichever comes first.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits for d or until ctx ends, and reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
