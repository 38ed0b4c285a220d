package statetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// member is the member id of every call but the shared-lease case's.
const member = "member-1"

func (e *env) create(t *testing.T, recs ...*state.Record) {
	t.Helper()
	for _, r := range recs {
		require.NoError(t, e.s.Create(e.ctx, r), "Create(%s)", r.ID)
		require.Equal(t, uint64(1), r.Revision, "Create sets the caller's Revision to 1")
	}
}

func (e *env) get(t *testing.T, id string) state.Record {
	t.Helper()
	r, err := e.s.Get(e.ctx, id)
	require.NoError(t, err, "Get(%s)", id)
	return r
}

func (e *env) update(t *testing.T, recs ...*state.Record) {
	t.Helper()
	require.NoError(t, e.s.Update(e.ctx, member, recs...), "Update")
}

func (e *env) markDue(t *testing.T, sel state.Selector, when time.Time, reset bool) int {
	t.Helper()
	n, err := e.s.MarkDue(e.ctx, sel, when, reset)
	require.NoError(t, err, "MarkDue(%+v)", sel)
	return n
}

func (e *env) due(t *testing.T, now time.Time, lease time.Duration, limit int) []state.Record {
	t.Helper()
	recs, err := e.s.Due(e.ctx, member, now, lease, limit)
	require.NoError(t, err, "Due")
	return recs
}

func (e *env) names(t *testing.T) []string {
	t.Helper()
	n, err := e.s.Names(e.ctx, member)
	require.NoError(t, err, "Names")
	return n
}

// ids returns the ids of recs in order.
func ids(recs []state.Record) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

// conflictIDs asserts err is a *ConflictError matching ErrConflict and
// returns its ids.
func conflictIDs(t *testing.T, err error) []string {
	t.Helper()
	require.ErrorIs(t, err, state.ErrConflict)
	var ce *state.ConflictError
	require.ErrorAs(t, err, &ce, "a conflict is a *ConflictError")
	return ce.IDs
}

func testCreateGet(t *testing.T, e *env) {
	rec := record(t, "agr-1", "node-1", []string{"org/node-1/db", "org/db"}, []string{"org/api"}, []string{"user/alice/token"})
	rec.Phase = state.PhaseCancelling
	rec.Cancel = &state.Cancellation{Reason: "ended by the embedder", DecidedAt: at(-1), Notified: true}
	rec.NextAttempt = at(30)
	rec.Revision = 99
	want := rec.Clone()
	require.NoError(t, e.s.Create(e.ctx, rec))
	assert.Equal(t, uint64(1), rec.Revision, "Create sets the caller's Revision to 1")
	want.Revision = 1
	assertRecord(t, want, e.get(t, "agr-1"), "every field round trips")

	minimal := &state.Record{ID: "agr-minimal", Node: "node-2"}
	e.create(t, minimal)
	assertRecord(t, state.Record{ID: "agr-minimal", Node: "node-2", Revision: 1}, e.get(t, "agr-minimal"), "a record with zero fields round trips")
}

func testCreateExisting(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "node-1", "org/a")
	e.create(t, rec)
	again := simple(t, "agr-1", "node-9", "org/b")
	again.LastError = "second create"
	require.ErrorIs(t, e.s.Create(e.ctx, again), state.ErrExists)
	assertRecord(t, *rec, e.get(t, "agr-1"), "a failed Create leaves the stored record")
	assert.Equal(t, []string{"org/a"}, e.names(t), "a failed Create binds no names")
}

func testGetMissing(t *testing.T, e *env) {
	_, err := e.s.Get(e.ctx, "no-such-agreement")
	require.ErrorIs(t, err, state.ErrNotFound)
	e.create(t, simple(t, "agr-1", "node-1", "org/a"))
	_, err = e.s.Get(e.ctx, "agr-2")
	require.ErrorIs(t, err, state.ErrNotFound)
}

func testUpdateCAS(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "node-1", "org/a")
	e.create(t, rec)
	stale := rec.Clone()

	rec.LastError, rec.Attempts, rec.NextAttempt = "changed", 5, at(10)
	rec.Slots[0].Acked = rec.Slots[0].Desired
	rec.InFlight = nil
	rec.Held = nil
	e.update(t, rec)
	assert.Equal(t, uint64(2), rec.Revision, "Update increments the caller's Revision")
	got := e.get(t, "agr-1")
	assert.Equal(t, uint64(2), got.Revision, "Update increments the stored Revision")
	assertRecord(t, *rec, got, "Update stores the record")

	stale.LastError = "stale write"
	err := e.s.Update(e.ctx, member, &stale)
	assert.Equal(t, []string{"agr-1"}, conflictIDs(t, err), "the conflict names the record")
	assert.Contains(t, err.Error(), "agr-1", "the error names the record")
	assert.Equal(t, uint64(1), stale.Revision, "a record not stored keeps its Revision")
	assertRecord(t, *rec, e.get(t, "agr-1"), "a conflicting Update stores nothing")

	require.NoError(t, e.s.Update(e.ctx, member), "an Update of no records")
}

func testUpdateMany(t *testing.T, e *env) {
	a, b, c, d := simple(t, "a", "n", "org/a"), simple(t, "b", "n", "org/b"), simple(t, "c", "n", "org/c"), simple(t, "d", "n", "org/d")
	e.create(t, a, b, c, d)
	staleB := b.Clone()
	b.Attempts = 9
	e.update(t, b)
	staleD := d.Clone()
	require.NoError(t, e.s.Delete(e.ctx, "d"))

	a.LastError, c.LastError = "a2", "c2"
	staleB.LastError, staleD.LastError = "lost", "lost"
	err := e.s.Update(e.ctx, member, a, &staleB, c, &staleD)
	assert.ElementsMatch(t, []string{"b", "d"}, conflictIDs(t, err), "the conflict lists every record not stored, and only those")

	assert.Equal(t, uint64(2), a.Revision, "a record stored beside conflicts gets its new Revision")
	assert.Equal(t, uint64(2), c.Revision)
	assert.Equal(t, uint64(1), staleB.Revision, "a conflicting record keeps its Revision")
	assertRecord(t, *a, e.get(t, "a"), "the others are stored")
	assertRecord(t, *c, e.get(t, "c"), "the others are stored")
	assertRecord(t, *b, e.get(t, "b"), "the conflicting record is not")
	_, err = e.s.Get(e.ctx, "d")
	require.ErrorIs(t, err, state.ErrNotFound, "Update does not bring a deleted record back")
}

func testUpdateDeleted(t *testing.T, e *env) {
	ghost := simple(t, "ghost", "n", "org/a")
	ghost.Revision = 1
	err := e.s.Update(e.ctx, member, ghost)
	assert.Equal(t, []string{"ghost"}, conflictIDs(t, err), "Update of an id never stored is a conflict")
	ghost.Revision = 0
	err = e.s.Update(e.ctx, member, ghost)
	assert.Equal(t, []string{"ghost"}, conflictIDs(t, err), "Update of a record not yet stored (Revision 0) is a conflict")
	_, err = e.s.Get(e.ctx, "ghost")
	require.ErrorIs(t, err, state.ErrNotFound, "Update does not create")
	assert.Empty(t, e.names(t), "Update binds no names")
}

func testUpdateKeepsServices(t *testing.T, e *env) {
	rec := record(t, "agr-1", "n", []string{"org/node/a", "org/a"})
	e.create(t, rec)
	registered := rec.Clone().Services

	rec.Services[0].Secrets["secret00"] = secretBinding("org/z")
	rec.Services[1].Secrets["extra"] = secretBinding("org/extra")
	rec.LastError = "changed"
	e.update(t, rec)
	got := e.get(t, "agr-1")
	assert.Equal(t, "changed", got.LastError, "the rest of the record is stored")
	assert.Equal(t, norm(state.Record{Services: registered}).Services, norm(got).Services, "Services never change after Create")
	assert.Equal(t, []string{"org/a", "org/node/a"}, e.names(t), "the names bound are those registered")
	assert.Equal(t, 0, e.markDue(t, state.Selector{StoreNames: []string{"org/z", "org/extra"}}, at(0), false), "names given to Update select nothing")
}

// rebound returns rec with the candidates of its first service secret
// replaced by names, as Engine.Register does for a changed binding.
func rebound(rec *state.Record, names ...string) *state.Record {
	r := rec.Clone()
	s := r.Slots[0]
	b := r.Services[s.Service].Secrets[s.Name]
	b.StoreNames = names
	r.Services[s.Service].Secrets[s.Name] = b
	r.Slots[0].Desired = state.Content{}
	return &r
}

func testRebind(t *testing.T, e *env) {
	rec := record(t, "agr-1", "n", []string{"org/node/a", "org/a"}, []string{"org/b"})
	e.create(t, rec)
	assert.Equal(t, []string{"org/a", "org/b", "org/node/a"}, e.names(t))

	moved := rebound(rec, "org/node/c", "org/a")
	moved.NextAttempt, moved.Attempts, moved.LastError = at(0), 0, "rebound"
	require.NoError(t, e.s.Rebind(e.ctx, member, moved), "Rebind")
	assert.Equal(t, uint64(2), moved.Revision, "Rebind increments the caller's Revision")
	got := e.get(t, "agr-1")
	assert.Equal(t, uint64(2), got.Revision, "Rebind increments the stored Revision")
	assertRecord(t, *moved, got, "Rebind stores the record with its new services")
	assert.Equal(t, []string{"org/a", "org/b", "org/node/c"}, e.names(t), "the names bound are the new services' names")
	assert.Equal(t, 0, e.markDue(t, state.Selector{StoreNames: []string{"org/node/a"}}, at(-10), false),
		"a name only the old services bound selects nothing")
	assert.Equal(t, 1, e.markDue(t, state.Selector{StoreNames: []string{"org/node/c"}}, at(-10), false), "a new name selects the record")
	assert.Equal(t, 1, e.markDue(t, state.Selector{StoreNames: []string{"org/a"}}, at(-20), false), "a name bound before and after still selects it")
	assert.Equal(t, []string{"agr-1"}, ids(e.due(t, at(0), time.Minute, 10)), "the due index follows the stored NextAttempt")

	cur := e.get(t, "agr-1")
	cur.LastError = "an Update after the Rebind"
	e.update(t, &cur)
	got = e.get(t, "agr-1")
	assert.Equal(t, "an Update after the Rebind", got.LastError)
	assert.Equal(t, norm(*moved).Services, norm(got).Services, "a later Update keeps the rebound services")
}

func testRebindCAS(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "n", "org/a")
	e.create(t, rec)
	stale := rec.Clone()
	rec.LastError = "newer"
	e.update(t, rec)

	err := e.s.Rebind(e.ctx, member, rebound(&stale, "org/z"))
	assert.Equal(t, []string{"agr-1"}, conflictIDs(t, err), "a Rebind of a stale Revision is a conflict naming the record")
	assertRecord(t, *rec, e.get(t, "agr-1"), "a conflicting Rebind stores nothing")
	assert.Equal(t, []string{"org/a"}, e.names(t), "a conflicting Rebind binds no names")

	ghost := simple(t, "ghost", "n", "org/g")
	ghost.Revision = 1
	assert.Equal(t, []string{"ghost"}, conflictIDs(t, e.s.Rebind(e.ctx, member, ghost)), "Rebind of an unknown id is a conflict")
	_, err = e.s.Get(e.ctx, "ghost")
	require.ErrorIs(t, err, state.ErrNotFound, "Rebind does not create")
	assert.Equal(t, []string{"org/a"}, e.names(t), "Rebind of an unknown id binds no names")

	require.NoError(t, e.s.Delete(e.ctx, "agr-1"))
	assert.Equal(t, []string{"agr-1"}, conflictIDs(t, e.s.Rebind(e.ctx, member, rebound(rec, "org/z"))), "Rebind of a deleted record is a conflict")
	assert.Empty(t, e.names(t), "Rebind does not bring a deleted record back")
}

func testRebindSharedNames(t *testing.T, e *env) {
	a := simple(t, "a", "n1", "org/shared")
	b := simple(t, "b", "n2", "org/shared")
	e.create(t, a, b)
	require.NoError(t, e.s.Rebind(e.ctx, member, rebound(a, "org/own")))
	assert.Equal(t, []string{"org/own", "org/shared"}, e.names(t), "a name another record binds stays")
	assert.Equal(t, 1, e.markDue(t, state.Selector{StoreNames: []string{"org/shared"}}, at(0), false), "and selects only that record")
	require.NoError(t, e.s.Delete(e.ctx, "a"))
	assert.Equal(t, []string{"org/shared"}, e.names(t), "Delete unbinds the rebound names")
	require.NoError(t, e.s.Delete(e.ctx, "b"))
	assert.Empty(t, e.names(t))
}

func testRebindReopen(t *testing.T, e *env) {
	e.durable(t)
	rec := record(t, "agr-1", "n", []string{"org/node/a", "org/a"})
	e.create(t, rec)
	moved := rebound(rec, "org/node/b", "org/b")
	require.NoError(t, e.s.Rebind(e.ctx, member, moved))
	e.reopen(t)
	assertRecord(t, *moved, e.get(t, "agr-1"), "a Rebind survives a reopen")
	assert.Equal(t, []string{"org/b", "org/node/b"}, e.names(t), "the rebound names survive a reopen")
	assert.Equal(t, 1, e.markDue(t, state.Selector{StoreNames: []string{"org/node/b"}}, at(0), false))
	assert.Equal(t, 0, e.markDue(t, state.Selector{StoreNames: []string{"org/a", "org/node/a"}}, at(-10), false))
}

func testUpdateMovesNode(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "node-1", "org/a")
	e.create(t, rec)
	rec.Node = "node-2"
	e.update(t, rec)
	assert.Equal(t, 0, e.markDue(t, state.Selector{Nodes: []string{"node-1"}}, at(0), false), "the old node selects nothing after an Update moved the record")
	assert.Equal(t, 1, e.markDue(t, state.Selector{Nodes: []string{"node-2"}}, at(0), false), "the new node selects the record")
}

func testDeleteIdempotent(t *testing.T, e *env) {
	a, b, c := simple(t, "a", "node-a", "org/only-a", "org/shared"), simple(t, "b", "node-b", "org/shared"), simple(t, "c", "node-c", "org/c")
	a.NextAttempt = at(0)
	e.create(t, a, b, c)

	require.NoError(t, e.s.Delete(e.ctx, "a", "missing"), "Delete with a missing id")
	_, err := e.s.Get(e.ctx, "a")
	require.ErrorIs(t, err, state.ErrNotFound)
	require.NoError(t, e.s.Delete(e.ctx, "a"), "deleting again")
	require.NoError(t, e.s.Delete(e.ctx), "Delete of no ids")
	assert.Equal(t, []string{"org/c", "org/shared"}, e.names(t), "a name bound only by deleted records is gone")
	assert.Equal(t, 0, e.markDue(t, state.Selector{IDs: []string{"a"}, Nodes: []string{"node-a"}, StoreNames: []string{"org/only-a"}}, at(0), false), "a deleted record is not selected")
	assert.Empty(t, e.due(t, at(10), time.Minute, 10), "a deleted record is never due")
	assertRecord(t, *b, e.get(t, "b"), "other records are kept")

	again := simple(t, "a", "node-a", "org/again")
	e.create(t, again)
	assertRecord(t, *again, e.get(t, "a"), "a deleted id can be created again, at Revision 1")
	require.NoError(t, e.s.Delete(e.ctx, "a", "b", "c"))
	assert.Empty(t, e.names(t))
}

// shuffled returns n record ids in a fixed scrambled order.
func shuffled(n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("agr-%04d", (i*7919)%n) // 7919 is prime, so this is a permutation when n is not a multiple of it
	}
	return out
}

func testRecordsOrder(t *testing.T, e *env) {
	calls := 0
	require.NoError(t, e.s.Records(e.ctx, func(state.Record) bool { calls++; return true }))
	assert.Zero(t, calls, "an empty state calls fn never")

	const n = 600 // more than a page of any reasonable paging
	want := shuffled(n)
	var wg sync.WaitGroup
	for w := range e.opts.Writers {
		wg.Go(func() {
			for i := w; i < n; i += e.opts.Writers {
				assert.NoError(t, e.s.Create(e.ctx, simple(t, want[i], "node", "org/"+want[i])))
			}
		})
	}
	wg.Wait()
	slices.Sort(want)
	var got []string
	var sample state.Record
	require.NoError(t, e.s.Records(e.ctx, func(r state.Record) bool {
		if r.ID == "agr-0042" {
			sample = r
		}
		got = append(got, r.ID)
		return true
	}))
	assert.Equal(t, want, got, "Records visits every record once, in id order")
	assertRecord(t, *simplyStored(t, "agr-0042"), sample, "Records gives whole records")
}

// simplyStored is simple(id) as Create stores it.
func simplyStored(t *testing.T, id string) *state.Record {
	r := simple(t, id, "node", "org/"+id)
	r.Revision = 1
	return r
}

func testRecordsEarlyStop(t *testing.T, e *env) {
	for _, id := range []string{"e", "c", "a", "d", "b"} {
		e.create(t, simple(t, id, "n", "org/x"))
	}
	var seen []string
	require.NoError(t, e.s.Records(e.ctx, func(r state.Record) bool {
		seen = append(seen, r.ID)
		return len(seen) < 2
	}))
	assert.Equal(t, []string{"a", "b"}, seen, "Records stops when fn returns false")
}

func testRecordsCallback(t *testing.T, e *env) {
	for _, id := range []string{"a", "b", "c"} {
		e.create(t, simple(t, id, "n", "org/"+id))
	}
	done := make(chan error, 1)
	go func() {
		var err error
		done <- e.s.Records(e.ctx, func(r state.Record) bool {
			if _, err = e.s.Get(e.ctx, r.ID); err != nil {
				return false
			}
			r.LastError = "visited"
			if err = e.s.Update(e.ctx, member, &r); err != nil {
				return false
			}
			_, err = e.s.Names(e.ctx, member)
			return err == nil
		})
		if err != nil {
			done <- err
		}
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "the state's own methods work inside a Records callback")
	case <-time.After(30 * time.Second):
		t.Fatal("Records deadlocked when fn called the state")
	}
	for _, id := range []string{"a", "b", "c"} {
		got := e.get(t, id)
		assert.Equal(t, "visited", got.LastError, "record %s updated inside Records", id)
		assert.Equal(t, uint64(2), got.Revision)
	}
}

func testDeepCopiesIn(t *testing.T, e *env) {
	rec := record(t, "agr-1", "n", []string{"org/node/a", "org/a"}, []string{"org/b"})
	rec.Cancel = &state.Cancellation{Reason: "r"}
	e.create(t, rec)
	want := rec.Clone()

	mutate(rec)
	assertRecord(t, want, e.get(t, "agr-1"), "changing a record after Create changes nothing stored")
	assert.Equal(t, []string{"org/a", "org/b", "org/node/a"}, e.names(t))

	upd := want.Clone()
	upd.LastError = "updated"
	e.update(t, &upd)
	want = upd.Clone()
	mutate(&upd)
	assertRecord(t, want, e.get(t, "agr-1"), "changing a record after Update changes nothing stored")

	names := []string{"org/a", "org/b"}
	w := state.Wait{ID: "dep-1", StoreNames: names, CreatedAt: at(0)}
	require.NoError(t, e.s.PutWait(e.ctx, w))
	names[0] = "org/changed"
	waits, err := e.s.Waits(e.ctx)
	require.NoError(t, err)
	require.Len(t, waits, 1)
	assert.Equal(t, []string{"org/a", "org/b"}, waits[0].StoreNames, "changing a wait's names after PutWait changes nothing stored")
}

// mutate changes everything a record holds by reference.
func mutate(r *state.Record) {
	r.Services[0].Secrets["secret00"].StoreNames[0] = "org/mutated"
	r.Services[0].Secrets["added"] = secretBinding("org/added")
	r.Services[0].Service.URL = "mutated"
	r.Slots[0].Desired.StoreName = "org/mutated"
	r.Slots = append(r.Slots[:1], r.Slots...)
	r.InFlight.Contents[0] = state.Content{StoreName: "org/mutated"}
	r.InFlight.Sequence = 1
	r.Held.Reason = "mutated"
	if r.Cancel != nil {
		r.Cancel.Reason = "mutated"
	}
}

func testDeepCopiesOut(t *testing.T, e *env) {
	rec := record(t, "agr-1", "n", []string{"org/node/a", "org/a"}, []string{"org/b"})
	rec.NextAttempt = at(0)
	e.create(t, rec)
	want := e.get(t, "agr-1").Clone()

	got := e.get(t, "agr-1")
	mutate(&got)
	assertRecord(t, want, e.get(t, "agr-1"), "changing a Get result changes nothing stored")

	require.NoError(t, e.s.Records(e.ctx, func(r state.Record) bool { mutate(&r); return true }))
	assertRecord(t, want, e.get(t, "agr-1"), "changing a Records result changes nothing stored")

	due := e.due(t, at(1), time.Minute, 10)
	require.Len(t, due, 1)
	want = e.get(t, "agr-1").Clone()
	mutate(&due[0])
	assertRecord(t, want, e.get(t, "agr-1"), "changing a Due result changes nothing stored")

	names := e.names(t)
	names[0] = "org/mutated"
	assert.Equal(t, []string{"org/a", "org/b", "org/node/a"}, e.names(t), "changing a Names result changes nothing stored")

	require.NoError(t, e.s.PutWait(e.ctx, state.Wait{ID: "dep-1", StoreNames: []string{"org/a"}}))
	waits, err := e.s.Waits(e.ctx)
	require.NoError(t, err)
	waits[0].StoreNames[0] = "org/mutated"
	waits, err = e.s.Waits(e.ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"org/a"}, waits[0].StoreNames, "changing a Waits result changes nothing stored")
}

func testNames(t *testing.T, e *env) {
	assert.Empty(t, e.names(t), "no records bind no names")
	e.create(t,
		record(t, "a", "n1", []string{"org/node/n1/x", "org/x"}, []string{"org/y"}),
		record(t, "b", "n2", []string{"org/y"}, []string{"org/a"}),
		record(t, "c", "n3", []string{"org/x"}),
	)
	want := []string{"org/a", "org/node/n1/x", "org/x", "org/y"}
	got := e.names(t)
	assert.Equal(t, want, got, "every candidate of every record, each once, sorted")
	assert.True(t, slices.IsSorted(got))

	require.NoError(t, e.s.Delete(e.ctx, "b"))
	assert.Equal(t, []string{"org/node/n1/x", "org/x", "org/y"}, e.names(t), "a name stays while another record binds it")
	require.NoError(t, e.s.Delete(e.ctx, "a"))
	assert.Equal(t, []string{"org/x"}, e.names(t))
}

func testMarkDueSelectors(t *testing.T, e *env) {
	e.create(t,
		record(t, "r1", "node-a", []string{"org/node-a/db", "org/fallback"}),
		simple(t, "r2", "node-a", "org/x"),
		simple(t, "r3", "node-b", "org/y"),
		record(t, "r4", "node-c", []string{"org/z", "org/fallback"}),
	)
	next := func(id string) time.Time { return e.get(t, id).NextAttempt }

	assert.Equal(t, 1, e.markDue(t, state.Selector{IDs: []string{"r1"}}, at(10), false), "by id")
	sameTime(t, at(10), next("r1"), "r1 marked by id")
	assert.True(t, next("r2").IsZero(), "r2 not selected")

	assert.Equal(t, 2, e.markDue(t, state.Selector{Nodes: []string{"node-a"}}, at(5), false), "by node")
	sameTime(t, at(5), next("r1"), "r1 marked by node")
	sameTime(t, at(5), next("r2"), "r2 marked by node")

	assert.Equal(t, 2, e.markDue(t, state.Selector{StoreNames: []string{"org/fallback"}}, at(1), false), "by a store name bound as a later candidate")
	sameTime(t, at(1), next("r1"), "r1 marked by its second candidate")
	sameTime(t, at(1), next("r4"), "r4 marked by its second candidate")
	assert.True(t, next("r3").IsZero(), "r3 not selected")

	assert.Equal(t, 1, e.markDue(t, state.Selector{IDs: []string{"r3"}, Nodes: []string{"node-b"}, StoreNames: []string{"org/y"}}, at(0), false),
		"a record selected three ways is changed and counted once")
	sameTime(t, at(0), next("r3"), "r3")

	assert.Equal(t, 0, e.markDue(t, state.Selector{}, at(-100), true), "an empty selector selects nothing")
	assert.Equal(t, 0, e.markDue(t, state.Selector{IDs: []string{"nope"}, Nodes: []string{"nowhere"}, StoreNames: []string{"org/none"}}, at(-100), true),
		"unknown ids, nodes and names select nothing")
}

func testMarkDueRules(t *testing.T, e *env) {
	mk := func(id string, next time.Time, attempts int) {
		r := simple(t, id, "node", "org/s")
		r.NextAttempt, r.Attempts = next, attempts
		e.create(t, r)
	}
	mk("zero", time.Time{}, 0)
	mk("earlier", at(-10), 0)
	mk("equal", at(0), 0)
	mk("later", at(10), 0)
	all := state.Selector{StoreNames: []string{"org/s"}}
	assert.Equal(t, 2, e.markDue(t, all, at(0), false), "only records with no NextAttempt or a later one change")
	for id, want := range map[string]time.Time{"zero": at(0), "earlier": at(-10), "equal": at(0), "later": at(0)} {
		sameTime(t, want, e.get(t, id).NextAttempt, id)
	}

	require.NoError(t, e.s.Delete(e.ctx, "zero", "earlier", "equal", "later"))
	mk("due-tried", at(-10), 4)
	mk("later-tried", at(10), 3)
	mk("due-untried", at(-10), 0)
	mk("later-untried", at(10), 0)
	assert.Equal(t, 0, e.markDue(t, all, at(20), false), "without resetAttempts nothing changes when every record is due sooner")
	assert.Equal(t, 4, e.get(t, "due-tried").Attempts, "without resetAttempts Attempts stay")

	assert.Equal(t, 3, e.markDue(t, all, at(0), true),
		"with resetAttempts a record changes when its NextAttempt moves or its Attempts were not 0")
	for id, want := range map[string]struct {
		next     time.Time
		attempts int
	}{
		"due-tried": {at(-10), 0}, "later-tried": {at(0), 0}, "due-untried": {at(-10), 0}, "later-untried": {at(0), 0},
	} {
		got := e.get(t, id)
		sameTime(t, want.next, got.NextAttempt, id)
		assert.Equal(t, want.attempts, got.Attempts, "%s: resetAttempts sets Attempts to 0 on every selected record", id)
	}
}

func testMarkDueRevision(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "n", "org/a")
	rec.NextAttempt = at(100)
	e.create(t, rec)
	stale := rec.Clone()

	assert.Equal(t, 0, e.markDue(t, state.Selector{IDs: []string{"agr-1"}}, at(200), false))
	assert.Equal(t, uint64(1), e.get(t, "agr-1").Revision, "a MarkDue that changes nothing leaves the Revision")

	assert.Equal(t, 1, e.markDue(t, state.Selector{IDs: []string{"agr-1"}}, at(0), false))
	got := e.get(t, "agr-1")
	assert.Greater(t, got.Revision, uint64(1), "MarkDue changes the Revision of a record it changes")
	stale.LastError = "written over the mark"
	conflictIDs(t, e.s.Update(e.ctx, member, &stale))
	sameTime(t, at(0), e.get(t, "agr-1").NextAttempt, "an Update from before the mark does not undo it")
}

func testDueOrder(t *testing.T, e *env) {
	now := at(10)
	nexts := map[string]time.Time{
		"r1": at(5), "r2": at(1), "r3": at(3), "r4": {}, "r5": at(100), "r6": at(3), "r7": now,
	}
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7"} {
		r := simple(t, id, "node-"+id, "org/"+id)
		r.NextAttempt = nexts[id]
		e.create(t, r)
	}
	assert.Empty(t, e.due(t, at(0), time.Minute, 10), "nothing is due before the earliest NextAttempt")

	first := e.due(t, now, time.Minute, 2)
	require.Len(t, first, 2, "Due returns up to limit records")
	assert.Equal(t, "r2", first[0].ID, "earliest first")
	assert.Contains(t, []string{"r3", "r6"}, first[1].ID, "then the next earliest")

	rest := e.due(t, now, time.Minute, 10)
	got := append(ids(first), ids(rest)...)
	assert.ElementsMatch(t, []string{"r1", "r2", "r3", "r6", "r7"}, got,
		"every record due by now, including one due exactly now, and none with no NextAttempt or a later one")
	assert.True(t, slices.IsSortedFunc(got, func(a, b string) int { return nexts[a].Compare(nexts[b]) }), "earliest first: %v", got)
	assert.Empty(t, e.due(t, now, time.Minute, 10), "nothing left")
}

func testDueClaims(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "n", "org/a")
	rec.NextAttempt = at(0)
	e.create(t, rec)
	stale := rec.Clone()
	const lease = 30 * time.Second

	due := e.due(t, at(10), lease, 10)
	require.Len(t, due, 1)
	sameTime(t, at(40), due[0].NextAttempt, "the returned record shows the claim")
	stored := e.get(t, "agr-1")
	sameTime(t, at(40), stored.NextAttempt, "the claim is stored: NextAttempt moves to now+lease")
	assert.Equal(t, stored.Revision, due[0].Revision, "Due returns the record at its stored Revision")
	assertRecord(t, stored, due[0], "Due returns the stored record")
	conflictIDs(t, e.s.Update(e.ctx, member, &stale))

	assert.Empty(t, e.due(t, at(10), lease, 10), "a claimed record is not returned again")
	assert.Empty(t, e.due(t, at(39), lease, 10), "nor before the lease runs out")
	again := e.due(t, at(40), lease, 10)
	require.Len(t, again, 1, "the record is due again when the lease runs out")
	sameTime(t, at(70), again[0].NextAttempt, "claimed anew")

	claimed := again[0]
	claimed.NextAttempt, claimed.Attempts = at(1000), 1
	e.update(t, &claimed)
	assert.Empty(t, e.due(t, at(100), lease, 10), "the member's Update sets the real NextAttempt")
	assert.Len(t, e.due(t, at(1000), lease, 10), 1)

	cur := e.get(t, "agr-1")
	cur.NextAttempt = time.Time{}
	e.update(t, &cur)
	assert.Empty(t, e.due(t, at(1_000_000), lease, 10), "a record with no NextAttempt is never due")
}

func testObservations(t *testing.T, e *env) {
	obs := []state.Observation{
		{Name: "org/version", State: state.Present, Tag: versionTag(t, "3"), Since: at(-100), CheckedAt: at(0)},
		{Name: "org/sum", State: state.Present, Tag: sumTag("value"), Since: at(-50), CheckedAt: at(0)},
		{Name: "org/missing", State: state.Missing, Since: at(-10), CheckedAt: at(0)},
		{Name: "org/forbidden", State: state.Forbidden, Since: at(-20), CheckedAt: at(1)},
		{Name: "org/unknown", State: state.Unknown},
	}
	require.NoError(t, e.s.PutObservations(e.ctx, member, obs...))
	var names []string
	for _, o := range obs {
		names = append(names, o.Name)
	}
	got, err := e.s.Observations(e.ctx, append(names, "org/never-seen"))
	require.NoError(t, err)
	require.Len(t, got, len(obs), "one entry per name that has an observation")
	for _, o := range obs {
		assertObservation(t, o, got[o.Name])
	}

	replaced := state.Observation{Name: "org/version", State: state.Missing, Since: at(5), CheckedAt: at(5)}
	require.NoError(t, e.s.PutObservations(e.ctx, member, replaced))
	got, err = e.s.Observations(e.ctx, []string{"org/version", "org/sum"})
	require.NoError(t, err)
	assertObservation(t, replaced, got["org/version"])
	assertObservation(t, obs[1], got["org/sum"])

	got, err = e.s.Observations(e.ctx, []string{})
	require.NoError(t, err)
	assert.Empty(t, got, "no names, no observations")
	got, err = e.s.Observations(e.ctx, nil)
	require.NoError(t, err)
	require.Len(t, got, len(obs), "nil names: every stored observation")
	assertObservation(t, replaced, got["org/version"])
	for _, o := range obs[1:] {
		assertObservation(t, o, got[o.Name])
	}
	require.NoError(t, e.s.PutObservations(e.ctx, member), "PutObservations of none")

	// Times finer than a microsecond may come back truncated to it, never
	// coarser and never later: the engine tells its own cycle's sighting
	// from an earlier one's by it.
	fine := at(10).Add(789 * time.Nanosecond)
	require.NoError(t, e.s.PutObservations(e.ctx, member, state.Observation{Name: "org/fine", State: state.Missing, Since: fine, CheckedAt: fine}))
	got, err = e.s.Observations(e.ctx, []string{"org/fine"})
	require.NoError(t, err)
	for what, tm := range map[string]time.Time{"Since": got["org/fine"].Since, "CheckedAt": got["org/fine"].CheckedAt} {
		assert.False(t, tm.After(fine), "%s comes back later than stored: %v, stored %v", what, tm, fine)
		assert.False(t, tm.Before(fine.Truncate(time.Microsecond)), "%s comes back coarser than the microsecond: %v, stored %v", what, tm, fine)
	}
}

func assertObservation(t *testing.T, want, got state.Observation) {
	t.Helper()
	assert.Equal(t, want.Name, got.Name)
	assert.Equal(t, want.State, got.State, "%s: state", want.Name)
	assertTag(t, want.Tag, got.Tag, want.Name)
	sameTime(t, want.Since, got.Since, want.Name+": Since")
	sameTime(t, want.CheckedAt, got.CheckedAt, want.Name+": CheckedAt")
}

// assertTag compares tags by their stored form: the printed forms of two
// checksum tags are equal whatever the checksums.
func assertTag(t *testing.T, want, got secretstore.ContentTag, what string) {
	t.Helper()
	assert.Equal(t, want.Encode(), got.Encode(), "%s: content tag (Encode)", what)
	assert.True(t, want == got, "%s: content tags compare equal with ==", what)
}

func testContentTags(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "n", "org/a", "org/b", "org/c")
	tags := []secretstore.ContentTag{versionTag(t, "7f1c2a90-8b1e-4a6e-9f00-3c1d2e4f5a6b"), sumTag("one"), versionTag(t, "odd/version: ü\x01")}
	for i, tag := range tags {
		rec.Slots[i].Desired.Tag = tag
	}
	rec.Slots[0].Acked = state.Content{}
	rec.Slots[1].Acked = state.Content{StoreName: "org/b", Tag: sumTag("two")}
	rec.Slots[2].Acked = state.Content{StoreName: "org/c"}
	rec.InFlight.Contents = map[int]state.Content{1: {StoreName: "org/b", Tag: sumTag("three")}}
	e.create(t, rec)

	got := e.get(t, "agr-1")
	require.Len(t, got.Slots, 3)
	for i := range tags {
		assertTag(t, rec.Slots[i].Desired.Tag, got.Slots[i].Desired.Tag, fmt.Sprintf("slot %d desired", i))
		assertTag(t, rec.Slots[i].Acked.Tag, got.Slots[i].Acked.Tag, fmt.Sprintf("slot %d acked", i))
	}
	assert.True(t, got.Slots[0].Acked.IsZero(), "zero content stays zero")
	assert.True(t, got.Slots[2].Acked.Tag == (secretstore.ContentTag{}), "a zero tag stays zero")
	require.NotNil(t, got.InFlight)
	assertTag(t, sumTag("three"), got.InFlight.Contents[1].Tag, "in-flight content")
	assert.NotEqual(t, got.Slots[1].Acked.Tag, got.InFlight.Contents[1].Tag, "different checksums stay different")
}

func secretBinding(names ...string) binding.BoundSecret {
	return binding.BoundSecret{StoreNames: names, Format: "json"}
}

func testWaits(t *testing.T, e *env) {
	waits, err := e.s.Waits(e.ctx)
	require.NoError(t, err)
	assert.Empty(t, waits)

	for _, w := range []state.Wait{
		{ID: "dep-2", StoreNames: []string{"org/b"}, CreatedAt: at(2)},
		{ID: "dep-1", StoreNames: []string{"org/a", "org/node/n/a"}, CreatedAt: at(1)},
		{ID: "dep-3", StoreNames: []string{"org/c"}, CreatedAt: at(3)},
	} {
		require.NoError(t, e.s.PutWait(e.ctx, w))
	}
	require.NoError(t, e.s.PutWait(e.ctx, state.Wait{ID: "dep-2", StoreNames: []string{"org/b2", "org/b3"}, CreatedAt: at(4)}), "replacing a wait")
	require.NoError(t, e.s.DeleteWait(e.ctx, "dep-3"))
	require.NoError(t, e.s.DeleteWait(e.ctx, "dep-3"), "deleting a missing wait")
	require.NoError(t, e.s.DeleteWait(e.ctx, "never"), "deleting a wait never stored")

	waits, err = e.s.Waits(e.ctx)
	require.NoError(t, err)
	require.Len(t, waits, 2)
	assert.Equal(t, []string{"dep-1", "dep-2"}, []string{waits[0].ID, waits[1].ID}, "sorted by id")
	assert.Equal(t, []string{"org/a", "org/node/n/a"}, waits[0].StoreNames, "names in order")
	sameTime(t, at(1), waits[0].CreatedAt, "CreatedAt")
	assert.Equal(t, []string{"org/b2", "org/b3"}, waits[1].StoreNames, "PutWait replaces")
	sameTime(t, at(4), waits[1].CreatedAt, "replaced CreatedAt")
}

func testNewEpoch(t *testing.T, e *env) {
	var last uint64
	for i := range 20 {
		n, err := e.s.NewEpoch(e.ctx)
		require.NoError(t, err)
		require.Greater(t, n, last, "epoch %d is above every earlier one", i)
		last = n
	}
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for range e.opts.Writers {
		wg.Go(func() {
			for range 5 {
				n, err := e.s.NewEpoch(e.ctx)
				mu.Lock()
				assert.NoError(t, err)
				assert.False(t, seen[n], "epoch %d handed out twice", n)
				assert.Greater(t, n, last, "a concurrent epoch is above the earlier ones")
				seen[n] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func testConcurrentOneRecord(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "n", "org/a")
	e.create(t, rec)
	start := make(chan struct{})
	errs := make([]error, e.opts.Writers)
	var wg sync.WaitGroup
	for i := range e.opts.Writers {
		mine := rec.Clone()
		mine.LastError = fmt.Sprintf("writer %d", i)
		wg.Go(func() {
			<-start
			errs[i] = e.s.Update(e.ctx, member, &mine)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			assert.Equal(t, -1, winner, "exactly one concurrent Update of one revision wins")
			winner = i
			continue
		}
		assert.Equal(t, []string{"agr-1"}, conflictIDs(t, err), "a loser conflicts")
	}
	require.NotEqual(t, -1, winner, "one Update wins")
	got := e.get(t, "agr-1")
	assert.Equal(t, uint64(2), got.Revision)
	assert.Equal(t, fmt.Sprintf("writer %d", winner), got.LastError, "the winner's record is stored")
}

func testConcurrentManyRecords(t *testing.T, e *env) {
	const rounds = 10
	shared := simple(t, "shared", "n", "org/shared")
	shared.ReplySequence = 0
	e.create(t, shared)
	var wg sync.WaitGroup
	for w := range e.opts.Writers {
		own := simple(t, fmt.Sprintf("own-%02d", w), "n", "org/own")
		e.create(t, own)
		wg.Go(func() {
			for r := range rounds {
				own.Attempts = r + 1
				if err := e.s.Update(e.ctx, member, own); err != nil {
					t.Errorf("writer %d: Update of its own record: %v", w, err)
					return
				}
				// A compare-and-set increment of the shared record, retried
				// on conflict: no increment may be lost.
				for {
					cur, err := e.s.Get(e.ctx, "shared")
					if err != nil {
						t.Errorf("writer %d: Get: %v", w, err)
						return
					}
					cur.ReplySequence++
					err = e.s.Update(e.ctx, member, &cur)
					if err == nil {
						break
					}
					if !assert.ErrorIs(t, err, state.ErrConflict) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for w := range e.opts.Writers {
		got := e.get(t, fmt.Sprintf("own-%02d", w))
		assert.Equal(t, rounds, got.Attempts)
		assert.Equal(t, uint64(rounds+1), got.Revision, "every Update of writer %d's record was stored", w)
	}
	assert.Equal(t, uint64(e.opts.Writers*rounds), e.get(t, "shared").ReplySequence, "no compare-and-set increment was lost")
}

func testContextCancel(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "n", "org/a")
	rec.NextAttempt = at(0)
	e.create(t, rec)
	require.NoError(t, e.s.PutWait(e.ctx, state.Wait{ID: "dep-1", StoreNames: []string{"org/a"}}))
	obs := state.Observation{Name: "org/a", State: state.Present, Tag: versionTag(t, "1")}
	require.NoError(t, e.s.PutObservations(e.ctx, member, obs))
	want := e.get(t, "agr-1")

	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	changed := want.Clone()
	changed.LastError = "cancelled write"
	calls := everyCall(t, e.s, ctx, changed, "Records called fn with a cancelled context")
	for name, call := range calls {
		assert.ErrorIs(t, call(), context.Canceled, name)
	}
	assertRecord(t, want, e.get(t, "agr-1"), "cancelled calls changed no record")
	_, err := e.s.Get(e.ctx, "agr-2")
	assert.ErrorIs(t, err, state.ErrNotFound, "a cancelled Create stored nothing")
	waits, err := e.s.Waits(e.ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"dep-1"}, []string{waits[0].ID}, "cancelled calls changed no wait")
	got, err := e.s.Observations(e.ctx, []string{"org/a"})
	require.NoError(t, err)
	assertObservation(t, obs, got["org/a"])
}

// everyCall returns a call of each Backend method with ctx, each of which
// would change rec ("agr-1", bound to "org/a"), a wait "dep-1" or the
// observation of "org/a", if it succeeded.
func everyCall(t *testing.T, st state.Backend, ctx context.Context, rec state.Record, recordsCalled string) map[string]func() error {
	return map[string]func() error{
		"Create": func() error { return st.Create(ctx, simple(t, "agr-2", "n", "org/b")) },
		"Get":    func() error { _, err := st.Get(ctx, "agr-1"); return err },
		"Update": func() error { c := rec.Clone(); return st.Update(ctx, member, &c) },
		"Rebind": func() error { return st.Rebind(ctx, member, rebound(&rec, "org/rebound")) },
		"Delete": func() error { return st.Delete(ctx, "agr-1") },
		"Records": func() error {
			return st.Records(ctx, func(state.Record) bool { t.Error(recordsCalled); return true })
		},
		"Names": func() error { _, err := st.Names(ctx, member); return err },
		"MarkDue": func() error {
			_, err := st.MarkDue(ctx, state.Selector{IDs: []string{"agr-1"}}, at(-100), true)
			return err
		},
		"Due":          func() error { _, err := st.Due(ctx, member, at(10), time.Minute, 10); return err },
		"Observations": func() error { _, err := st.Observations(ctx, []string{"org/a"}); return err },
		"PutObservations": func() error {
			return st.PutObservations(ctx, member, state.Observation{Name: "org/a", State: state.Missing})
		},
		"PutWait":    func() error { return st.PutWait(ctx, state.Wait{ID: "dep-2"}) },
		"Waits":      func() error { _, err := st.Waits(ctx); return err },
		"DeleteWait": func() error { return st.DeleteWait(ctx, "dep-1") },
		"NewEpoch":   func() error { _, err := st.NewEpoch(ctx); return err },
	}
}

func testClosed(t *testing.T, e *env) {
	rec := simple(t, "agr-1", "n", "org/a")
	e.create(t, rec)
	require.NoError(t, e.s.Close())
	calls := everyCall(t, e.s, e.ctx, *rec, "Records called fn on a closed state")
	for name, call := range calls {
		assert.ErrorIs(t, call(), state.ErrStateUnavailable, name)
	}
	assert.NotPanics(t, func() { _ = e.s.Close() }, "a second Close")
}

func testReopen(t *testing.T, e *env) {
	e.durable(t)
	a := record(t, "a", "node-a", []string{"org/node-a/db", "org/db"})
	a.NextAttempt = at(5)
	b := simple(t, "b", "node-b", "org/api")
	c := simple(t, "c", "node-c", "org/c")
	c.NextAttempt = at(1)
	e.create(t, a, b, c)
	b.LastError = "updated before the restart"
	e.update(t, b)
	require.NoError(t, e.s.Delete(e.ctx, "c"))
	obs := state.Observation{Name: "org/db", State: state.Present, Tag: sumTag("db"), Since: at(-1), CheckedAt: at(0)}
	require.NoError(t, e.s.PutObservations(e.ctx, member, obs))
	require.NoError(t, e.s.PutWait(e.ctx, state.Wait{ID: "dep-1", StoreNames: []string{"org/later"}, CreatedAt: at(0)}))

	e.reopen(t)
	assertRecord(t, *a, e.get(t, "a"), "a record survives a reopen, Revision included")
	assertRecord(t, *b, e.get(t, "b"), "an Update survives a reopen")
	_, err := e.s.Get(e.ctx, "c")
	require.ErrorIs(t, err, state.ErrNotFound, "a Delete survives a reopen")
	assert.Equal(t, []string{"org/api", "org/db", "org/node-a/db"}, e.names(t), "names survive a reopen")
	got, err := e.s.Observations(e.ctx, []string{"org/db"})
	require.NoError(t, err)
	assertObservation(t, obs, got["org/db"])
	waits, err := e.s.Waits(e.ctx)
	require.NoError(t, err)
	require.Len(t, waits, 1)
	assert.Equal(t, []string{"org/later"}, waits[0].StoreNames)

	b.Attempts = 3
	e.update(t, b)
	assert.Equal(t, uint64(3), b.Revision, "Revisions continue after a reopen")
	assert.Equal(t, 1, e.markDue(t, state.Selector{Nodes: []string{"node-b"}}, at(0), false), "the node index survives a reopen")
	assert.Equal(t, 1, e.markDue(t, state.Selector{StoreNames: []string{"org/db"}}, at(2), false), "the name index survives a reopen")
	assert.Equal(t, []string{"b", "a"}, ids(e.due(t, at(10), time.Minute, 10)), "the due index survives a reopen")

	e.reopen(t)
	assert.Empty(t, e.due(t, at(10), time.Minute, 10), "claims survive a reopen")
	assert.ElementsMatch(t, []string{"b", "a"}, ids(e.due(t, at(70), time.Minute, 10)), "claims run out after a reopen")
}

func testEpochReopen(t *testing.T, e *env) {
	e.durable(t)
	var last uint64
	for range 3 {
		for range 3 {
			n, err := e.s.NewEpoch(e.ctx)
			require.NoError(t, err)
			require.Greater(t, n, last, "NewEpoch increases")
			last = n
		}
		e.reopen(t)
	}
	n, err := e.s.NewEpoch(e.ctx)
	require.NoError(t, err)
	assert.Greater(t, n, last, "NewEpoch is above every epoch handed out before the reopens")
}

func testSharedLeases(t *testing.T, e *env) {
	if !e.opts.Shared {
		t.Skip("the state serves one engine (Options.Shared is false)")
	}
	rec := simple(t, "agr-1", "n", "org/a")
	rec.NextAttempt = at(0)
	e.create(t, rec)
	claimed, err := e.s.Due(e.ctx, "member-a", at(10), time.Hour, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	other := e.get(t, "agr-1")
	other.LastError = "written by member-b"
	err = e.s.Update(e.ctx, "member-b", &other)
	assert.Equal(t, []string{"agr-1"}, conflictIDs(t, err), "a record leased to another member is not stored")
	none, err := e.s.Due(e.ctx, "member-b", at(10), time.Hour, 10)
	require.NoError(t, err)
	assert.Empty(t, none, "a leased record is not due for another member")
	rebind := rebound(&other, "org/rebound")
	assert.Equal(t, []string{"agr-1"}, conflictIDs(t, e.s.Rebind(e.ctx, "member-b", rebind)), "a record leased to another member is not rebound")
	require.NoError(t, e.s.Update(e.ctx, "member-a", &claimed[0]), "the lease holder updates")
	rebind = rebound(&claimed[0], "org/rebound")
	require.NoError(t, e.s.Rebind(e.ctx, "member-b", rebind), "once released, another member rebinds it")
	assertRecord(t, *rebind, e.get(t, "agr-1"))
}

func testRecordsAfter(t *testing.T, e *env) {
	const n = 600 // more than a page of any reasonable paging
	want := shuffled(n)
	for _, id := range want {
		e.create(t, simple(t, id, "node", "org/"+id))
	}
	slices.Sort(want)
	assert.Error(t, e.s.RecordsAfter(e.ctx, "", 0, func(state.Record) bool { return true }), "a limit of 0 is refused")

	var got []string
	after := ""
	for slices := 0; ; slices++ {
		require.Less(t, slices, n, "the slices end")
		var slice []string
		require.NoError(t, e.s.RecordsAfter(e.ctx, after, 257, func(r state.Record) bool {
			slice = append(slice, r.ID)
			return true
		}))
		assert.LessOrEqual(t, len(slice), 257, "at most limit records")
		got = append(got, slice...)
		if len(slice) < 257 {
			break
		}
		after = slice[len(slice)-1]
	}
	assert.Equal(t, want, got, "slices from the last id seen visit every record once, in id order")

	var sample state.Record
	require.NoError(t, e.s.RecordsAfter(e.ctx, "agr-0041x", 1, func(r state.Record) bool { sample = r; return true }))
	assertRecord(t, *simplyStored(t, "agr-0042"), sample, "from an id not stored, the next one, whole")

	var seen []string
	require.NoError(t, e.s.RecordsAfter(e.ctx, "", 10, func(r state.Record) bool {
		seen = append(seen, r.ID)
		return len(seen) < 2
	}))
	assert.Equal(t, want[:2], seen, "RecordsAfter stops when fn returns false")
}

func testRecordsBound(t *testing.T, e *env) {
	e.create(t,
		record(t, "r1", "node-a", []string{"org/node-a/db", "org/fallback"}),
		simple(t, "r2", "node-a", "org/x"),
		simple(t, "r3", "node-b", "org/y"),
		record(t, "r4", "node-c", []string{"org/z", "org/fallback"}),
	)
	bound := func(names ...string) []string {
		var got []string
		require.NoError(t, e.s.RecordsBound(e.ctx, names, func(r state.Record) bool {
			got = append(got, r.ID)
			return true
		}))
		return got
	}
	assert.Equal(t, []string{"r1", "r4"}, bound("org/fallback"), "every record binding the name, as any candidate, in id order")
	assert.Equal(t, []string{"r1", "r3", "r4"}, bound("org/y", "org/fallback", "org/z"), "each record once")
	assert.Empty(t, bound("org/none"), "an unbound name finds nothing")
	assert.Empty(t, bound(), "no names find nothing")

	r4 := e.get(t, "r4")
	require.NoError(t, e.s.Rebind(e.ctx, "m", rebound(&r4, "org/y")))
	require.NoError(t, e.s.Delete(e.ctx, "r1"))
	assert.Empty(t, bound("org/fallback"), "the index follows Rebind and Delete")
	assert.Equal(t, []string{"r3", "r4"}, bound("org/y"), "a new binding is indexed")
	var got state.Record
	require.NoError(t, e.s.RecordsBound(e.ctx, []string{"org/x"}, func(r state.Record) bool { got = r; return true }))
	assertRecord(t, e.get(t, "r2"), got, "RecordsBound gives whole records")
}
