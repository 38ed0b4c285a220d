package boltstate

import "context"

// Check exposes the file check to the external tests.
func Check(ctx context.Context, s *State) error { return s.check(ctx) }

// Commits returns how many write transactions s committed.
func Commits(s *State) int64 { return s.commits.Load() }
