package patchtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/stretchr/testify/require"
)

const getWorkspace = `run: eval "$(scripts/devanax.sh)"; export EDGESECRETS_ANAX_SRC EDGESECRETS_ANAX_WORK GOWORK=$EDGESECRETS_ANAX_WORK`

// repoRoot is the edgesecrets checkout this package sits in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	return root
}

// pristineAnax is the unpatched anax source, where scripts/devanax.sh finds it.
func pristineAnax(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("EDGESECRETS_THIRDPARTY")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "..", "shared", "thirdparty")
	}
	dir = filepath.Join(dir, "anax")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		testkit.Unavailable(t, "no pristine anax source at "+dir+": set EDGESECRETS_THIRDPARTY to the directory holding anax/")
	}
	return dir
}

// patchedAnax is the patched copy scripts/devanax.sh made.
func patchedAnax(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("EDGESECRETS_ANAX_SRC")
	if dir == "" {
		testkit.Unavailable(t, "EDGESECRETS_ANAX_SRC is not set: "+getWorkspace)
	}
	return dir
}

// workspace is the go.work joining the library, anax/ and the patched copy.
func workspace(t *testing.T) string {
	t.Helper()
	work := os.Getenv("EDGESECRETS_ANAX_WORK")
	if work == "" {
		testkit.Unavailable(t, "EDGESECRETS_ANAX_WORK is not set: "+getWorkspace)
	}
	return work
}

// tool is the path of a program the tests run.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testkit.Unavailable(t, name+" is not installed (apt-get install "+name+")")
	}
	return p
}
