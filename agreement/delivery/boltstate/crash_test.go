package boltstate_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
)

// crashEnv makes the test binary a child that writes to a state file
// until it is killed.
const crashEnv = "BOLTSTATE_CRASH_CHILD"

// TestKill9KeepsEveryAcknowledgedWrite kills a writing process with
// SIGKILL at random points, several times over one file, and after each
// kill requires the file to open, to be whole (bbolt's pages, every value,
// every index), and to hold every write the child saw succeed.
func TestKill9KeepsEveryAcknowledgedWrite(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in a child")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	counters := map[string]uint32{} // the highest acknowledged Counter per record
	deleted := map[string]bool{}    // acknowledged deletions, never created again
	var epoch uint64                // the highest acknowledged epoch
	deadline := time.Now().Add(12 * time.Second)
	rounds, acks := 0, 0
	for rounds < 8 && time.Now().Before(deadline) {
		rounds++
		lines := runAndKill(t, path, time.Duration(20+rng.IntN(300))*time.Millisecond)
		for _, l := range lines {
			f := strings.Fields(l)
			switch f[0] {
			case "updated":
				n, err := strconv.ParseUint(f[2], 10, 32)
				require.NoError(t, err)
				counters[f[1]] = max(counters[f[1]], uint32(n))
			case "deleted":
				deleted[f[1]] = true
			case "epoch":
				n, err := strconv.ParseUint(f[1], 10, 64)
				require.NoError(t, err)
				epoch = max(epoch, n)
			}
			acks++
		}

		st, _, err := boltstate.Open(path, boltstate.Options{})
		require.NoError(t, err, "round %d: the file opens after kill -9", rounds)
		ctx := t.Context()
		require.NoError(t, boltstate.Check(ctx, st), "round %d: the file is whole after kill -9", rounds)
		for id, want := range counters {
			got, err := st.Get(ctx, id)
			require.NoError(t, err, "round %d: acknowledged record %s", rounds, id)
			assert.GreaterOrEqual(t, got.Counter, want, "round %d: %s holds every acknowledged update", rounds, id)
			assert.Len(t, got.Slots, 3, "round %d: %s is whole", rounds, id)
		}
		for id := range deleted {
			_, err := st.Get(ctx, id)
			assert.ErrorIs(t, err, state.ErrNotFound, "round %d: acknowledged deletion of %s", rounds, id)
		}
		e, err := st.NewEpoch(ctx)
		require.NoError(t, err)
		assert.Greater(t, e, epoch, "round %d: epochs never repeat across kill -9", rounds)
		epoch = e
		require.NoError(t, st.Close())
	}
	t.Logf("%d kills, %d acknowledged writes checked", rounds, acks)
	require.Greater(t, acks, rounds, "the children wrote between kills")
}

// runAndKill starts a writing child on path, kills it with SIGKILL after
// its first acknowledged write and delay, and returns the lines of the
// writes it acknowledged.
func runAndKill(t *testing.T, path string, delay time.Duration) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())

	var lines []string
	first := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		once := sync.OnceFunc(func() { close(first) })
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "updated ") || strings.HasPrefix(l, "deleted ") || strings.HasPrefix(l, "epoch ") {
				lines = append(lines, l)
				once()
			}
		}
		once()
	}()
	select {
	case <-first:
	case <-ctx.Done():
		t.Fatal("the child acknowledged no write")
	}
	time.Sleep(delay)
	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	<-read
	err = cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit) && !exit.Exited(), "the child was killed, not finished: %v", err)
	return lines
}

// TestCrashChild writes to the state with several goroutines until it is
// killed, printing each write once it returned: single Updates, batched
// Updates, creations and deletions, claims and epochs.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("run by TestKill9KeepsEveryAcknowledgedWrite")
	}
	st, _, err := boltstate.Open(path, boltstate.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	ctx := context.Background()
	var out sync.Mutex
	ack := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(4)
	}
	ensure := func(id string, node int) state.Record {
		r, err := st.Get(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			rec := record(id, node)
			if err := st.Create(ctx, rec); err != nil {
				fail(err)
			}
			return *rec
		}
		if err != nil {
			fail(err)
		}
		return r
	}
	var wg sync.WaitGroup
	// Single updates of each writer's own records.
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%02d", w, i%25)
				for { // claims and marks of the last writer change records too
					r := ensure(id, w)
					r.Counter++
					r.NextAttempt = time.Now().Add(time.Duration(i%7) * time.Second)
					err := st.Update(ctx, "", &r)
					if errors.Is(err, state.ErrConflict) {
						continue
					}
					if err != nil {
						fail(err)
					}
					ack("updated %s %d", id, r.Counter)
					break
				}
			}
		})
	}
	// Batched updates: 40 records per transaction.
	wg.Go(func() {
		for {
			recs := make([]*state.Record, 40)
			for i := range recs {
				r := ensure(fmt.Sprintf("batch-%02d", i), 9)
				r.Counter++
				recs[i] = &r
			}
			err := st.Update(ctx, "", recs...)
			var conflict *state.ConflictError
			if err != nil && !errors.As(err, &conflict) {
				fail(err)
			}
			for _, r := range recs {
				if conflict == nil || !slices.Contains(conflict.IDs, r.ID) {
					ack("updated %s %d", r.ID, r.Counter)
				}
			}
		}
	})
	// Creations and deletions, claims, marks and epochs.
	wg.Go(func() {
		for i := 0; ; i++ {
			id := fmt.Sprintf("tmp-%d-%d", os.Getpid(), i)
			if err := st.Create(ctx, record(id, i%3)); err != nil {
				fail(err)
			}
			if err := st.Delete(ctx, id); err != nil {
				fail(err)
			}
			ack("deleted %s", id)
			if _, err := st.MarkDue(ctx, state.Selector{StoreNames: []string{fmt.Sprintf("org/s%d", i%5)}}, time.Now(), true); err != nil {
				fail(err)
			}
			if _, err := st.Due(ctx, "", time.Now(), time.Minute, 10); err != nil {
				fail(err)
			}
			e, err := st.NewEpoch(ctx)
			if err != nil {
				fail(err)
			}
			ack("epoch %d", e)
		}
	})
	wg.Wait()
}

// record is a record with three service secrets over a few shared names.
func record(id string, node int) *state.Record {
	r := &state.Record{ID: id, Node: fmt.Sprintf("node-%d", node), Phase: state.PhaseActive, LastError: strings.Repeat("x", 100)}
	for i := range 3 {
		name := fmt.Sprintf("secret%d", i)
		r.Services = append(r.Services, bindingOf(name, fmt.Sprintf("org/node-%d/s%d", node, i), fmt.Sprintf("org/s%d", (node+i)%5)))
		r.Slots = append(r.Slots, state.Slot{Service: i, Name: name, Desired: state.Content{StoreName: fmt.Sprintf("org/s%d", i)}})
	}
	return r
}

func bindingOf(secret string, storeNames ...string) binding.ServiceBinding {
	return binding.ServiceBinding{Secrets: map[string]binding.BoundSecret{secret: {StoreNames: storeNames}}}
}
