package testkit_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

func TestTailBufferKeepsTheLastMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"under the limit", 10, []string{"abc", "def"}, "abcdef"},
		{"at the limit", 6, []string{"abc", "def"}, "abcdef"},
		{"over the limit", 4, []string{"abc", "def"}, "cdef"},
		{"one write over the limit", 3, []string{"abcdefgh"}, "fgh"},
		{"no limit", 0, []string{"abc", "def"}, "abcdef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &testkit.TailBuffer{Max: tc.max}
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				assert.NoError(t, err)
				assert.Equal(t, len(w), n)
			}
			assert.Equal(t, tc.want, b.String())
		})
	}
}

func TestTailBufferConcurrentWrites(t *testing.T) {
	b := &testkit.TailBuffer{Max: 1000}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("xxxxxxxxxx"))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, strings.Repeat("x", 1000), b.String())
}
