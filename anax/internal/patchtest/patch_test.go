package patchtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// patches are anax/patches/*.patch in the order scripts/devanax.sh applies them.
func patches(t *testing.T) []string {
	t.Helper()
	ps, err := filepath.Glob(filepath.Join(repoRoot(t), "anax", "patches", "*.patch"))
	require.NoError(t, err)
	require.NotEmpty(t, ps, "no patches in anax/patches")
	sort.Strings(ps)
	return ps
}

// inexact matches what patch prints for a hunk it had to move or fuzz to
// apply: a patch that needs either no longer matches the tree exactly.
var inexact = regexp.MustCompile(`(?i)offset|fuzz|hunk`)

// applyPatch runs patch -p1 with file on dir, refusing fuzz, and fails t
// unless every hunk applies exactly.
func applyPatch(t *testing.T, dir, file string, args ...string) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command(tool(t, "patch"), append([]string{"-p1", "--batch", "--forward", "--fuzz=0", "-d", dir}, args...)...)
	cmd.Stdin = f
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s does not apply to %s:\n%s", filepath.Base(file), dir, out)
	require.NotRegexp(t, inexact, string(out), "%s applies to %s only inexactly:\n%s", filepath.Base(file), dir, out)
}

// patchedCopy is a fresh copy of the pristine tree with every patch applied.
func patchedCopy(t *testing.T) string {
	t.Helper()
	tree := filepath.Join(t.TempDir(), "anax")
	out, err := exec.Command("cp", "-R", pristineAnax(t), tree).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("chmod", "-R", "u+w", tree).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, p := range patches(t) {
		applyPatch(t, tree, p)
	}
	return tree
}

func TestFirstPatchAppliesToThePristineTree(t *testing.T) {
	// The read-only tree itself, as published: a dry run writes nothing.
	applyPatch(t, pristineAnax(t), patches(t)[0], "--dry-run")
}

func TestPatchSeriesAppliesCleanly(t *testing.T) {
	tree := patchedCopy(t)
	out, err := exec.Command("diff", "-rq", pristineAnax(t), tree).CombinedOutput()
	require.Error(t, err, "the patches changed nothing")
	require.NotEmpty(t, out)
}

func TestWorkspaceCopyIsPristinePlusPatches(t *testing.T) {
	src := patchedAnax(t)
	out, err := exec.Command("diff", "-r", patchedCopy(t), src).CombinedOutput()
	require.NoError(t, err, "%s differs from the pristine tree with anax/patches applied (rerun scripts/devanax.sh):\n%s", src, out)
}
