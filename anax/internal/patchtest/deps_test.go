package patchtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// moduleVersions runs go list -m all in dir with the given GOWORK and maps
// each dependency's path to its selected version (main modules, which have
// none, are left out).
func moduleVersions(t *testing.T, dir, gowork string) map[string]string {
	t.Helper()
	cmd := exec.Command(tool(t, "go"), "list", "-m", "all")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+gowork, "GOFLAGS=-mod=readonly")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list -m all in %s (GOWORK=%s):\n%s", dir, gowork, stderr.String())
	mods := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 {
			mods[f[0]] = f[1]
		}
	}
	require.NoError(t, sc.Err())
	return mods
}

// TestCombinedBuildRaisedVersions logs every module whose version in the
// combined build (anax with edgesecrets, the workspace) differs from the
// one anax's own go.mod selects, for anax/README.md's "What changes".
func TestCombinedBuildRaisedVersions(t *testing.T) {
	src := patchedAnax(t)
	work := workspace(t)
	own := moduleVersions(t, src, "off")
	combined := moduleVersions(t, src, work)
	require.NotEmpty(t, own)

	var raised, missing []string
	for path, v := range own {
		cv, ok := combined[path]
		switch {
		case !ok:
			missing = append(missing, path+" "+v)
		case cv != v:
			raised = append(raised, fmt.Sprintf("%s %s => %s", path, v, cv))
		}
	}
	sort.Strings(raised)
	require.Empty(t, missing, "modules of anax's build missing from the combined build")
	t.Logf("%d of anax's %d modules have another version in the combined build:\n%s",
		len(raised), len(own), strings.Join(raised, "\n"))
}
