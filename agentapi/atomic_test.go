package agentapi_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// versionContent is the content of file i at version v: large enough that
// a write takes several system calls, and different in every byte run.
func versionContent(v, i int) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "v%d-file%02d|", v, i), 8<<10/11)
}

// batch is the secrets of service A with every file at version v.
func batch(v, files int) map[string]agreement.SecretDetails {
	m := make(map[string]agreement.SecretDetails, files)
	for i := range files {
		m[fmt.Sprintf("s%02d", i)] = rawSecret(versionContent(v, i))
	}
	return m
}

func TestReadersNeverSeePartialFiles(t *testing.T) {
	ctx := context.Background()
	const versions, updates, readers = 3, 40, 2
	s := openStore(t, agentapi.Options{})
	p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{Service: refA, Secrets: batch(0, 1)}}}
	_, err := s.ApplyProposal(ctx, p, agentapi.Instances{refA: {ID: "a"}})
	require.NoError(t, err)
	file := mountFile(t, s, "a", "s00")
	valid := map[string]bool{}
	for v := range versions {
		valid[string(versionContent(v, 0))] = true
	}

	var stop atomic.Bool
	var reads, bad atomic.Int64
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			for !stop.Load() {
				var b []byte
				var err error
				if r%2 == 0 {
					b, err = os.ReadFile(file) // what the container sees
				} else {
					b, err = s.ReadSecret(ctx, "a", "s00") // what GET /secrets/{name} sends
				}
				if err != nil || !valid[string(b)] {
					bad.Add(1)
				}
				reads.Add(1)
			}
		})
	}
	for k := 1; k <= updates; k++ {
		_, err := s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: batch(k%versions, 1)}))
		require.NoError(t, err)
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, bad.Load(), "reads that saw a missing, empty or partial file")
	assert.Greater(t, reads.Load(), int64(updates), "the readers hardly ran")
}

const killChildEnv = "EDGESECRETS_AGENTAPI_KILL_CHILD_ROOT"

// TestKillMidBatchChild is the process TestKillMidBatch kills: it applies
// updates of every file, alternating two versions, until it dies.
func TestKillMidBatchChild(t *testing.T) {
	root := os.Getenv(killChildEnv)
	if root == "" {
		t.Skip("helper process of TestKillMidBatch")
	}
	ctx := context.Background()
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root})
	require.NoError(t, err)
	var updates [2]agreement.Update
	for v := range updates {
		updates[v], err = agreement.NewSecretsUpdate("ag-1", agreement.SecretsUpdate{Services: []agreement.ServiceSecrets{{Service: refA, Secrets: batch(v, killFiles)}}})
		require.NoError(t, err)
	}
	for k := 1; ; k++ {
		_, err = s.ApplyUpdate(ctx, updates[k%2])
		require.NoError(t, err)
		if k == 1 {
			fmt.Println("ready")
		}
	}
}

const killFiles = 12

func TestKillMidBatch(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "secrets")
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root})
	require.NoError(t, err)
	p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{Service: refA, Secrets: batch(0, killFiles)}}}
	_, err = s.ApplyProposal(ctx, p, agentapi.Instances{refA: {ID: "a"}})
	require.NoError(t, err)
	mount := instanceInfo(t, s, "a").MountSource
	require.NoError(t, s.Close())

	mixed := 0
	const rounds = 5
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillMidBatchChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), killChildEnv+"="+root)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		out := bufio.NewScanner(stdout)
		for out.Scan() && out.Text() != "ready" {
		}
		require.Equal(t, "ready", out.Text(), "the child died before its first batch")
		time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		err = cmd.Wait()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		ws, ok := exit.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child ended before the kill: %v", err)

		seen := map[int]bool{}
		for i := range killFiles {
			b, err := os.ReadFile(filepath.Join(mount, fmt.Sprintf("s%02d", i)))
			require.NoError(t, err, "round %d: file %d", round, i)
			switch {
			case bytes.Equal(b, versionContent(0, i)):
				seen[0] = true
			case bytes.Equal(b, versionContent(1, i)):
				seen[1] = true
			default:
				t.Fatalf("round %d: file %d is neither the old nor the new version (%d bytes)", round, i, len(b))
			}
		}
		t.Logf("round %d: versions seen %v", round, seen)
		if len(seen) == 2 {
			mixed++
		}

		// The next Open cleans up after the kill and keeps the instance.
		s, err := agentapi.Open(ctx, agentapi.Options{Root: root})
		require.NoError(t, err, "round %d", round)
		info, ok := s.Instance("a")
		require.True(t, ok)
		assert.Len(t, info.Secrets, killFiles)
		require.NoError(t, s.Close())
		assert.Empty(t, tree(t, filepath.Join(root, "tmp"))[1:], "staging files left after Open")
	}
	t.Logf("%d of %d kills landed between two files of a batch", mixed, rounds)
}
