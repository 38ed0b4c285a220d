package boltstate

import (
	"context"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
)

// Check exposes the file check to the external tests; st is a State
// Open returned.
func Check(ctx context.Context, st delivery.State) error { return st.(*state).check(ctx) }

// Commits returns how many write transactions st, a State Open returned,
// committed.
func Commits(st delivery.State) int64 { return st.(*state).commits.Load() }
