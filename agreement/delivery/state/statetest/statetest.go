// Package statetest is the conformance suite every state.Backend runs, in
// the style of secretstore/storetest and Go CDK's drivertest: an
// implementation provides a Harness, and Run executes the same cases
// against it. state.NewMemory runs it always, the embedded
// delivery/boltstate runs it with reopens and a canary scan of its file,
// and a shared (PostgreSQL) state runs it against a real server.
//
// A Backend's test looks like
//
//	func TestConformance(t *testing.T) {
//		statetest.Run(t, newHarness, statetest.Options{Durable: true})
//	}
//
// Times are compared to the microsecond, the precision every Backend must
// keep (PostgreSQL's timestamp precision), and in UTC: a Backend need not
// keep a time's location or monotonic reading. Empty and nil slices and
// maps are equal.
package statetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
)

// Harness gives the suite one Backend implementation.
type Harness interface {
	// MakeState returns a new Backend over empty storage of its own (a
	// fresh file, a fresh database or schema), so cases do not see each
	// other's records.
	MakeState(ctx context.Context) (state.Backend, error)
	// Close releases the harness and its storage. States the suite made
	// are closed before.
	Close()
}

// DurableHarness is the Harness of a Backend that keeps its content across
// Close: Options.Durable requires it.
type DurableHarness interface {
	Harness
	// Reopen closes st, a Backend made by MakeState or Reopen, and opens a
	// new Backend over the same storage, as an agbot restarting would.
	Reopen(ctx context.Context, st state.Backend) (state.Backend, error)
	// StoredBytes returns every byte the storage of st holds at rest,
	// including free space (the whole file; a dump of the database), with
	// everything committed so far. The canary case scans it.
	StoredBytes(ctx context.Context, st state.Backend) ([]byte, error)
}

// HarnessMaker makes a Harness for one test case.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// Options declare what the Backend under test is, so the suite runs the
// cases that apply. The zero value is a Backend for one engine that keeps
// nothing across Close (state.NewMemory).
type Options struct {
	// Durable: the Backend keeps everything across Close (reopened through
	// DurableHarness.Reopen), NewEpoch keeps increasing across reopens,
	// and its stored bytes can be scanned for a canary.
	Durable bool
	// Shared: several engines (members) share the Backend, so Due leases
	// the records it returns to the calling member and Update by another
	// member fails with ErrConflict.
	Shared bool
	// Writers is the number of goroutines of the concurrency cases; zero
	// means 8.
	Writers int
}

// Run runs every conformance case as a subtest.
func Run(t *testing.T, newHarness HarnessMaker, opts Options) {
	if opts.Writers <= 0 {
		opts.Writers = 8
	}
	cases := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"CreateGetRoundTrip", testCreateGet},
		{"CreateExisting", testCreateExisting},
		{"GetMissing", testGetMissing},
		{"UpdateCompareAndSet", testUpdateCAS},
		{"UpdateManyReportsEachConflict", testUpdateMany},
		{"UpdateDeletedOrUnknown", testUpdateDeleted},
		{"UpdateKeepsServices", testUpdateKeepsServices},
		{"UpdateMovesNode", testUpdateMovesNode},
		{"RebindReplacesBindings", testRebind},
		{"RebindCompareAndSet", testRebindCAS},
		{"RebindKeepsNamesOthersBind", testRebindSharedNames},
		{"RebindSurvivesReopen", testRebindReopen},
		{"DeleteIdempotent", testDeleteIdempotent},
		{"RecordsInIDOrder", testRecordsOrder},
		{"RecordsAfterSlices", testRecordsAfter},
		{"RecordsBoundByIndex", testRecordsBound},
		{"RecordsEarlyStop", testRecordsEarlyStop},
		{"RecordsCallbackMayUseState", testRecordsCallback},
		{"DeepCopiesIn", testDeepCopiesIn},
		{"DeepCopiesOut", testDeepCopiesOut},
		{"NamesDistinctSorted", testNames},
		{"MarkDueSelectors", testMarkDueSelectors},
		{"MarkDueRules", testMarkDueRules},
		{"MarkDueChangesRevision", testMarkDueRevision},
		{"DueOrderAndLimit", testDueOrder},
		{"DueClaimsUntilLease", testDueClaims},
		{"ObservationsRoundTrip", testObservations},
		{"ContentTagsRoundTrip", testContentTags},
		{"Waits", testWaits},
		{"NewEpochIncreases", testNewEpoch},
		{"ConcurrentUpdatesOfOneRecord", testConcurrentOneRecord},
		{"ConcurrentUpdatesOfManyRecords", testConcurrentManyRecords},
		{"ContextCancellation", testContextCancel},
		{"ClosedStateUnavailable", testClosed},
		{"ReopenKeepsEverything", testReopen},
		{"NewEpochIncreasesAcrossReopen", testEpochReopen},
		{"CanaryNeverStored", testCanary},
		{"SharedLeases", testSharedLeases},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			h, err := newHarness(ctx, t)
			require.NoError(t, err, "making harness")
			t.Cleanup(h.Close)
			st, err := h.MakeState(ctx)
			require.NoError(t, err, "making state")
			e := &env{ctx: ctx, h: h, opts: opts}
			e.setState(t, st)
			c.fn(t, e)
		})
	}
}

type env struct {
	ctx  context.Context
	h    Harness
	s    state.Backend
	opts Options
}

// setState makes st the state under test and closes it at the end of the
// case, before the harness.
func (e *env) setState(t *testing.T, st state.Backend) {
	e.s = st
	t.Cleanup(func() { _ = st.Close() })
}

// durable returns the DurableHarness, or skips a case that needs one.
func (e *env) durable(t *testing.T) DurableHarness {
	t.Helper()
	if !e.opts.Durable {
		t.Skip("the state keeps nothing across Close (Options.Durable is false)")
	}
	dh, ok := e.h.(DurableHarness)
	require.True(t, ok, "Options.Durable needs a harness implementing DurableHarness")
	return dh
}

// reopen closes the state under test and opens it again on its storage.
func (e *env) reopen(t *testing.T) {
	t.Helper()
	st, err := e.durable(t).Reopen(e.ctx, e.s)
	require.NoError(t, err, "reopening the state")
	e.setState(t, st)
}

// AssertNoCanary fails t if stored holds canary in any of the forms a
// careless encoder would write it: raw, hexadecimal, or base64 at any
// alignment. Use it to scan a Backend's storage (a file, a database dump)
// after a flow that read a secret whose value is canary. The canary should
// be at least 16 random bytes.
func AssertNoCanary(t testing.TB, stored, canary []byte) bool {
	t.Helper()
	require.GreaterOrEqual(t, len(canary), 16, "a canary of at least 16 bytes")
	forms := map[string]string{
		"raw": string(canary),
		"hex": hex.EncodeToString(canary),
		"HEX": strings.ToUpper(hex.EncodeToString(canary)),
	}
	for shift := range 3 {
		// A value inside a larger blob is encoded at any offset; the
		// characters that depend only on the canary are the middle ones.
		shifted := append(make([]byte, shift), canary...)
		for name, enc := range map[string]*base64.Encoding{"base64": base64.StdEncoding, "base64url": base64.URLEncoding} {
			s := enc.EncodeToString(shifted)
			forms[fmt.Sprintf("%s+%d", name, shift)] = s[4 : len(s)-4]
		}
	}
	ok := true
	for _, form := range slices.Sorted(maps.Keys(forms)) {
		if bytes.Contains(stored, []byte(forms[form])) {
			t.Errorf("the state's storage holds the canary value (%s form)", form)
			ok = false
		}
	}
	return ok
}
