package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
)

// prepare parses a command's flags and returns the API client and a
// context bounded by -timeout. It refuses arguments beyond nargs.
func prepare(ctx context.Context, fs *flag.FlagSet, g *globals, args []string, nargs int, e env) (*api, context.Context, context.CancelFunc, error) {
	if err := fs.Parse(args); err != nil {
		return nil, nil, nil, parseError(err)
	}
	if err := g.check(); err != nil {
		return nil, nil, nil, err
	}
	if fs.NArg() != nargs {
		return nil, nil, nil, usageError("%s: want %d argument(s), got %d", fs.Name(), nargs, fs.NArg())
	}
	a, err := newAPI(*g, e)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	return a, ctx, cancel, nil
}

// writeJSON writes v indented.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// when prints a time, "never" for the zero time.
func when(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// orDash prints s, "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a message on its table row.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cmdHealth prints GET /admin/health; exit 1 when the agbot reports a
// store or state problem.
func cmdHealth(ctx context.Context, g globals, args []string, e env) error {
	fs := subcommand("health", "health", &g, e)
	a, ctx, cancel, err := prepare(ctx, fs, &g, args, 0, e)
	if err != nil {
		return err
	}
	defer cancel()
	var h delivery.Health
	if err := a.call(ctx, http.MethodGet, healthPath, nil, &h, nil); err != nil {
		return err
	}
	if g.output == "json" {
		err = writeJSON(e.stdout, h)
	} else {
		err = healthTable(e.stdout, h)
	}
	if err != nil {
		return err
	}
	if h.StoreProblem != "" || h.StateProblem != "" {
		return fail(exitNotInSync, "unhealthy")
	}
	return nil
}

func healthTable(w io.Writer, h delivery.Health) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	problem := func(p string) string {
		if p == "" {
			return "ok"
		}
		return "PROBLEM: " + oneLine(p)
	}
	_, _ = fmt.Fprintf(tw, "store\t%s\tlast success %s\n", problem(h.StoreProblem), when(h.LastStoreSuccess))
	_, _ = fmt.Fprintf(tw, "state\t%s\tlast success %s\n", problem(h.StateProblem), when(h.LastStateSuccess))
	_, _ = fmt.Fprintf(tw, "agreements\t%d\tpending %d, diverged %d, held %d (as the last review pass counted)\n", h.Agreements, h.Pending, h.Diverged, h.Held)
	_ = tw.Flush()
	if len(h.Conditions) > 0 {
		_, _ = fmt.Fprintln(tw, "\nCONDITION\tREASON\tAGREEMENTS")
		for _, c := range h.Conditions {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\n", c.Condition, orDash(string(c.Reason)), c.Agreements)
		}
		_ = tw.Flush()
	}
	if len(h.Reasons) > 0 {
		_, _ = fmt.Fprintln(tw, "\nREASON\tAGREEMENTS\tEXAMPLE\tMESSAGE")
		for _, r := range h.Reasons {
			_, _ = fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.Code, r.Agreements, r.Example, oneLine(r.Message))
		}
	}
	return tw.Flush()
}

// cmdAgreements lists the agreements not in sync (or as filtered), a
// page or, with -all, every page; exit 1 when any is listed, unless
// -condition in_sync asked for those in sync.
func cmdAgreements(ctx context.Context, g globals, args []string, e env) error {
	fs := subcommand("agreements", "agreements [-condition C] [-reason R] [-limit N] [-after ID] [-all]", &g, e)
	condition := fs.String("condition", "", "keep the agreements in this `condition`: cancellation_held, waiting, diverged, in_flight, due or in_sync (default: all but in_sync)")
	reason := fs.String("reason", "", "keep the agreements waiting for this reason `code` (OPERATIONS.md lists them)")
	limit := fs.Int("limit", 100, "agreements per page, 1 to 1000")
	after := fs.String("after", "", "start after this agreement `id` (a page's next)")
	all := fs.Bool("all", false, "follow the pages to the last")
	a, ctx, cancel, err := prepare(ctx, fs, &g, args, 0, e)
	if err != nil {
		return err
	}
	defer cancel()
	opts := delivery.ListOptions{Condition: delivery.Condition(*condition), Reason: delivery.ReasonCode(*reason), After: *after, Limit: *limit}
	if err := opts.Check(); err != nil {
		return usageError("%s", strings.TrimPrefix(err.Error(), "delivery: list agreements: "+edgesecrets.ErrInvalid.Error()+": "))
	}
	if *limit < 1 || *limit > 1000 {
		return usageError("-limit %d: want 1 to 1000", *limit)
	}
	var page delivery.Page
	for {
		q := url.Values{"limit": {strconv.Itoa(opts.Limit)}}
		for k, v := range map[string]string{"condition": string(opts.Condition), "reason": string(opts.Reason), "after": opts.After} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var p delivery.Page
		if err := a.call(ctx, http.MethodGet, agreementsPath, q, &p, nil); err != nil {
			return err
		}
		page.Agreements = append(page.Agreements, p.Agreements...)
		page.Next = p.Next
		if !*all || p.Next == "" {
			break
		}
		if p.Next <= opts.After {
			return fail(exitUnreachable, "the agbot's next page starts at %q, not after %q", p.Next, opts.After)
		}
		opts.After = p.Next
	}
	if page.Agreements == nil {
		page.Agreements = []delivery.Listed{}
	}
	if g.output == "json" {
		err = writeJSON(e.stdout, page)
	} else {
		err = agreementsTable(e.stdout, e.stderr, page)
	}
	if err != nil {
		return err
	}
	if len(page.Agreements) > 0 && opts.Condition != delivery.ConditionInSync {
		return fail(exitNotInSync, "agreements not in sync")
	}
	return nil
}

func agreementsTable(w, notes io.Writer, p delivery.Page) error {
	if len(p.Agreements) == 0 {
		_, err := fmt.Fprintln(w, "no agreements")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "ID\tNODE\tCONDITION\tREASON\tMESSAGE")
	for _, l := range p.Agreements {
		code, msg := "-", ""
		if l.Reason != nil {
			code, msg = string(l.Reason.Code), oneLine(l.Reason.Message)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.ID, l.Node, l.Condition, code, msg)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.Next != "" {
		_, _ = fmt.Fprintf(notes, "more agreements: run again with -after %s, or with -all\n", p.Next)
	}
	return nil
}

// contentView is a slot's content as the command shows it: the store
// name, and whether a tag is known, never the tag.
type contentView struct {
	StoreName string `json:"storeName"`
	Tag       string `json:"tag"`
}

// tagShown is "present" or "absent": a checksum tag can test guesses of
// a value, so no tag is shown.
func tagShown(present bool) string {
	if present {
		return "present"
	}
	return "absent"
}

// slotView is one service secret of an agreement.
type slotView struct {
	Service int         `json:"service"`
	Name    string      `json:"name"`
	Desired contentView `json:"desired"`
	Acked   contentView `json:"acked"`
}

// bindingView is one service's bindings: per service secret, the store
// names in order of preference.
type bindingView struct {
	Service string              `json:"service"`
	Secrets map[string][]string `json:"secrets"`
}

// bindingsOf shows services' bindings.
func bindingsOf(services []binding.ServiceBinding) []bindingView {
	out := make([]bindingView, 0, len(services))
	for _, s := range services {
		v := bindingView{Service: s.Service.String(), Secrets: map[string][]string{}}
		for name, b := range s.Secrets {
			v.Secrets[name] = slices.Clone(b.StoreNames)
		}
		out = append(out, v)
	}
	return out
}

// statusAnswer is GET /admin/agreements/{id}: delivery.Status, with the
// slots' tags as the API prints them (a checksum redacted).
type statusAnswer struct {
	ID, Node string
	Phase    state.Phase
	InSync   bool
	Slots    []struct {
		Service        int
		Name           string
		Desired, Acked struct {
			StoreName string
			Tag       string
		}
	}
	Services    []binding.ServiceBinding
	Waiting     string
	Reason      *delivery.Reason
	Diverged    bool
	Held        *state.Cancellation
	Cancel      *state.Cancellation
	Attempts    int
	NextAttempt time.Time
	LastError   string
	Rejection   string
	LastReply   time.Time
}

// cancellationView is a held or decided cancellation.
type cancellationView struct {
	Reason    string    `json:"reason"`
	StoreName string    `json:"storeName,omitempty"`
	Kind      string    `json:"kind,omitempty"`
	DecidedAt time.Time `json:"decidedAt"`
}

func cancellationOf(c *state.Cancellation) *cancellationView {
	if c == nil {
		return nil
	}
	v := &cancellationView{Reason: c.Reason, StoreName: c.StoreName, DecidedAt: c.DecidedAt}
	if c.Kind != state.Unknown {
		v.Kind = c.Kind.String()
	}
	return v
}

// reasonView is why an agreement is held back.
type reasonView struct {
	Code    string    `json:"code"`
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
}

// statusView is the agreement command's output.
type statusView struct {
	ID       string      `json:"id"`
	Node     string      `json:"node"`
	Phase    string      `json:"phase"`
	InSync   bool        `json:"inSync"`
	Diverged bool        `json:"diverged"`
	Waiting  string      `json:"waiting,omitempty"`
	Reason   *reasonView `json:"reason,omitempty"`
	attemptView
	Slots    []slotView    `json:"slots"`
	Bindings []bindingView `json:"bindings"`
}

// attemptView is where an agreement's delivery attempts stand, as the
// agbot's status and the state's record both say.
type attemptView struct {
	Held        *cancellationView `json:"held,omitempty"`
	Cancel      *cancellationView `json:"cancel,omitempty"`
	Attempts    int               `json:"attempts"`
	NextAttempt time.Time         `json:"nextAttempt"`
	LastError   string            `json:"lastError,omitempty"`
	Rejection   string            `json:"rejection,omitempty"`
	LastReply   time.Time         `json:"lastReply"`
}

// rows writes the attempts' table rows.
func (a attemptView) rows(row func(k, v string)) {
	if c := a.Held; c != nil {
		row("held", oneLine(c.Reason)+" (decided "+when(c.DecidedAt)+")")
	}
	if c := a.Cancel; c != nil {
		row("cancel", oneLine(c.Reason)+" (decided "+when(c.DecidedAt)+")")
	}
	row("attempts", strconv.Itoa(a.Attempts))
	row("next attempt", when(a.NextAttempt))
	row("last reply", when(a.LastReply))
	if a.LastError != "" {
		row("last error", oneLine(a.LastError))
	}
	if a.Rejection != "" {
		row("rejection", oneLine(a.Rejection))
	}
}

func (s statusAnswer) view() statusView {
	v := statusView{ID: s.ID, Node: s.Node, Phase: s.Phase.String(), InSync: s.InSync, Diverged: s.Diverged, Waiting: s.Waiting,
		attemptView: attemptView{Held: cancellationOf(s.Held), Cancel: cancellationOf(s.Cancel), Attempts: s.Attempts, NextAttempt: s.NextAttempt,
			LastError: s.LastError, Rejection: s.Rejection, LastReply: s.LastReply},
		Slots: []slotView{}, Bindings: bindingsOf(s.Services)}
	if s.Reason != nil {
		v.Reason = &reasonView{Code: string(s.Reason.Code), Message: s.Reason.Message, Since: s.Reason.Since}
	}
	known := func(tag string) bool { return tag != "" && tag != "none" }
	for _, sl := range s.Slots {
		v.Slots = append(v.Slots, slotView{Service: sl.Service, Name: sl.Name,
			Desired: contentView{StoreName: sl.Desired.StoreName, Tag: tagShown(known(sl.Desired.Tag))},
			Acked:   contentView{StoreName: sl.Acked.StoreName, Tag: tagShown(known(sl.Acked.Tag))}})
	}
	return v
}

// errNoAgreement is the agreement command's 404.
var errNoAgreement = errors.New("no such agreement")

// cmdAgreement prints one agreement's status; exit 1 when it is not in
// sync, 4 when the agbot does not know it.
func cmdAgreement(ctx context.Context, g globals, args []string, e env) error {
	fs := subcommand("agreement", "agreement <id>", &g, e)
	a, ctx, cancel, err := prepare(ctx, fs, &g, args, 1, e)
	if err != nil {
		return err
	}
	defer cancel()
	id := fs.Arg(0)
	if id == "" {
		return usageError("agreement: the id is empty")
	}
	var st statusAnswer
	notFound := fail(exitNotFound, "agreement %.80q: %w", id, errNoAgreement)
	if err := a.call(ctx, http.MethodGet, agreementsPath+"/"+url.PathEscape(id), nil, &st, notFound); err != nil {
		return err
	}
	v := st.view()
	if g.output == "json" {
		err = writeJSON(e.stdout, v)
	} else {
		err = statusTable(e.stdout, v)
	}
	if err != nil {
		return err
	}
	if !v.InSync {
		return fail(exitNotInSync, "not in sync")
	}
	return nil
}

func statusTable(w io.Writer, v statusView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, val string) { _, _ = fmt.Fprintf(tw, "%s\t%s\n", k, val) }
	row("id", v.ID)
	row("node", v.Node)
	row("phase", v.Phase)
	row("in sync", strconv.FormatBool(v.InSync))
	row("diverged", strconv.FormatBool(v.Diverged))
	if v.Reason != nil {
		row("reason", v.Reason.Code+": "+oneLine(v.Reason.Message)+" (since "+when(v.Reason.Since)+")")
	}
	if v.Waiting != "" {
		row("waiting", oneLine(v.Waiting))
	}
	v.rows(row)
	slotsTable(tw, v.Slots, v.Bindings)
	return tw.Flush()
}

// bindingsTable writes the store names each service secret is bound to.
func bindingsTable(tw *tabwriter.Writer, bindings []bindingView) {
	_, _ = fmt.Fprintln(tw, "\nSERVICE\tSECRET\tSTORE NAMES (in order of preference)")
	for _, b := range bindings {
		for _, name := range slices.Sorted(maps.Keys(b.Secrets)) {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Service, name, strings.Join(b.Secrets[name], ", "))
		}
	}
}

// cmdRelease releases the held cancellations and prints how many.
func cmdRelease(ctx context.Context, g globals, args []string, e env) error {
	fs := subcommand("release", "release", &g, e)
	a, ctx, cancel, err := prepare(ctx, fs, &g, args, 0, e)
	if err != nil {
		return err
	}
	defer cancel()
	var r struct {
		Released int `json:"released"`
	}
	if err := a.call(ctx, http.MethodPost, releasePath, nil, &r, nil); err != nil {
		if r.Released > 0 {
			_, _ = fmt.Fprintf(e.stdout, "released %d held cancellation(s) before the agbot failed\n", r.Released)
		}
		return err
	}
	if g.output == "json" {
		return writeJSON(e.stdout, r)
	}
	_, err = fmt.Fprintf(e.stdout, "released %d held cancellation(s)\n", r.Released)
	return err
}

// slotsTable writes an agreement's slots (the service by its binding's
// name) and then its bindings, after the rows above them.
func slotsTable(tw *tabwriter.Writer, slots []slotView, bindings []bindingView) {
	_ = tw.Flush()
	_, _ = fmt.Fprintln(tw, "\nSERVICE\tSECRET\tDESIRED\tDESIRED TAG\tACKED\tACKED TAG")
	for _, s := range slots {
		svc := strconv.Itoa(s.Service)
		if s.Service >= 0 && s.Service < len(bindings) {
			svc = bindings[s.Service].Service
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", svc, s.Name, orDash(s.Desired.StoreName), s.Desired.Tag, orDash(s.Acked.StoreName), s.Acked.Tag)
	}
	_ = tw.Flush()
	bindingsTable(tw, bindings)
}
