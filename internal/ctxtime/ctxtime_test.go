package ctxtime

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		assert.True(t, Sleep(t.Context(), time.Minute), "the duration passed")
		assert.Equal(t, time.Minute, time.Since(start))

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		assert.False(t, Sleep(ctx, time.Minute), "the context ended first")
		assert.Equal(t, time.Second, time.Since(start))
	})
}
