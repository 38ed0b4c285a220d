package testkit_test

import (
	"testing"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

func TestUnavailableFailsInCIAndSkipsElsewhere(t *testing.T) {
	testkit.CheckUnavailable(t, func(tb testing.TB) {
		testkit.Unavailable(tb, "spin is missing; apt-get install spin")
	}, "spin is missing", "apt-get install spin")
}
