package testkit

import (
	"os"
	"strconv"
	"testing"
)

// InCI reports whether the CI environment variable is set to a true value.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Unavailable ends t because a real component it needs (a server, a tool)
// is missing: under CI=true it fails, elsewhere it skips. msg says what is
// missing and how to get it.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (required in CI)", msg)
	}
	t.Skipf("skipping: %s", msg)
}
