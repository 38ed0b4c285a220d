package boltstate_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
)

// TestBehavesLikeMemoryState runs one random sequence of operations on a
// state.Memory and on a file, with reopens of the file, and requires the
// same answers from both, and a consistent file after each reopen.
func TestBehavesLikeMemoryState(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	mem := state.NewMemory()
	file := openState(t, path)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	when := func() time.Time { return t0.Add(time.Duration(rng.IntN(600)) * time.Second) }
	pick := func(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, rng.IntN(n)) }
	sameErr := func(step int, what string, a, b error) {
		t.Helper()
		for _, kind := range []error{state.ErrNotFound, state.ErrExists, state.ErrConflict} {
			require.Equal(t, errors.Is(a, kind), errors.Is(b, kind), "step %d %s: memory %v, file %v", step, what, a, b)
		}
		require.Equal(t, a == nil, b == nil, "step %d %s: memory %v, file %v", step, what, a, b)
	}
	newRecord := func() *state.Record {
		var services []binding.ServiceBinding
		var slots []state.Slot
		for i := range 1 + rng.IntN(3) {
			name := fmt.Sprintf("s%d", i)
			cands := []string{pick("org/n", 12)}
			if rng.IntN(2) == 0 {
				cands = append(cands, pick("org/n", 12))
			}
			services = append(services, binding.ServiceBinding{Secrets: map[string]binding.BoundSecret{name: {StoreNames: cands}}})
			slots = append(slots, state.Slot{Service: i, Name: name, Desired: state.Content{StoreName: cands[0]}})
		}
		r := &state.Record{ID: pick("agr-", 40), Node: pick("node-", 6), Services: services, Slots: slots, Phase: state.PhaseActive}
		if rng.IntN(3) > 0 {
			r.NextAttempt = when()
		}
		return r
	}
	compareAll := func(step int) {
		t.Helper()
		var a, b []state.Record
		require.NoError(t, mem.Records(ctx, func(r state.Record) bool { a = append(a, r); return true }))
		require.NoError(t, file.Records(ctx, func(r state.Record) bool { b = append(b, r); return true }))
		require.Equal(t, a, b, "step %d: every record", step)
		na, err := mem.Names(ctx, "")
		require.NoError(t, err)
		nb, err := file.Names(ctx, "")
		require.NoError(t, err)
		require.Equal(t, len(na), len(nb), "step %d: names", step)
		if len(na) > 0 {
			require.Equal(t, na, nb, "step %d: names", step)
		}
	}

	for step := range 400 {
		switch op := rng.IntN(10); op {
		case 0, 1:
			r := newRecord()
			c := r.Clone()
			sameErr(step, "Create", mem.Create(ctx, r), file.Create(ctx, &c))
		case 2, 3, 4:
			id := pick("agr-", 40)
			a, errA := mem.Get(ctx, id)
			b, errB := file.Get(ctx, id)
			sameErr(step, "Get", errA, errB)
			require.Equal(t, a, b, "step %d: Get(%s)", step, id)
			if errA != nil {
				continue
			}
			switch rng.IntN(4) {
			case 0:
				a.Node = pick("node-", 6)
			case 1:
				a.NextAttempt = time.Time{}
			default:
				a.NextAttempt, a.Attempts = when(), rng.IntN(5)
			}
			if rng.IntN(5) == 0 {
				a.Revision-- // a stale copy
			}
			b = a.Clone()
			if rng.IntN(3) == 0 {
				// A changed binding: other candidates for one secret.
				sb := a.Services[rng.IntN(len(a.Services))]
				for name, bs := range sb.Secrets {
					bs.StoreNames = []string{pick("org/n", 12)}
					sb.Secrets[name] = bs
				}
				b = a.Clone()
				sameErr(step, "Rebind", mem.Rebind(ctx, "", &a), file.Rebind(ctx, "", &b))
				require.Equal(t, a.Revision, b.Revision)
				continue
			}
			sameErr(step, "Update", mem.Update(ctx, "", &a), file.Update(ctx, "", &b))
			require.Equal(t, a.Revision, b.Revision)
		case 5:
			ids := []string{pick("agr-", 40), pick("agr-", 40)}
			sameErr(step, "Delete", mem.Delete(ctx, ids...), file.Delete(ctx, ids...))
		case 6, 7:
			sel := state.Selector{}
			switch rng.IntN(3) {
			case 0:
				sel.IDs = []string{pick("agr-", 40), pick("agr-", 40)}
			case 1:
				sel.Nodes = []string{pick("node-", 6)}
			default:
				sel.StoreNames = []string{pick("org/n", 12)}
			}
			at, reset := when(), rng.IntN(2) == 0
			na, errA := mem.MarkDue(ctx, sel, at, reset)
			nb, errB := file.MarkDue(ctx, sel, at, reset)
			sameErr(step, "MarkDue", errA, errB)
			require.Equal(t, na, nb, "step %d: MarkDue(%+v) count", step, sel)
		case 8:
			now, lease, limit := when(), time.Duration(rng.IntN(120))*time.Second, 1+rng.IntN(8)
			a, errA := mem.Due(ctx, "", now, lease, limit)
			b, errB := file.Due(ctx, "", now, lease, limit)
			sameErr(step, "Due", errA, errB)
			require.Len(t, b, len(a), "step %d: Due", step)
			if len(a) > 0 {
				require.Equal(t, a, b, "step %d: Due", step)
			}
		case 9:
			compareAll(step)
			if rng.IntN(3) == 0 {
				require.NoError(t, boltstate.Check(ctx, file), "step %d", step)
				require.NoError(t, file.Close())
				file = openState(t, path)
			}
		}
	}
	compareAll(-1)
	assert.NoError(t, boltstate.Check(ctx, file))
}
