package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/boltstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/pgstate"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// boltLockWait is how long state inspect waits for a state file's lock:
// an agbot holds it for as long as it runs.
const boltLockWait = time.Second

// readState is what state inspect reads of a state.
type readState interface {
	state.Records
	state.Observations
	state.Waits
	Close() error
}

// openState opens a state file (never creating one) or a PostgreSQL
// state, and describes it without credentials.
func openState(ctx context.Context, where, schema string, timeout time.Duration) (readState, string, error) {
	if strings.HasPrefix(where, "postgres://") || strings.HasPrefix(where, "postgresql://") {
		st, _, err := pgstate.Open(ctx, pgstate.Options{URL: where, Schema: schema, Timeout: timeout, MaxConns: 2})
		if err != nil {
			// pgstate's errors never hold the URL.
			return nil, "", fail(exitUnreachable, "the PostgreSQL state: %w", err)
		}
		return st, "PostgreSQL state (schema " + cmpOr(schema, "edgesecrets_delivery") + ")", nil
	}
	if schema != "" {
		return nil, "", usageError("-schema is for a postgres:// state")
	}
	fi, err := os.Stat(where)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", fail(exitUnreachable, "no state file %s", where)
	case err != nil:
		return nil, "", fail(exitUnreachable, "state file: %w", err)
	case !fi.Mode().IsRegular():
		return nil, "", fail(exitUnreachable, "%s is not a state file (not a regular file)", where)
	}
	st, _, err := boltstate.Open(where, boltstate.Options{LockTimeout: boltLockWait})
	if err != nil {
		if strings.Contains(err.Error(), "in use by another process") {
			return nil, "", fail(exitUnreachable, "%w (an agbot holds it while it runs: stop it, or ask the running agbot with 'edgesecrets agreements')", err)
		}
		return nil, "", fail(exitUnreachable, "%w", err)
	}
	return st, "state file " + where, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// recordView is one agreement of a state as state inspect shows it:
// names, phases and sequences; of each content tag only whether it is
// known.
type recordView struct {
	ID       string        `json:"id"`
	Node     string        `json:"node"`
	Phase    string        `json:"phase"`
	InSync   bool          `json:"inSync"`
	Proposed bool          `json:"proposed"`
	Bindings []bindingView `json:"bindings"`
	Slots    []slotView    `json:"slots"`
	// Epoch and Counter make the last envelope sequence sent,
	// Epoch<<32 | Counter.
	Epoch         uint64        `json:"epoch"`
	Counter       uint32        `json:"counter"`
	ReplySequence uint64        `json:"replySequence"`
	InFlight      *inFlightView `json:"inFlight,omitempty"`
	attemptView
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// inFlightView is a message sent and not answered.
type inFlightView struct {
	Type     string    `json:"type"`
	Kind     string    `json:"kind,omitempty"`
	Sequence uint64    `json:"sequence"`
	At       time.Time `json:"at"`
}

// hasTag reports whether a content's tag is known.
func hasTag(c state.Content) bool { return c.Tag != (secretstore.ContentTag{}) }

// recordInSync reports whether the agent acknowledged the desired content
// of every slot of an active agreement.
func recordInSync(r state.Record) bool {
	if r.Phase != state.PhaseActive || len(r.Slots) == 0 {
		return false
	}
	for _, s := range r.Slots {
		if !hasTag(s.Desired) || s.Acked != s.Desired {
			return false
		}
	}
	return true
}

func viewRecord(r state.Record) recordView {
	v := recordView{ID: r.ID, Node: r.Node, Phase: r.Phase.String(), InSync: recordInSync(r), Proposed: r.Proposed,
		Bindings: bindingsOf(r.Services), Slots: []slotView{}, Epoch: r.Epoch, Counter: r.Counter, ReplySequence: r.ReplySequence,
		attemptView: attemptView{Held: cancellationOf(r.Held), Cancel: cancellationOf(r.Cancel), Attempts: r.Attempts, NextAttempt: r.NextAttempt,
			LastError: r.LastError, Rejection: r.Rejection, LastReply: r.LastReply},
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	for _, s := range r.Slots {
		v.Slots = append(v.Slots, slotView{Service: s.Service, Name: s.Name,
			Desired: contentView{StoreName: s.Desired.StoreName, Tag: tagShown(hasTag(s.Desired))},
			Acked:   contentView{StoreName: s.Acked.StoreName, Tag: tagShown(hasTag(s.Acked))}})
	}
	if f := r.InFlight; f != nil {
		v.InFlight = &inFlightView{Type: string(f.Type), Kind: f.Kind, Sequence: f.Sequence, At: f.At}
	}
	return v
}

// counts are a state's totals.
type counts struct {
	Agreements int            `json:"agreements"`
	ByPhase    map[string]int `json:"byPhase"`
	InSync     int            `json:"inSync"`
	InFlight   int            `json:"inFlight"`
	Held       int            `json:"held"`
	StoreNames int            `json:"storeNames"`
	// Observations counts the store secrets observed, by what was found.
	Observations map[string]int `json:"observations"`
	Waits        int            `json:"waits"`
}

// waitView is a deployment waiting for store secrets.
type waitView struct {
	ID         string    `json:"id"`
	StoreNames []string  `json:"storeNames"`
	CreatedAt  time.Time `json:"createdAt"`
}

// inspection is state inspect's output.
type inspection struct {
	State      string       `json:"state"`
	Counts     counts       `json:"counts"`
	Agreements []recordView `json:"agreements"`
	Waits      []waitView   `json:"waits"`
}

// cmdStateInspect inspects a state offline; exit 4 when -agreement names
// none of its agreements.
func cmdStateInspect(ctx context.Context, g globals, args []string, e env) error {
	fs := subcommand("state inspect", "state inspect -state <file | postgres://...> [-schema S] [-agreement ID]", &g, e)
	where := fs.String("state", "", "the state: a bolt `file` (an agbot's -state, by default <dir>/agbot-state.db) or a postgres:// URL")
	schema := fs.String("schema", "", "with a postgres:// state: its `schema` (default edgesecrets_delivery)")
	only := fs.String("agreement", "", "show this agreement `id` alone")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if err := g.check(); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return usageError("state inspect: unexpected argument %.40q", fs.Arg(0))
	case *where == "":
		return usageError("state inspect: -state is required")
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	st, desc, err := openState(ctx, *where, *schema, g.timeout)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // after the reads, its error changes nothing
	unreachable := func(err error) error { return fail(exitUnreachable, "reading the %s: %w", desc, err) }

	out := inspection{State: desc, Agreements: []recordView{}, Waits: []waitView{}}
	if *only != "" {
		r, err := st.Get(ctx, *only)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return fail(exitNotFound, "agreement %.80q: not in the %s", *only, desc)
		case err != nil:
			return unreachable(err)
		}
		out.Agreements = append(out.Agreements, viewRecord(r))
		return writeInspection(e.stdout, g.output, out, true)
	}
	c := counts{ByPhase: map[string]int{}, Observations: map[string]int{}}
	names := map[string]bool{}
	err = st.Records(ctx, func(r state.Record) bool {
		v := viewRecord(r)
		out.Agreements = append(out.Agreements, v)
		c.Agreements++
		c.ByPhase[v.Phase]++
		if v.InSync {
			c.InSync++
		}
		if r.InFlight != nil {
			c.InFlight++
		}
		if r.Held != nil {
			c.Held++
		}
		for _, s := range r.Services {
			for _, b := range s.Secrets {
				for _, n := range b.StoreNames {
					names[n] = true
				}
			}
		}
		return true
	})
	if err != nil {
		return unreachable(err)
	}
	c.StoreNames = len(names)
	obs, err := st.Observations(ctx, nil)
	if err != nil {
		return unreachable(err)
	}
	for _, o := range obs {
		c.Observations[o.State.String()]++
	}
	waits, err := st.Waits(ctx)
	if err != nil {
		return unreachable(err)
	}
	for _, w := range waits {
		out.Waits = append(out.Waits, waitView{ID: w.ID, StoreNames: slices.Clone(w.StoreNames), CreatedAt: w.CreatedAt})
	}
	c.Waits = len(waits)
	out.Counts = c
	return writeInspection(e.stdout, g.output, out, false)
}

func writeInspection(w io.Writer, format string, in inspection, detail bool) error {
	if format == "json" {
		if detail {
			return writeJSON(w, in.Agreements[0])
		}
		return writeJSON(w, in)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if detail {
		recordTable(tw, in.Agreements[0])
		return tw.Flush()
	}
	c := in.Counts
	_, _ = fmt.Fprintf(tw, "%s\n", in.State)
	_, _ = fmt.Fprintf(tw, "agreements\t%d\t%s\n", c.Agreements, keyCounts(c.ByPhase))
	_, _ = fmt.Fprintf(tw, "in sync\t%d\tin flight %d, held %d\n", c.InSync, c.InFlight, c.Held)
	_, _ = fmt.Fprintf(tw, "store names bound\t%d\tobserved: %s\n", c.StoreNames, keyCounts(c.Observations))
	_, _ = fmt.Fprintf(tw, "deployments waiting\t%d\n", c.Waits)
	_ = tw.Flush()
	if len(in.Agreements) > 0 {
		_, _ = fmt.Fprintln(tw, "\nID\tNODE\tPHASE\tIN SYNC\tEPOCH\tCOUNTER\tREPLY SEQ\tIN FLIGHT\tSTORE NAMES")
		for _, r := range in.Agreements {
			inflight := "-"
			if r.InFlight != nil {
				inflight = r.InFlight.Type + " " + strconv.FormatUint(r.InFlight.Sequence, 10)
			}
			var names []string
			for _, b := range r.Bindings {
				for _, n := range b.Secrets {
					names = append(names, n...)
				}
			}
			slices.Sort(names)
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%d\t%d\t%d\t%s\t%s\n", r.ID, r.Node, r.Phase, r.InSync, r.Epoch, r.Counter, r.ReplySequence,
				inflight, strings.Join(slices.Compact(names), ", "))
		}
		_ = tw.Flush()
	}
	if len(in.Waits) > 0 {
		_, _ = fmt.Fprintln(tw, "\nWAITING DEPLOYMENT\tSINCE\tSTORE NAMES")
		for _, wt := range in.Waits {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", wt.ID, when(wt.CreatedAt), strings.Join(wt.StoreNames, ", "))
		}
	}
	return tw.Flush()
}

// keyCounts prints counts by key, sorted: "active 2, cancelling 1".
func keyCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func recordTable(tw *tabwriter.Writer, r recordView) {
	row := func(k, v string) { _, _ = fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("id", r.ID)
	row("node", r.Node)
	row("phase", r.Phase)
	row("in sync", strconv.FormatBool(r.InSync))
	row("proposed", strconv.FormatBool(r.Proposed))
	row("epoch, counter", fmt.Sprintf("%d, %d (last sequence %d)", r.Epoch, r.Counter, r.Epoch<<32|uint64(r.Counter)))
	row("reply sequence", strconv.FormatUint(r.ReplySequence, 10))
	if f := r.InFlight; f != nil {
		row("in flight", fmt.Sprintf("%s %s sequence %d, sent %s", f.Type, f.Kind, f.Sequence, when(f.At)))
	}
	r.rows(row)
	row("created, updated", when(r.CreatedAt)+", "+when(r.UpdatedAt))
	slotsTable(tw, r.Slots, r.Bindings)
}
