package pgstate_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// TestRebindOnSeveralAgbots changes the binding of live agreements shared
// by two agbots, each agbot rebinding half of them while both deliver:
// every agent gets the new store secret's content as one update of the
// agreement it has, and its file goes from the old content straight to
// the new one.
func TestRebindOnSeveralAgbots(t *testing.T) {
	const (
		agreements = 40
		nodes      = 8
		secrets    = 6
	)
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	w := newWorld(t, secrets, nodes)
	fl := w.fleet
	var agbots []*runningAgbot
	for i := range 2 {
		a, err := startAgbot(ctx, w.config(fmt.Sprintf("agbot-%d", i+1), db.URL, 5*time.Second), slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		t.Cleanup(a.stop)
		agbots = append(agbots, a)
	}
	observer := open(t, db.URL, pgstate.Options{})
	all := testAgreements(agreements, nodes, w.names[:secrets/2])
	for _, a := range all {
		require.NoError(t, agbots[0].engine.Register(ctx, a))
	}
	waitConverged(t, observer, fl, nil, 3*time.Minute)

	// Rebind "db" of every agreement to a store secret of the other half,
	// from both agbots at once.
	fl.reset()
	newName := map[string]string{}
	var wg sync.WaitGroup
	for i, a := range all {
		b := a.Services[0].Secrets["db"]
		b.StoreNames = []string{w.names[secrets/2+i%(secrets/2)]}
		a.Services[0].Secrets["db"] = b
		newName[a.ID] = b.StoreNames[0]
		wg.Go(func() {
			assert.NoError(t, agbots[i%2].engine.Register(ctx, a), "rebinding %s", a.ID)
		})
	}
	wg.Wait()
	start := time.Now()
	require.Eventually(t, func() bool {
		ok, err := converged(ctx, observer)
		if err != nil || !ok {
			return false
		}
		written, _ := fl.written()
		for _, a := range all {
			c := written[slotKey{a.ID + "-0", "db"}]
			if len(c) == 0 || !strings.Contains(c[len(c)-1], fileName(newName[a.ID])) {
				return false
			}
		}
		return true
	}, 3*time.Minute, 100*time.Millisecond, "every agent holds its new store secret's content")
	t.Logf("%d agreements rebound by 2 agbots converged %s after the last Register", agreements, time.Since(start).Round(time.Millisecond))

	written, log := fl.written()
	for _, a := range all {
		c := written[slotKey{a.ID + "-0", "db"}]
		assert.Len(t, c, 1, "%s: the new content written once, with nothing between: %q", a.ID, c)
		_, apiWritten := written[slotKey{a.ID + "-0", "api"}]
		assert.False(t, apiWritten, "%s: the secret whose binding did not change was not written", a.ID)
		r, err := observer.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{newName[a.ID]}, r.Services[0].Secrets["db"].StoreNames, "%s: the state holds the new binding", a.ID)
	}
	for _, m := range log {
		assert.Equal(t, agreement.TypeUpdate, m.header.Type, "%s: a rebind is an update of the agreement the agent has", m.header.AgreementID)
		assert.Equal(t, agreement.UpdateKindSecrets, m.kind)
	}
	for _, a := range agbots {
		assert.Zero(t, a.cancels.Load(), "a rebind cancels nothing")
	}

	// The same bindings again, from either agbot: nothing is written.
	revisions := func() map[string]uint64 {
		out := map[string]uint64{}
		require.NoError(t, observer.Records(ctx, func(r state.Record) bool { out[r.ID] = r.Revision; return true }))
		return out
	}
	before := revisions()
	for i, a := range all {
		require.NoError(t, agbots[(i+1)%2].engine.Register(ctx, a))
	}
	assert.Equal(t, before, revisions(), "registering the same bindings again writes nothing")

	// Another service secret name is a new agreement: refused by either
	// agbot, naming the difference.
	changed := all[0]
	changed.Services = []binding.ServiceBinding{{Service: changed.Services[0].Service, Secrets: map[string]binding.BoundSecret{
		"db": changed.Services[0].Secrets["db"], "token": {StoreNames: []string{w.names[0]}, Format: agreement.FormatJSON},
	}}}
	for _, a := range agbots {
		err := a.engine.Register(ctx, changed)
		require.ErrorIs(t, err, state.ErrExists)
		assert.ErrorContains(t, err, `binds secrets "api", "db", not "db", "token"`)
	}
}

// fileName is how putSecret writes a store name into the value.
func fileName(storeName string) string { return strings.ReplaceAll(storeName, "/", "_") + "-gen" }
