// Package logtest captures log output in tests: a Buffer that the
// goroutines of a server under test may write concurrently, and a
// debug-level JSON logger writing to it, for canary checks that no value
// reaches a log line.
package logtest

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// NewLogger returns a logger writing every record, debug level included, as
// JSON to a new Buffer.
func NewLogger() (*slog.Logger, *Buffer) {
	buf := &Buffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}
