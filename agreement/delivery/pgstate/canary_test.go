package pgstate_test

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state/statetest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// TestCanaryNotInDump runs what three members write for agreements bound
// to secrets whose values are random canaries (claims, deliveries with
// content tags, observations, a rotation, a takeover), then scans a
// pg_dump of the database for the values.
func TestCanaryNotInDump(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	members := joinAll(t, db.URL, pgstate.Options{LeasePeriod: time.Minute}, memberIDs(3)...)
	store := memory.New()
	canaries := map[string][]byte{}
	names := storeNames(6)
	for _, n := range names {
		canaries[n] = []byte("canary-" + rand.Text())
		_, err := store.Put(ctx, &secretstore.Secret{Name: n, Data: edgesecrets.Data{"password": canaries[n]}}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	for i := range 60 {
		require.NoError(t, members[i%3].Create(ctx, newRecord(fmt.Sprintf("agr-%02d", i), time.Now(), names[i%len(names)], names[(i+1)%len(names)])))
	}

	deliver := func(m *member) {
		recs, err := m.Due(ctx, m.id, time.Now(), time.Minute, 0)
		require.NoError(t, err)
		for i := range recs {
			r := &recs[i]
			contents := map[int]state.Content{}
			for j := range r.Slots {
				s, err := store.Get(ctx, r.Slots[j].Desired.StoreName)
				require.NoError(t, err)
				c := state.Content{StoreName: s.Name, Tag: s.ContentTag()}
				r.Slots[j].Desired, r.Slots[j].Acked, contents[j] = c, c, c
				r.LastError = fmt.Sprintf("sealing %v: agent unreachable", s) // a Secret prints redacted
			}
			r.Epoch, r.Counter = 1, r.Counter+1
			r.InFlight = &state.Sent{Type: agreement.TypeUpdate, Kind: agreement.UpdateKindSecrets, Sequence: 1<<32 | uint64(r.Counter), Contents: contents, At: time.Now()}
			r.NextAttempt = time.Time{}
		}
		require.NoError(t, m.Update(ctx, m.id, slicePtrs(recs)...))
	}
	observe := func(m *member) {
		share, err := m.Names(ctx, m.id)
		require.NoError(t, err)
		var obs []state.Observation
		for _, n := range share {
			s, err := store.Get(ctx, n)
			require.NoError(t, err)
			obs = append(obs, state.Observation{Name: n, State: state.Present, Tag: s.ContentTag(), Since: time.Now(), CheckedAt: time.Now()})
		}
		require.NoError(t, m.PutObservations(ctx, m.id, obs...))
		_, err = m.MarkDue(ctx, state.Selector{StoreNames: share}, time.Now(), false)
		require.NoError(t, err)
	}
	for _, m := range members {
		observe(m)
		deliver(m)
	}
	// A rotation, found by one member and delivered by another after the
	// first one left.
	for _, n := range names {
		canaries[n+"#2"] = []byte("canary-" + rand.Text())
		_, err := store.Put(ctx, &secretstore.Secret{Name: n, Data: edgesecrets.Data{"password": canaries[n+"#2"]}}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	observe(members[0])
	require.NoError(t, members[0].Leave(ctx, members[0].id))
	observe(members[1])
	observe(members[2])
	deliver(members[1])
	deliver(members[2])

	dump := []byte(db.Dump(t))
	require.Contains(t, string(dump), names[0], "the dump holds the records (names are stored)")
	for name, value := range canaries {
		if !statetest.AssertNoCanary(t, dump, value) {
			t.Logf("the value of %s reached the database", name)
		}
	}
}
