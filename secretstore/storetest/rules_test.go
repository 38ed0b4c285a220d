package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
)

// breakingHarness makes test drivers that commit breaks.
type breakingHarness struct {
	harness
	breaks []string
}

func (h *breakingHarness) MakeDriver(context.Context) (driver.Store, error) {
	d := testkit.NewDriver(h.breaks...)
	h.drivers = append(h.drivers, d)
	return testkit.Batching(d), nil
}

// The test driver is careless where the portable type is strict: it
// validates no name, serves after Close, ignores contexts, keeps and
// returns the very maps it is given, lists sloppily, fails to delete a
// missing secret and ignores compare-and-set conditions. Through
// secretstore.Store the suite passes all the same (but for the atomicity
// of racing compare-and-set writes, which only a driver can provide).
func TestPortableTypeEnforcesSharedRules(t *testing.T) {
	breaks := []string{testkit.BreakSloppyList, testkit.BreakNotFoundOnDelete, testkit.BreakIgnoreConditions}
	storetest.Run(t, func(context.Context, *testing.T) (storetest.Harness, error) {
		return &breakingHarness{breaks: breaks}, nil
	}, storetest.Options{CASNotAtomic: true})
}

func TestConformanceOfTheTestDriver(t *testing.T) {
	storetest.Run(t, newHarness, storetest.Options{})
}

// envBreak selects the break TestConformanceOfABrokenDriver commits; it
// runs only in the child processes TestEveryDriverRuleIsChecked starts.
const envBreak = "STORETEST_BREAK"

func TestConformanceOfABrokenDriver(t *testing.T) {
	b := os.Getenv(envBreak)
	if b == "" {
		t.Skip("run by TestEveryDriverRuleIsChecked")
	}
	storetest.Run(t, func(context.Context, *testing.T) (storetest.Harness, error) {
		return &breakingHarness{breaks: []string{b}}, nil
	}, storetest.Options{})
}

// Each rule only a driver can keep, broken in the test driver, makes its
// conformance case fail: the suite through the portable type is as strict
// about drivers as it was about stores.
func TestEveryDriverRuleIsChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a test process per rule")
	}
	for b, c := range testkit.CaseBroken {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestConformanceOfABrokenDriver$/^"+c+"$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), envBreak+"="+b)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed a driver that breaks %s:\n%s", b, out)
			lines := strings.Split(string(out), "\n")
			assert.True(t, slices.ContainsFunc(lines, func(l string) bool {
				return strings.Contains(l, "--- FAIL: TestConformanceOfABrokenDriver/"+c+" ")
			}), "case %s fails:\n%s", c, out)
		})
	}
}
