package pgstate_test

import (
	"os"
	"testing"

	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// TestMain runs the tests, or, in a child process the agbot tests start,
// one agbot (see startChildAgbot).
func TestMain(m *testing.M) {
	if cfg := os.Getenv(envAgbotChild); cfg != "" {
		runAgbotChild(cfg)
		os.Exit(0)
	}
	os.Exit(pgtest.Main(m))
}
