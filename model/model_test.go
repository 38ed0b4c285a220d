// Package model checks the Promela model of the delivery protocol,
// delivery.pml, with the spin model checker: every property in every
// interleaving within the model's fault budgets, and, for each property, a
// deliberately broken variant that must produce a counterexample. See
// README.md.
package model

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// check is one verification run of delivery.pml.
type check struct {
	name string
	// defines are passed to spin -a (model configuration and variants).
	defines []string
	// liveness runs an acceptance-cycle search under weak fairness for
	// the ltl formula ltl; otherwise a safety search of the assertions.
	liveness bool
	ltl      string
	// wantError: a broken variant, which must produce a counterexample
	// whose message contains wantIn.
	wantError bool
	wantIn    string
}

// budgets returns the fault budgets as spin defines.
func budgets(store, faults, network int) []string {
	return []string{
		"-DMAXV=2",
		"-DSTORE_BUDGET=" + strconv.Itoa(store),
		"-DFAULT_BUDGET=" + strconv.Itoa(faults),
		"-DNET_BUDGET=" + strconv.Itoa(network),
	}
}

func with(defs []string, more ...string) []string { return append(more, defs...) }

// identityFaults is the identity budget as a spin define: agbot restarts
// and the shared identity record lost (or the certificate expired).
func identityFaults(n int) string { return "-DID_BUDGET=" + strconv.Itoa(n) }

// checks are the model's runs: the properties first, then the broken
// variants. The budgets are what an exhaustive search completes within
// about a minute each on one core (README.md: statistics).
var checks = []check{
	// Safety: never_older, never_after_deletion, no_cancel_from_store_failure
	// and one_claim are assertions, checked together. Two runs split the
	// faults so that each search is exhaustive: store faults, lease
	// lapses and an identity fault with a perfect network, then network
	// faults with a healthy store and membership (a rotation, deletion or
	// reappearance in both).
	{name: "safety/store-and-lease-faults", defines: with(budgets(1, 1, 0), identityFaults(1))},
	{name: "safety/network-faults", defines: budgets(1, 0, 1)},
	// Liveness under weak fairness, once the faults stopped, with an
	// identity fault: an agbot restart or the agent's record lost.
	{name: "liveness/converge", defines: with(budgets(1, 0, 0), identityFaults(1)), liveness: true, ltl: "converge"},
	{name: "liveness/deletion", defines: with(budgets(1, 0, 0), identityFaults(1)), liveness: true, ltl: "deletion"},

	// Broken variants: each must produce a counterexample.
	{name: "broken/equal-seq", defines: with(budgets(1, 1, 0), "-DBROKEN_EQUAL_SEQ"), wantError: true, wantIn: "assertion violated"},
	{name: "broken/forget-floor", defines: with(budgets(1, 1, 0), "-DBROKEN_FORGET_FLOOR"), wantError: true, wantIn: "!(ended)"},
	{name: "broken/go-cache-hole", defines: with(budgets(1, 1, 0), "-DGO_CACHE_HOLE"), wantError: true, wantIn: "nver[k]>=held"},
	{name: "broken/cancel-on-forbidden", defines: with(budgets(0, 1, 0), "-DBROKEN_CANCEL_ON_FORBIDDEN"), wantError: true, wantIn: "obsGenuine"},
	{name: "broken/no-lease-check", defines: with(budgets(1, 1, 0), "-DBROKEN_NO_LEASE_CHECK"), wantError: true, wantIn: "owner!=(i+1)"},
	{name: "broken/no-confirm", defines: with(budgets(1, 0, 1), "-DBROKEN_NO_CONFIRM"), liveness: true, ltl: "deletion", wantError: true, wantIn: "acceptance cycle"},
	{name: "broken/give-up", defines: with(budgets(0, 0, 1), "-DBROKEN_GIVE_UP"), liveness: true, ltl: "converge", wantError: true, wantIn: "acceptance cycle"},
	// A cancellation stored from a stale decision (a claim of the last
	// cycle), with X present: the ended agreement must not count as
	// converged.
	{name: "broken/stale-decision", defines: with(budgets(1, 0, 0), "-DBROKEN_STALE_DECISION"), liveness: true, ltl: "converge", wantError: true, wantIn: "acceptance cycle"},
	// The wiring before issue 28: identity records in each agbot's memory,
	// and an agent that does not register again when refused.
	{name: "broken/identity-in-memory", defines: with(budgets(1, 0, 0), identityFaults(1), "-DBROKEN_IDENTITY_IN_MEMORY", "-DBROKEN_NO_REREGISTER"), liveness: true, ltl: "converge", wantError: true, wantIn: "acceptance cycle"},
	// A shared record alone is not enough: a lost record needs the agent
	// to register again.
	{name: "broken/no-reregister", defines: with(budgets(1, 0, 0), identityFaults(1), "-DBROKEN_NO_REREGISTER"), liveness: true, ltl: "converge", wantError: true, wantIn: "acceptance cycle"},
}

// runTimeout bounds one run; the searches above take about a minute each.
const runTimeout = 4 * time.Minute

// stats is what pan reports about a search.
type stats struct {
	errors   int
	stored   string
	depth    string
	elapsed  string
	complete bool
	first    string // the first error line, if any
}

var (
	reErrors  = regexp.MustCompile(`errors: (\d+)`)
	reStored  = regexp.MustCompile(`(\S+) states, stored`)
	reDepth   = regexp.MustCompile(`depth reached (\d+)`)
	reElapsed = regexp.MustCompile(`pan: elapsed time (\S+)`)
	reFirst   = regexp.MustCompile(`(?m)^pan:\d+: (.*)$`)
)

func parse(out string) (stats, error) {
	m := reErrors.FindStringSubmatch(out)
	if m == nil {
		return stats{}, errors.New("no \"errors:\" line in pan's output")
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return stats{}, err
	}
	s := stats{errors: n, complete: !strings.Contains(out, "Search not completed") && !strings.Contains(out, "reached -DMEMLIM bound")}
	if m := reStored.FindStringSubmatch(out); m != nil {
		s.stored = m[1]
	}
	if m := reDepth.FindStringSubmatch(out); m != nil {
		s.depth = m[1]
	}
	if m := reElapsed.FindStringSubmatch(out); m != nil {
		s.elapsed = m[1] + " s"
	}
	if m := reFirst.FindStringSubmatch(out); m != nil {
		s.first = m[1]
	}
	return s, nil
}

// tools finds spin and gcc: under CI=true their absence fails the test,
// otherwise it skips it with how to get them.
func tools(t *testing.T) (spin, gcc string) {
	t.Helper()
	spin, errSpin := exec.LookPath("spin")
	gcc, errGCC := exec.LookPath("gcc")
	if errSpin == nil && errGCC == nil {
		return spin, gcc
	}
	msg := "the model check needs spin and gcc: apt-get install spin gcc, or run bash scripts/test.sh"
	testkit.Unavailable(t, msg)
	return "", ""
}

// run generates, compiles and runs the verifier of one check in dir.
func run(ctx context.Context, t *testing.T, spin, gcc string, c check, dir string) (stats, string) {
	t.Helper()
	src, err := os.ReadFile("delivery.pml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "delivery.pml"), src, 0o600))

	cmd := func(name string, args ...string) string {
		c := exec.CommandContext(ctx, name, args...)
		c.Dir = dir
		out, err := c.CombinedOutput()
		require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
		return string(out)
	}
	cmd(spin, append(append([]string{"-a"}, c.defines...), "delivery.pml")...)

	// COLLAPSE compresses the state vector; MEMLIM (MB) keeps a run that
	// outgrows its budget from taking the machine: it then stops, and the
	// search counts as incomplete.
	cflags := []string{"-O2", "-w", "-DCOLLAPSE", "-DMEMLIM=3000", "-o", "pan", "pan.c"}
	runArgs := []string{"-m1000000", "-w25"}
	if c.liveness {
		// NFAIR: weak fairness over the model's seven processes (room for 14).
		cflags = append([]string{"-DNFAIR=4"}, cflags...)
		runArgs = append([]string{"-a", "-f", "-N", c.ltl}, runArgs...)
	} else {
		cflags = append([]string{"-DSAFETY", "-DNOCLAIM"}, cflags...)
	}
	cmd(gcc, cflags...)

	p := exec.CommandContext(ctx, filepath.Join(dir, "pan"), runArgs...)
	p.Dir = dir
	out, err := p.CombinedOutput()
	// pan exits non-zero on some errors; its report says what happened.
	if ctx.Err() != nil {
		t.Fatalf("%s: no result within %s", c.name, runTimeout)
	}
	_ = err
	s, perr := parse(string(out))
	require.NoError(t, perr, "pan output:\n%s", out)
	return s, string(out)
}

// TestModel runs every check of delivery.pml: the properties must hold in
// a complete search, and every broken variant must produce its
// counterexample.
func TestModel(t *testing.T) {
	spin, gcc := tools(t)
	if testing.Short() {
		t.Skip("the model check takes a few minutes; run it without -short")
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
			defer cancel()
			s, out := run(ctx, t, spin, gcc, c, t.TempDir())
			t.Logf("%s: errors %d, states stored %s, depth %s, time %s, complete %t %s",
				c.name, s.errors, s.stored, s.depth, s.elapsed, s.complete, s.first)
			if c.wantError {
				require.NotZero(t, s.errors, "the broken variant produced no counterexample:\n%s", out)
				require.Contains(t, s.first, c.wantIn, "the counterexample is not the expected one:\n%s", out)
				return
			}
			require.Zero(t, s.errors, "a property fails: %s (replay: spin -t -p %s delivery.pml)\n%s",
				s.first, strings.Join(c.defines, " "), out)
			require.True(t, s.complete, "the search did not complete within its memory bound:\n%s", out)
		})
	}
}

// TestParse checks the reading of pan's report.
func TestParse(t *testing.T) {
	ok := `State-vector 120 byte, depth reached 3439, errors: 0
  6768786 states, stored
pan: elapsed time 40.8 seconds`
	s, err := parse(ok)
	require.NoError(t, err)
	require.Equal(t, stats{errors: 0, stored: "6768786", depth: "3439", elapsed: "40.8 s", complete: true}, s)

	bad := `pan:1: assertion violated obsGenuine (at depth 243)
Warning: Search not completed
State-vector 120 byte, depth reached 2924, errors: 1
    81898 states, stored`
	s, err = parse(bad)
	require.NoError(t, err)
	require.Equal(t, 1, s.errors)
	require.False(t, s.complete)
	require.Equal(t, "assertion violated obsGenuine (at depth 243)", s.first)

	_, err = parse("spin: syntax error")
	require.Error(t, err)
}
