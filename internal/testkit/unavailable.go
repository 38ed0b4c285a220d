package testkit

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// CheckUnavailable checks the rule for a test whose real component (a Vault
// or PostgreSQL server) is missing: need, which gets the component for its
// test, fails that test when CI=true and skips it when CI is unset or
// false, with a message holding each of want (what is missing, how to get
// it). The caller makes the component missing first (t.Setenv).
func CheckUnavailable(t *testing.T, need func(testing.TB), want ...string) {
	t.Helper()
	for _, tc := range []struct {
		ci         string
		wantFailed bool
	}{
		{ci: "true", wantFailed: true},
		{ci: "", wantFailed: false},
		{ci: "false", wantFailed: false},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			rec := &endingTB{TB: t}
			func() {
				defer func() {
					if r := recover(); r != nil && r != errEnded { //nolint:errorlint // a panic value, not an error chain
						panic(r)
					}
				}()
				need(rec)
			}()
			assert.Equal(t, tc.wantFailed, rec.failed, "fails in CI: %s", rec.msg)
			assert.Equal(t, !tc.wantFailed, rec.skipped, "skips outside CI: %s", rec.msg)
			for _, w := range want {
				assert.Contains(t, rec.msg, w)
			}
		})
	}
}

// errEnded is what endingTB panics with to stop the function at a Skipf or
// Fatalf, as the real ones stop the test's goroutine.
var errEnded = fmt.Errorf("testkit: test ended")

// endingTB records Skipf and Fatalf instead of ending the real test.
type endingTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (e *endingTB) Helper() {}

func (e *endingTB) Skipf(format string, args ...any) {
	e.skipped, e.msg = true, fmt.Sprintf(format, args...)
	panic(errEnded)
}

func (e *endingTB) Fatalf(format string, args ...any) {
	e.failed, e.msg = true, fmt.Sprintf(format, args...)
	panic(errEnded)
}
