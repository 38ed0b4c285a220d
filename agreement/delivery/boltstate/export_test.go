package boltstate

import (
	"context"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// Check exposes the file check to the external tests; st is a State
// Open returned.
func Check(ctx context.Context, st state.Backend) error { return st.(*State).check(ctx) }

// Commits returns how many write transactions st, a State Open returned,
// committed.
func Commits(st state.Backend) int64 { return st.(*State).commits.Load() }
