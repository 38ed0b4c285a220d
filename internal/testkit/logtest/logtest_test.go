package logtest_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
)

func TestLoggerCapturesConcurrentDebugRecords(t *testing.T) {
	logger, buf := logtest.NewLogger()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { logger.Debug("record", "n", i) })
	}
	wg.Wait()
	out := buf.String()
	for i := range 8 {
		assert.Contains(t, out, `"msg":"record","n":`+string(rune('0'+i))+`}`)
	}
}
