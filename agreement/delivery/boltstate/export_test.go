package boltstate

import "context"

// Check exposes the file check to the external tests.
func Check(ctx context.Context, s *State) error { return s.check(ctx) }
