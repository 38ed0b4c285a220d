package testkit

import (
	"bytes"
	"sync"
)

// TailBuffer is an io.Writer keeping the last Max bytes written to it, for
// the output of a server a test runs. Safe for concurrent use; the zero
// value keeps everything.
type TailBuffer struct {
	// Max is how many bytes it keeps; zero or less keeps all.
	Max int

	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p, dropping the oldest bytes beyond Max. It never fails.
func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.Max; b.Max > 0 && over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

// String returns what it keeps.
func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
