package statetest

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// testCanary runs what an engine writes for agreements bound to a secret
// whose value is a random canary, read from a real (memory) store, and
// scans the state's storage for the value.
func testCanary(t *testing.T, e *env) {
	dh := e.durable(t)
	canary := []byte("canary-" + rand.Text())
	store := memory.New()
	names := []string{"org/node/n1/canary-db", "org/canary-db"}
	for _, n := range names {
		_, err := store.Put(e.ctx, &secretstore.Secret{Name: n, Data: edgesecrets.Data{"password": canary, "username": []byte("svc")}}, secretstore.PutOptions{})
		require.NoError(t, err)
	}
	read, err := store.Get(e.ctx, names[0])
	require.NoError(t, err)
	versionTag := read.ContentTag()
	sumTag := (&secretstore.Secret{Data: read.Data}).ContentTag() // as a store without versions tags it
	require.False(t, versionTag == (secretstore.ContentTag{}) || sumTag == (secretstore.ContentTag{}) || versionTag == sumTag)

	for i := range 20 {
		rec := record(t, fmt.Sprintf("agr-%02d", i), fmt.Sprintf("node-%02d", i), names, []string{"org/other"})
		rec.Slots[0].Desired = state.Content{StoreName: names[0], Tag: versionTag}
		rec.Slots[0].Acked = state.Content{StoreName: names[1], Tag: sumTag}
		rec.InFlight.Contents = map[int]state.Content{0: {StoreName: names[0], Tag: sumTag}}
		rec.LastError = fmt.Sprintf("sealing %v: agent unreachable", read) // a Secret prints redacted
		e.create(t, rec)
		rec.Attempts++
		rec.NextAttempt = at(i)
		e.update(t, rec)
	}
	require.NoError(t, e.s.PutObservations(e.ctx, member,
		state.Observation{Name: names[0], State: state.Present, Tag: versionTag, Since: at(0), CheckedAt: at(1)},
		state.Observation{Name: names[1], State: state.Present, Tag: sumTag, Since: at(0), CheckedAt: at(1)},
	))
	require.NoError(t, e.s.PutWait(e.ctx, state.Wait{ID: "dep-canary", StoreNames: names, CreatedAt: at(0)}))
	_, err = e.s.NewEpoch(e.ctx)
	require.NoError(t, err)
	_, err = e.s.MarkDue(e.ctx, state.Selector{StoreNames: names}, at(0), true)
	require.NoError(t, err)
	_, err = e.s.Due(e.ctx, member, at(5), time.Minute, 10)
	require.NoError(t, err)

	scan := func(when string) {
		stored, err := dh.StoredBytes(e.ctx, e.s)
		require.NoError(t, err, "reading the stored bytes")
		require.Contains(t, string(stored), "org/canary-db", "%s: the stored bytes hold the records (names are stored)", when)
		AssertNoCanary(t, stored, canary)
	}
	scan("open")
	e.reopen(t)
	scan("reopened")
}
