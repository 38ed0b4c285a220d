package boltstate_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/binding"
)

func openState(t *testing.T, path string) state.Backend {
	t.Helper()
	st, _ := openFile(t, path)
	return st
}

// openFile opens the file at path, closed at the end of the test, and
// returns its State and its CertStore.
func openFile(t *testing.T, path string) (state.Backend, identity.CertStore) {
	t.Helper()
	st, certs, err := boltstate.Open(path, boltstate.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st, certs
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "var", "lib", "agbot")
	path := filepath.Join(dir, "state.db")
	openState(t, path)

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the file is the agbot's alone")
	di, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm(), "a created directory is the agbot's alone")
}

func TestOpenTightensAnOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st := openState(t, path)
	require.NoError(t, st.Close())
	require.NoError(t, os.Chmod(path, 0o644))
	openState(t, path)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "Open makes a file others could read 0600")
}

// holdEnv makes the test binary a child that holds a state file open.
const holdEnv = "BOLTSTATE_TEST_HOLD"

func TestOpenHeldByAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHoldChild$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the child holds the file")
	require.Equal(t, "held\n", line)

	start := time.Now()
	_, _, err = boltstate.Open(path, boltstate.Options{LockTimeout: 200 * time.Millisecond})
	require.Error(t, err, "a file another process holds cannot be opened")
	assert.Contains(t, err.Error(), "in use by another process", "the error says why")
	assert.Contains(t, err.Error(), path, "the error names the file")
	assert.Less(t, time.Since(start), 10*time.Second, "Open gives up after LockTimeout")

	require.NoError(t, stdin.Close()) // the child closes its state and exits
	require.NoError(t, cmd.Wait())
	st := openState(t, path)
	_, err = st.NewEpoch(t.Context())
	require.NoError(t, err, "the file opens once the other process let go")
}

// TestHoldChild is the child of TestOpenHeldByAnotherProcess.
func TestHoldChild(t *testing.T) {
	path := os.Getenv(holdEnv)
	if path == "" {
		t.Skip("run by TestOpenHeldByAnotherProcess")
	}
	st, _, err := boltstate.Open(path, boltstate.Options{})
	require.NoError(t, err)
	fmt.Println("held")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
	require.NoError(t, st.Close())
}

func TestOpenRejectsWhatIsNotAStateFile(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	require.NoError(t, os.WriteFile(junk, []byte(strings.Repeat("not a bbolt file ", 1000)), 0o600))
	_, _, err := boltstate.Open(junk, boltstate.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a state file")
	assert.Contains(t, err.Error(), junk)
	raw, err := os.ReadFile(junk)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("not a bbolt file ", 1000), string(raw), "a foreign file is left as it was")

	_, _, err = boltstate.Open(dir, boltstate.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")

	_, _, err = boltstate.Open("", boltstate.Options{})
	require.Error(t, err, "no file name")
}

func TestBadInputIsRefusedWithAReason(t *testing.T) {
	st := openState(t, filepath.Join(t.TempDir(), "state.db"))
	ctx := t.Context()
	err := st.Create(ctx, &state.Record{Node: "n"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "agreement id is empty")
	err = st.Create(ctx, &state.Record{ID: strings.Repeat("x", 40000), Node: "n"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "agreement id is 40000 bytes long")
	assert.ErrorContains(t, st.PutWait(ctx, state.Wait{}), "wait id is empty")
	assert.ErrorContains(t, st.PutObservations(ctx, "", state.Observation{State: state.Present}), "observed store name is empty")
	assert.NoError(t, boltstate.Check(ctx, st), "nothing was half-written")
	names, err := st.Names(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, names)
}

// TestOddKeysAreKeptExactly: ids, nodes, names and texts are stored as
// given, bytes that are not UTF-8 included.
func TestOddKeysAreKeptExactly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st := openState(t, path)
	ctx := t.Context()
	odd := []string{"\xff\xfe", "a\x00b", "ü/ñ", " "}
	var want []state.Record
	for _, s := range odd {
		rec := &state.Record{
			ID: "agr-" + s, Node: "node-" + s, LastError: s, NextAttempt: time.Unix(1, 0),
			Services: []binding.ServiceBinding{{Secrets: map[string]binding.BoundSecret{s: {StoreNames: []string{"org/" + s}, Format: s}}}},
			Slots:    []state.Slot{{Name: s, Desired: state.Content{StoreName: "org/" + s}}},
		}
		require.NoError(t, st.Create(ctx, rec))
		want = append(want, *rec)
	}
	require.NoError(t, st.Close())
	st = openState(t, path)
	for _, w := range want {
		got, err := st.Get(ctx, w.ID)
		require.NoError(t, err)
		assert.Equal(t, w.LastError, got.LastError)
		assert.Equal(t, w.Node, got.Node)
		assert.Equal(t, w.Services, got.Services)
		assert.Equal(t, w.Slots, got.Slots)
		n, err := st.MarkDue(ctx, state.Selector{Nodes: []string{w.Node}}, time.Unix(0, 0), false)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "node %q selects its record", w.Node)
	}
	names, err := st.Names(ctx, "")
	require.NoError(t, err)
	assert.Len(t, names, len(odd))
	assert.NoError(t, boltstate.Check(ctx, st))
}
