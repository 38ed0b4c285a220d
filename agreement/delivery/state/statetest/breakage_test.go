package statetest_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state/statetest"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// breakEnv names the rule a child test process breaks.
const breakEnv = "STATETEST_BREAK"

// breakages maps each rule broken on purpose to the suite cases that must
// catch it.
var breakages = map[string][]string{
	// The concurrent cases catch it too, but only when the scheduler
	// interleaves the writers, which a loaded machine may not do.
	"update-ignores-revision":  {"UpdateCompareAndSet"},
	"conflict-not-typed":       {"UpdateCompareAndSet"},
	"update-all-or-nothing":    {"UpdateManyReportsEachConflict"},
	"update-creates":           {"UpdateDeletedOrUnknown"},
	"create-overwrites":        {"CreateExisting"},
	"delete-missing-fails":     {"DeleteIdempotent"},
	"create-keeps-caller-copy": {"DeepCopiesIn"},
	"get-shares-stored-copy":   {"DeepCopiesOut"},
	"records-unordered":        {"RecordsInIDOrder"},
	"records-ignores-stop":     {"RecordsEarlyStop"},
	"names-duplicated":         {"NamesDistinctSorted"},
	"markdue-moves-earlier":    {"MarkDueRules"},
	"markdue-miscounts":        {"MarkDueSelectors"},
	"markdue-keeps-attempts":   {"MarkDueRules"},
	"due-does-not-claim":       {"DueClaimsUntilLease", "DueOrderAndLimit"},
	"due-latest-first":         {"DueOrderAndLimit"},
	"due-ignores-limit":        {"DueOrderAndLimit"},
	"tags-stored-printed":      {"ObservationsRoundTrip", "ContentTagsRoundTrip"},
	"observations-extra":       {"ObservationsRoundTrip"},
	"waits-unsorted":           {"Waits"},
	"epoch-repeats":            {"NewEpochIncreases"},
	"close-keeps-serving":      {"ClosedStateUnavailable"},
	"context-ignored":          {"ContextCancellation"},
	"epoch-resets-on-reopen":   {"NewEpochIncreasesAcrossReopen"},
	"reopen-loses-last-write":  {"ReopenKeepsEverything"},
	"update-ignores-lease":     {"SharedLeases"},
	"rebind-keeps-names":       {"RebindReplacesBindings", "RebindKeepsNamesOthersBind"},
	"rebind-ignores-revision":  {"RebindCompareAndSet"},
}

// TestSuiteCatchesBreakage runs the suite, in a child process each, on a
// memory state with one rule broken, and requires the cases named for the
// rule to fail.
func TestSuiteCatchesBreakage(t *testing.T) {
	if os.Getenv(breakEnv) != "" {
		t.Skip("in a child")
	}
	for _, rule := range slices.Sorted(maps.Keys(breakages)) {
		t.Run(rule, func(t *testing.T) {
			cases := breakages[rule]
			pattern := "^TestBrokenStateChild$/^(" + strings.Join(cases, "|") + ")$"
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+pattern, "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), breakEnv+"="+rule)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the suite must fail when %s; output:\n%s", rule, out)
			for _, c := range cases {
				assert.Contains(t, string(out), "--- FAIL: TestBrokenStateChild/"+c+" ", "case %s catches %s", c, rule)
			}
		})
	}
}

// TestBrokenStateChild is the child of TestSuiteCatchesBreakage.
func TestBrokenStateChild(t *testing.T) {
	rule := os.Getenv(breakEnv)
	if rule == "" {
		t.Skip("run by TestSuiteCatchesBreakage")
	}
	statetest.Run(t, func(context.Context, *testing.T) (statetest.Harness, error) {
		return &brokenHarness{rule: rule}, nil
	}, statetest.Options{Durable: true, Shared: rule == "update-ignores-lease"})
}

// brokenHarness serves the suite memory states that survive a reopen (the
// harness keeps the memory state), with one rule broken.
type brokenHarness struct {
	rule  string
	inner state.Backend
}

func (h *brokenHarness) MakeState(context.Context) (state.Backend, error) {
	h.inner = state.NewMemory()
	return h.wrap(), nil
}

func (h *brokenHarness) wrap() *broken {
	return &broken{Backend: h.inner, rule: h.rule, callerCopies: map[string]*state.Record{}, shared: map[string]state.Record{}}
}

func (h *brokenHarness) Reopen(_ context.Context, st state.Backend) (state.Backend, error) {
	b := st.(*broken)
	if h.rule == "reopen-loses-last-write" && b.beforeLast != nil {
		// A state that acknowledged a write it never made durable.
		prev := b.beforeLast.Clone()
		_ = h.inner.Delete(context.Background(), prev.ID)
		_ = h.inner.Create(context.Background(), &prev)
	}
	return h.wrap(), nil
}

func (h *brokenHarness) StoredBytes(ctx context.Context, _ state.Backend) ([]byte, error) {
	var b strings.Builder
	err := h.inner.Records(ctx, func(r state.Record) bool {
		fmt.Fprintf(&b, "%+v\n", r)
		return true
	})
	return []byte(b.String()), err
}

func (h *brokenHarness) Close() {}

// broken wraps a memory state and breaks one rule of the Backend contract.
type broken struct {
	state.Backend
	rule string

	mu           sync.Mutex
	epoch        uint64
	callerCopies map[string]*state.Record
	shared       map[string]state.Record
	beforeLast   *state.Record
}

func (b *broken) ctx(ctx context.Context) context.Context {
	if b.rule == "context-ignored" {
		return context.Background()
	}
	return ctx
}

func (b *broken) Close() error {
	if b.rule == "close-keeps-serving" {
		return nil
	}
	return b.Backend.Close()
}

func (b *broken) Create(ctx context.Context, rec *state.Record) error {
	ctx = b.ctx(ctx)
	if b.rule == "create-overwrites" {
		_ = b.Backend.Delete(ctx, rec.ID)
	}
	if b.rule == "tags-stored-printed" {
		c := rec.Clone()
		printTags(&c)
		err := b.Backend.Create(ctx, &c)
		rec.Revision = c.Revision
		return err
	}
	err := b.Backend.Create(ctx, rec)
	if err == nil && b.rule == "create-keeps-caller-copy" {
		b.mu.Lock()
		b.callerCopies[rec.ID] = rec
		b.mu.Unlock()
	}
	return err
}

func (b *broken) Get(ctx context.Context, id string) (state.Record, error) {
	b.mu.Lock()
	if c, ok := b.callerCopies[id]; ok {
		b.mu.Unlock()
		return *c, nil
	}
	if c, ok := b.shared[id]; ok {
		b.mu.Unlock()
		return c, nil
	}
	b.mu.Unlock()
	r, err := b.Backend.Get(b.ctx(ctx), id)
	if err == nil && b.rule == "get-shares-stored-copy" {
		b.mu.Lock()
		b.shared[id] = r
		b.mu.Unlock()
	}
	return r, err
}

func (b *broken) forget(ids ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		delete(b.callerCopies, id)
		delete(b.shared, id)
	}
}

func (b *broken) Update(ctx context.Context, member string, recs ...*state.Record) error {
	ctx = b.ctx(ctx)
	for _, r := range recs {
		b.forget(r.ID)
	}
	switch b.rule {
	case "update-ignores-revision":
		for _, r := range recs {
			if cur, err := b.Backend.Get(ctx, r.ID); err == nil {
				r.Revision = cur.Revision
			}
		}
	case "conflict-not-typed":
		if err := b.Backend.Update(ctx, member, recs...); err != nil {
			return fmt.Errorf("update: %w", state.ErrConflict)
		}
		return nil
	case "update-all-or-nothing":
		for _, r := range recs {
			if cur, err := b.Backend.Get(ctx, r.ID); err != nil || cur.Revision != r.Revision {
				return &state.ConflictError{IDs: []string{r.ID}}
			}
		}
	case "update-creates":
		for _, r := range recs {
			if _, err := b.Backend.Get(ctx, r.ID); errors.Is(err, state.ErrNotFound) {
				return b.Backend.Create(ctx, r)
			}
		}
	case "tags-stored-printed":
		copies := make([]*state.Record, len(recs))
		for i, r := range recs {
			c := r.Clone()
			printTags(&c)
			copies[i] = &c
		}
		err := b.Backend.Update(ctx, member, copies...)
		for i, c := range copies {
			recs[i].Revision = c.Revision
		}
		return err
	case "reopen-loses-last-write":
		if len(recs) == 1 {
			if prev, err := b.Backend.Get(ctx, recs[0].ID); err == nil {
				b.mu.Lock()
				b.beforeLast = &prev
				b.mu.Unlock()
			}
		}
	case "update-ignores-lease":
		// The memory state ignores members; Run is told it is shared.
	}
	return b.Backend.Update(ctx, member, recs...)
}

func (b *broken) Rebind(ctx context.Context, member string, rec *state.Record) error {
	ctx = b.ctx(ctx)
	b.forget(rec.ID)
	switch b.rule {
	case "rebind-keeps-names":
		return b.Backend.Update(ctx, member, rec)
	case "rebind-ignores-revision":
		if cur, err := b.Backend.Get(ctx, rec.ID); err == nil {
			rec.Revision = cur.Revision
		}
	}
	return b.Backend.Rebind(ctx, member, rec)
}

// printTags replaces every content tag of r by what its printed form
// parses back to: a checksum tag is lost.
func printTags(r *state.Record) {
	p := func(c *state.Content) {
		tag, _ := secretstore.ParseContentTag(c.Tag.String())
		c.Tag = tag
	}
	for i := range r.Slots {
		p(&r.Slots[i].Desired)
		p(&r.Slots[i].Acked)
	}
	if r.InFlight != nil {
		for k, c := range r.InFlight.Contents {
			p(&c)
			r.InFlight.Contents[k] = c
		}
	}
}

func (b *broken) Delete(ctx context.Context, ids ...string) error {
	ctx = b.ctx(ctx)
	b.forget(ids...)
	if b.rule == "delete-missing-fails" {
		for _, id := range ids {
			if _, err := b.Backend.Get(ctx, id); errors.Is(err, state.ErrNotFound) {
				return err
			}
		}
	}
	return b.Backend.Delete(ctx, ids...)
}

func (b *broken) Records(ctx context.Context, fn func(state.Record) bool) error {
	ctx = b.ctx(ctx)
	switch b.rule {
	case "records-unordered":
		var all []state.Record
		err := b.Backend.Records(ctx, func(r state.Record) bool { all = append(all, r); return true })
		slices.Reverse(all)
		for _, r := range all {
			if !fn(r) {
				break
			}
		}
		return err
	case "records-ignores-stop":
		return b.Backend.Records(ctx, func(r state.Record) bool { fn(r); return true })
	}
	return b.Backend.Records(ctx, fn)
}

func (b *broken) Names(ctx context.Context, member string) ([]string, error) {
	names, err := b.Backend.Names(b.ctx(ctx), member)
	if b.rule == "names-duplicated" && len(names) > 1 {
		names = append(names, names[0])
	}
	return names, err
}

func (b *broken) MarkDue(ctx context.Context, sel state.Selector, when time.Time, reset bool) (int, error) {
	ctx = b.ctx(ctx)
	var before map[string]state.Record
	if b.rule == "markdue-moves-earlier" || b.rule == "markdue-keeps-attempts" {
		before = map[string]state.Record{}
		_ = b.Backend.Records(ctx, func(r state.Record) bool { before[r.ID] = r; return true })
	}
	n, err := b.Backend.MarkDue(ctx, sel, when, reset)
	if err != nil {
		return n, err
	}
	switch b.rule {
	case "markdue-miscounts":
		if n > 1 {
			n--
		}
	case "markdue-moves-earlier", "markdue-keeps-attempts":
		for id, old := range before {
			cur, err := b.Backend.Get(ctx, id)
			if err != nil || !selected(cur, sel) {
				continue
			}
			if b.rule == "markdue-moves-earlier" && !cur.NextAttempt.IsZero() && cur.NextAttempt.Before(when) {
				cur.NextAttempt = when
			}
			if b.rule == "markdue-keeps-attempts" && cur.NextAttempt.Equal(old.NextAttempt) {
				cur.Attempts = old.Attempts
			}
			_ = b.Backend.Update(ctx, "", &cur)
		}
	}
	return n, nil
}

func selected(r state.Record, sel state.Selector) bool {
	if slices.Contains(sel.IDs, r.ID) || slices.Contains(sel.Nodes, r.Node) {
		return true
	}
	for _, n := range state.StoreNames(r.Services) {
		if slices.Contains(sel.StoreNames, n) {
			return true
		}
	}
	return false
}

func (b *broken) Due(ctx context.Context, member string, now time.Time, lease time.Duration, limit int) ([]state.Record, error) {
	ctx = b.ctx(ctx)
	switch b.rule {
	case "due-does-not-claim":
		var due []state.Record
		err := b.Backend.Records(ctx, func(r state.Record) bool {
			if !r.NextAttempt.IsZero() && !r.NextAttempt.After(now) {
				due = append(due, r)
			}
			return true
		})
		slices.SortStableFunc(due, func(a, c state.Record) int { return a.NextAttempt.Compare(c.NextAttempt) })
		return due[:min(limit, len(due))], err
	case "due-ignores-limit":
		limit = 0
	}
	recs, err := b.Backend.Due(ctx, member, now, lease, limit)
	if b.rule == "due-latest-first" {
		slices.Reverse(recs)
	}
	return recs, err
}

func (b *broken) Observations(ctx context.Context, names []string) (map[string]state.Observation, error) {
	obs, err := b.Backend.Observations(b.ctx(ctx), names)
	if b.rule == "observations-extra" {
		for _, n := range names {
			if _, ok := obs[n]; !ok {
				obs[n] = state.Observation{Name: n}
			}
		}
	}
	return obs, err
}

func (b *broken) PutObservations(ctx context.Context, member string, obs ...state.Observation) error {
	if b.rule == "tags-stored-printed" {
		obs = slices.Clone(obs)
		for i := range obs {
			obs[i].Tag, _ = secretstore.ParseContentTag(obs[i].Tag.String())
		}
	}
	return b.Backend.PutObservations(b.ctx(ctx), member, obs...)
}

func (b *broken) PutWait(ctx context.Context, w state.Wait) error {
	return b.Backend.PutWait(b.ctx(ctx), w)
}

func (b *broken) Waits(ctx context.Context) ([]state.Wait, error) {
	w, err := b.Backend.Waits(b.ctx(ctx))
	if b.rule == "waits-unsorted" {
		slices.Reverse(w)
	}
	return w, err
}

func (b *broken) DeleteWait(ctx context.Context, id string) error {
	return b.Backend.DeleteWait(b.ctx(ctx), id)
}

func (b *broken) NewEpoch(ctx context.Context) (uint64, error) {
	ctx = b.ctx(ctx)
	switch b.rule {
	case "epoch-repeats":
		n, err := b.Backend.NewEpoch(ctx)
		return n / 2 * 2, err
	case "epoch-resets-on-reopen":
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.epoch++
		return b.epoch, nil
	}
	return b.Backend.NewEpoch(ctx)
}

// TestAssertNoCanaryCatchesEveryForm: the canary scan fails on a canary in
// each form, at each base64 alignment, and passes on clean bytes.
func TestAssertNoCanaryCatchesEveryForm(t *testing.T) {
	canary := []byte("canary-" + strings.Repeat("Q7", 12))
	clean := []byte(`{"id":"agr-1","tag":"sha256:00ff","name":"org/canary-db"}`)
	assert.True(t, statetest.AssertNoCanary(t, clean, canary), "clean bytes pass")

	form := os.Getenv(canaryFormEnv)
	if form == "" {
		for _, f := range []string{"raw", "hex", "HEX", "base64+0", "base64+1", "base64+2", "base64url+1"} {
			t.Run(f, func(t *testing.T) {
				cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestAssertNoCanaryCatchesEveryForm$", "-test.count=1")
				cmd.Env = append(os.Environ(), canaryFormEnv+"="+f)
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, "a canary in %s form must fail the scan; output:\n%s", f, out)
				assert.Contains(t, string(out), "holds the canary value", "the failure says what was found")
			})
		}
		return
	}
	// In the child: embed the canary in the form asked for and scan.
	var enc string
	switch {
	case form == "raw":
		enc = string(canary)
	case form == "hex":
		enc = hex.EncodeToString(canary)
	case form == "HEX":
		enc = strings.ToUpper(hex.EncodeToString(canary))
	case strings.HasPrefix(form, "base64"):
		shift := int(form[len(form)-1] - '0')
		e := base64.StdEncoding
		if strings.HasPrefix(form, "base64url") {
			e = base64.URLEncoding
		}
		enc = e.EncodeToString(append([]byte("xyz")[:shift], canary...))
	}
	statetest.AssertNoCanary(t, append(append(slices.Clone(clean), enc...), clean...), canary)
}

const canaryFormEnv = "STATETEST_CANARY_FORM"
