package storewatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Watch intervals (documented on Options.Interval).
const (
	defaultWatchInterval = time.Minute
	// minWatchInterval is the shortest interval accepted: faster polling
	// would only load the store.
	minWatchInterval = time.Second
)

// EventKind says what a Watcher noticed about a secret.
type EventKind uint8

// Event kinds.
const (
	// Changed: the secret's content changed (a new version, or for stores
	// without versions a different SHA-256 of its data).
	Changed EventKind = iota + 1
	// Deleted: the secret does not exist (Stat returned edgesecrets.ErrNotFound).
	Deleted
	// Forbidden: the store refused access to the secret (edgesecrets.ErrPermission).
	Forbidden
	// Appeared: the secret exists and was missing, forbidden, or not yet
	// seen since it was watched.
	Appeared
	// Unavailable: some names could not be checked this cycle; their state
	// is unchanged. At most one such event per cycle, listing every name.
	Unavailable
)

// String returns the kind's lower-case name.
func (k EventKind) String() string {
	switch k {
	case Changed:
		return "changed"
	case Deleted:
		return "deleted"
	case Forbidden:
		return "forbidden"
	case Appeared:
		return "appeared"
	case Unavailable:
		return "unavailable"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one thing a Watcher noticed in a cycle. It holds names, versions
// and store errors, never values or checksums.
type Event struct {
	Kind EventKind
	// Name is the secret, for every kind but Unavailable.
	Name string
	// Names lists, sorted, every name an Unavailable event covers.
	Names []string
	// Version is the new version for Changed and Appeared; empty when the
	// store keeps no versions (the watcher's checksum is never exposed).
	Version string
	// Initial marks the first observation of a name since it was watched:
	// Appeared if it exists, Deleted if not, Forbidden if access is denied.
	Initial bool
	// Outage marks an Unavailable event covering every watched name: the
	// store itself is down, nothing was learnt about any secret.
	Outage bool
	// Err is the store's error for Forbidden and Unavailable (for
	// Unavailable, the first of the cycle).
	Err error
}

// Cycle is the outcome of one watch cycle as a whole: its events, how
// every watched name fared, and whether the store accepted the caller's
// own credentials. It lets a caller tell trouble with the store itself
// (an expired token: every name Forbidden and the credential check
// failing) from trouble with one secret (its permission removed: that
// name Forbidden, the others answered, the credential check passing). A
// Cycle holds names, counts and store errors, never values.
type Cycle struct {
	// At is when the cycle started.
	At time.Time
	// Events are the cycle's events (see Watcher): per-name events in name
	// order, then at most one Unavailable event. Often none.
	Events []Event
	// Watched is how many names the cycle covered; names unwatched while
	// it ran are left out. Watched = Answered + Forbidden + Unavailable.
	Watched int
	// Answered counts names the store answered normally this cycle:
	// present, or missing (edgesecrets.ErrNotFound).
	Answered int
	// AnsweredAlone counts the names of Answered that a request about that
	// name alone answered (Stat, Get), rather than a listing. A listing can
	// show a secret the caller may not read: a cycle whose names are
	// refused when asked about one by one and present only in a listing
	// learnt nothing about any secret (see StoreFailure).
	AnsweredAlone int
	// Forbidden counts names the store refused this cycle (edgesecrets.ErrPermission),
	// whether or not the refusal is new.
	Forbidden int
	// Unavailable counts names not checked this cycle: edgesecrets.ErrUnavailable or
	// another error, or left out after OutageAfter cut the cycle short.
	Unavailable int
	// CredentialsChecked reports that the store has a credential check
	// (secretstore.Store.CheckCredentials) and the cycle ran it, once,
	// after checking the names.
	CredentialsChecked bool
	// Credentials is that check's result: nil when the store accepts the
	// caller's credentials, else an error matching edgesecrets.ErrPermission (rejected)
	// or edgesecrets.ErrUnavailable (could not tell). Nil when CredentialsChecked is
	// false.
	Credentials error
}

// StoreFailure tells whether the cycle shows the store itself failing
// rather than particular secrets. It returns the credential check's error
// when the check failed; else, when names were watched and none was
// answered, an error matching edgesecrets.ErrUnavailable if any name could not be
// checked and edgesecrets.ErrPermission if every name was refused; else, when names
// were refused and every name answered was only listed (none answered
// when asked about alone), an error matching edgesecrets.ErrPermission; else nil.
//
// A nil result does not make every Forbidden or Deleted event a
// revocation (that takes confirmation over time), but a non-nil one means
// this cycle's refusals say nothing about any secret. With a single
// watched name and no credential check, a refused name and a refused
// caller look alike, and StoreFailure reports the latter.
func (c Cycle) StoreFailure() error {
	if c.CredentialsChecked && c.Credentials != nil {
		return c.Credentials
	}
	if c.Forbidden > 0 && c.AnsweredAlone == 0 && c.Answered > 0 {
		// Listed, but refused whenever asked about alone: the caller's
		// own access to every secret, not a refusal of particular ones.
		return &secretstore.Error{Op: opWatch, Kind: edgesecrets.ErrPermission, Err: fmt.Errorf("every watched secret asked about alone was refused (%d); %d only listed", c.Forbidden, c.Answered)}
	}
	if c.Watched == 0 || c.Answered > 0 {
		return nil
	}
	kind := edgesecrets.ErrPermission
	if c.Unavailable > 0 {
		kind = edgesecrets.ErrUnavailable
	}
	return &secretstore.Error{Op: opWatch, Kind: kind, Err: fmt.Errorf("no watched secret was answered: %d refused, %d not checked", c.Forbidden, c.Unavailable)}
}

// cycleLogValue is what a watcher logs of a cycle: the counts, the
// credential check's result and the number of events.
func cycleLogValue(c Cycle) slog.Value {
	attrs := []slog.Attr{
		slog.Int("watched", c.Watched), slog.Int("answered", c.Answered),
		slog.Int("forbidden", c.Forbidden), slog.Int("unavailable", c.Unavailable),
		slog.Int("events", len(c.Events)),
	}
	if c.CredentialsChecked {
		attrs = append(attrs, slog.String("credentials", credentialsString(c.Credentials)))
	}
	return slog.GroupValue(attrs...)
}

func credentialsString(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}

// Operation names of the errors the watcher makes itself (see
// secretstore.Error.Op): "open" for New's, "watch" for the others.
const (
	opOpen  = "open"
	opWatch = "watch"
)

// Options configure a Watcher. The zero value polls every minute.
type Options struct {
	// Interval is the time between polling cycles: zero means one minute;
	// otherwise at least one second (faster polling would only load the
	// store). A negative or shorter interval makes New fail with
	// edgesecrets.ErrInvalid.
	Interval time.Duration
	// Heartbeat, if set, is called with the tick time on the watcher's
	// goroutine before each cycle Run starts: a liveness signal. While a
	// cycle overruns the interval it fires less often.
	Heartbeat func(time.Time)
	// Concurrency is how many Stat calls a cycle keeps in flight when it
	// asks name by name. Zero means 4.
	Concurrency int
	// OutageAfter is how many edgesecrets.ErrUnavailable results in a row end a cycle
	// early: the store is down, and checking thousands more names would
	// only wait on thousands more timeouts. The unchecked names are
	// reported Unavailable. Zero means 8; negative never ends early.
	OutageAfter int
	// Logger receives cycle summaries (debug), names the store could not
	// be asked about (warn), and changes of the credential check's result:
	// an error when the store starts rejecting the caller's credentials,
	// info when it accepts them again. Nil discards.
	Logger *slog.Logger
}

// Watcher detects rotation: it polls a store for a changing set of secret
// names and reports what changed. Each cycle reads every watched name's
// metadata: in a few listing calls when the backend has them
// (secretstore.Store.StatBatch: AWS ListSecrets, a page per 100 secrets),
// then with one Stat for each name the listing left out and for three
// listed names in turn (a listing shows a secret whose permission was
// taken away as present, so such a refusal is reported within
// len(names)/3 cycles); otherwise with one Stat per name, a few at a time
// (Vault has no bulk metadata read). Only when a secret has no Version (a
// store without versions) does it read the secret and keep the SHA-256 of
// its data, never the data. It reports:
//
//   - Changed when the version (or checksum) differs from the last one seen,
//   - Deleted when the secret is missing (edgesecrets.ErrNotFound),
//   - Forbidden when access is denied (edgesecrets.ErrPermission),
//   - Appeared when it exists again after Deleted or Forbidden (followed by
//     Changed if its content differs from before), and on the first
//     observation of a name,
//   - Unavailable, once per cycle, for every name that could not be checked
//     (edgesecrets.ErrUnavailable or any other error). Such names keep their state: a
//     store outage is one Unavailable event with Outage set, never a flood
//     of Deleted.
//
// Per-name events report transitions and are not repeated while a state
// lasts; Unavailable is reported in every cycle that could not check some
// names.
//
// After the names, a cycle runs the store's credential check once when the
// store has one (secretstore.Store.CheckCredentials), and reports it with
// counts of how the names fared in a Cycle, so a caller never mistakes the
// store refusing the caller itself (every name Forbidden) for revoked
// secrets.
//
// A name's first observation only sets its baseline: a rotation between a
// caller's own read and that observation is not reported as Changed.
// Callers that know which content they used compare its
// secretstore.ContentTag with Observed (the delivery engine, package agreement/delivery, keeps the tags
// its agents acknowledged).
//
// Run delivers each cycle by calling a handler on the watcher's own
// goroutine, with no lock held: the handler may call Watch, Unwatch,
// Retry and Observed, and a slow handler only delays the next cycle.
// Cycles never overlap: a cycle (or handler) slower than the interval makes
// the next cycle start right after it, once, with no goroutines piling up.
type Watcher struct {
	store       *secretstore.Store
	interval    time.Duration
	heartbeat   func(time.Time)
	concurrency int
	outageAfter int
	log         *slog.Logger

	running  atomic.Bool
	cycleMu  sync.Mutex // one cycle at a time
	credErr  error      // the last cycle's credential check result; guarded by cycleMu
	spotNext int        // where the next cycle's spot checks start; guarded by cycleMu

	mu      sync.Mutex
	entries map[string]*watchEntry
	retry   map[string]struct{}
	snap    []*watchEntry // entries sorted by name; nil when entries changed
}

// watchEntry is the state of one watched name. Fields below removed are
// owned by the cycle in progress (cycleMu); apply writes seen, state and
// tag with Watcher.mu held too, so Observed may read them.
type watchEntry struct {
	name    string
	removed bool // set under Watcher.mu by Unwatch

	seen  bool
	state nameState
	tag   secretstore.ContentTag // the last present observation; zero before the first
	force bool                   // report Changed on the next present observation (Retry)

	res observation // this cycle's result
}

type nameState uint8

const (
	stateUnknown nameState = iota // not checked this cycle (outage cut-off)
	statePresent
	stateMissing
	stateForbidden
	stateUnavailable
)

type observation struct {
	state   nameState
	version string                 // the store's version; empty without versions
	tag     secretstore.ContentTag // the version's tag, or the data's checksum
	err     error
	listed  bool // answered by a listing, not by a request about the name
}

// versionTag is the tag of a revision the store gave version (not empty):
// what Secret.ContentTag returns for a secret of that version.
func versionTag(version string) secretstore.ContentTag {
	return (&secretstore.Secret{Version: version}).ContentTag()
}

// New returns a watcher of store with no names. It validates
// opts.Interval.
func New(store *secretstore.Store, opts Options) (*Watcher, error) {
	if store == nil {
		return nil, &secretstore.Error{Op: opOpen, Kind: edgesecrets.ErrInvalid, Err: errors.New("watcher: store is nil")}
	}
	switch {
	case opts.Interval < 0:
		return nil, &secretstore.Error{Op: opWatch, Kind: edgesecrets.ErrInvalid, Err: fmt.Errorf("watch interval %s must be positive", opts.Interval)}
	case opts.Interval > 0 && opts.Interval < minWatchInterval:
		return nil, &secretstore.Error{Op: opWatch, Kind: edgesecrets.ErrInvalid, Err: fmt.Errorf("watch interval %s is below the minimum of %s", opts.Interval, minWatchInterval)}
	case opts.Interval == 0:
		opts.Interval = defaultWatchInterval
	}
	w := &Watcher{
		store:       store,
		interval:    opts.Interval,
		heartbeat:   opts.Heartbeat,
		concurrency: opts.Concurrency,
		outageAfter: opts.OutageAfter,
		log:         opts.Logger,
		entries:     map[string]*watchEntry{},
		retry:       map[string]struct{}{},
	}
	if w.concurrency <= 0 {
		w.concurrency = 4
	}
	if w.outageAfter == 0 {
		w.outageAfter = 8
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w, nil
}

// Watch adds names to the watched set; names already watched are kept as
// they are. If any name fails secretstore.ValidateName nothing is added and the error
// (kind edgesecrets.ErrInvalid) names it. A new name's first observation is reported at
// the next cycle.
func (w *Watcher) Watch(names ...string) error {
	for _, n := range names {
		if err := secretstore.ValidateName(n); err != nil {
			return &secretstore.Error{Op: opWatch, Name: n, Kind: edgesecrets.ErrInvalid, Err: err}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		if _, ok := w.entries[n]; !ok {
			w.entries[n] = &watchEntry{name: n}
			w.snap = nil
		}
	}
	return nil
}

// Unwatch removes names from the watched set and forgets their state. A
// cycle in progress reports nothing for them.
func (w *Watcher) Unwatch(names ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		if e, ok := w.entries[n]; ok {
			e.removed = true
			delete(w.entries, n)
			delete(w.retry, n)
			w.snap = nil
		}
	}
}

// Names returns the watched names, sorted.
func (w *Watcher) Names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.entries))
}

// Observed returns the content tag of name's last observation, if name is
// watched and that observation found it present: the version, or for a
// store without versions a checksum that prints redacted. It is what an
// agbot compares with the content an agreement's agent acknowledged, and
// is kept out of Events on purpose. A handler called by Run sees the tags
// of the cycle it handles.
func (w *Watcher) Observed(name string) (secretstore.ContentTag, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.entries[name]
	if !ok || !e.seen || e.state != statePresent {
		return secretstore.ContentTag{}, false
	}
	return e.tag, true
}

// Retry makes the next cycle report each watched name of names as Changed
// if it exists, even when its version is the same: for a handler that
// could not act on a Changed event (the read of the new value failed).
func (w *Watcher) Retry(names ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		if _, ok := w.entries[n]; ok {
			w.retry[n] = struct{}{}
		}
	}
}

// Run polls until ctx is done: one cycle at once, then one per tick,
// calling handle with every cycle, events or not. It returns ctx.Err()
// once ctx is done and the cycle in progress has stopped; a cycle cut
// short by ctx is not handed to handle. Only one Run may be active at a
// time.
func (w *Watcher) Run(ctx context.Context, handle func(context.Context, Cycle)) error {
	if handle == nil {
		return errors.New("secretstore: watcher: Run needs a cycle handler")
	}
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("secretstore: watcher: Run is already active")
	}
	defer w.running.Store(false)

	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	tick := time.Now()
	for {
		if w.heartbeat != nil {
			w.heartbeat(tick)
		}
		if c := w.Poll(ctx); ctx.Err() == nil {
			handle(ctx, c)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case tick = <-ticker.C:
		}
	}
}

// Poll runs one cycle now and returns it: per-name events in name order,
// then at most one Unavailable event, the counts, and the credential
// check's result. It waits for a cycle in progress to finish first. If
// ctx ends during the cycle, its results are discarded and Poll returns
// the zero Cycle.
func (w *Watcher) Poll(ctx context.Context) Cycle {
	w.cycleMu.Lock()
	defer w.cycleMu.Unlock()
	start := time.Now()

	w.mu.Lock()
	if w.snap == nil {
		w.snap = make([]*watchEntry, 0, len(w.entries))
		for _, e := range w.entries {
			w.snap = append(w.snap, e)
		}
		slices.SortFunc(w.snap, func(a, b *watchEntry) int { return strings.Compare(a.name, b.name) })
	}
	snap := w.snap
	for n := range w.retry {
		w.entries[n].force = true
	}
	clear(w.retry)
	w.mu.Unlock()

	w.check(ctx, snap)
	cred := w.store.CheckCredentials(ctx)
	if ctx.Err() != nil {
		return Cycle{}
	}

	w.mu.Lock()
	c, unavailable, firstErr := w.apply(snap)
	w.mu.Unlock()
	c.At = start
	if !errors.Is(cred, errors.ErrUnsupported) {
		c.CredentialsChecked, c.Credentials = true, cred
		w.noteCredentials(cred)
	}

	if len(unavailable) > 0 {
		outage := len(unavailable) == c.Watched
		c.Events = append(c.Events, Event{Kind: Unavailable, Names: unavailable, Outage: outage, Err: firstErr})
		w.log.Warn("secret store unavailable for watched secrets",
			slog.Int("names", len(unavailable)), slog.Int("watched", c.Watched),
			slog.Bool("outage", outage), slog.String("err", errString(firstErr)))
	}
	w.log.Debug("watch cycle", slog.Any("cycle", cycleLogValue(c)), slog.Duration("took", time.Since(start)))
	return c
}

// noteCredentials logs a change of the credential check's result: an
// error once when the store starts rejecting the caller, a warning once
// when the check cannot tell, info once when the store accepts the caller
// again. cycleMu is held.
func (w *Watcher) noteCredentials(err error) {
	prev := w.credErr
	w.credErr = err
	switch {
	case err == nil && prev != nil:
		w.log.Info("secret store accepts the credentials again")
	case err != nil && (prev == nil || edgesecrets.KindOf(prev) != edgesecrets.KindOf(err)): //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
		if errors.Is(err, edgesecrets.ErrPermission) {
			w.log.Error("secret store rejects the credentials: every secret reads as refused until they are renewed or replaced",
				slog.String("err", err.Error()))
		} else {
			w.log.Warn("secret store cannot check the credentials", slog.String("err", errString(err)))
		}
	}
}

// check observes every entry of snap, storing each result in entry.res:
// present names with a version from one listing when the store has one,
// the others one by one.
func (w *Watcher) check(ctx context.Context, snap []*watchEntry) {
	for _, e := range snap {
		e.res = observation{}
	}
	if len(snap) == 0 {
		return
	}
	names := make([]string, len(snap))
	for i, e := range snap {
		names[i] = e.name
	}
	listed, err := w.store.StatBatch(ctx, names)
	// A store without a batch metadata read says so with
	// errors.ErrUnsupported: every name is asked about alone.
	ok := !errors.Is(err, errors.ErrUnsupported)
	if ok && err != nil {
		// Ask name by name: the answers say which names are refused, and
		// an outage ends the cycle after OutageAfter of them.
		w.log.Debug("listing the watched secrets failed; checking them one by one", slog.String("err", err.Error()))
	}
	rest := snap
	if ok && err == nil {
		// A few listed names in turn are asked about one by one too: a
		// listing shows a secret whose permission was taken away (a
		// resource policy denying it) as present.
		spot := min(spotChecks, len(snap))
		first := w.spotNext % len(snap)
		w.spotNext = first + spot
		rest = make([]*watchEntry, 0, len(snap)-len(listed)+spot)
		for i, e := range snap {
			md, found := listed[e.name]
			spotted := (i-first+len(snap))%len(snap) < spot
			if found && md.Version != "" && !spotted {
				e.res = observation{state: statePresent, version: md.Version, tag: versionTag(md.Version), listed: true}
			} else {
				rest = append(rest, e)
			}
		}
	}
	w.checkEach(ctx, rest)
}

// spotChecks is how many listed names a cycle asks about one by one, in
// turn, so that a permission taken from one secret is seen within
// len(names)/spotChecks cycles also where a listing shows it present.
const spotChecks = 3

// checkEach observes every entry of snap with its own calls, a few at a
// time, and stops after OutageAfter unavailable results in a row.
func (w *Watcher) checkEach(ctx context.Context, snap []*watchEntry) {
	var (
		next       atomic.Int64 // index of the next entry to check
		failsInRow atomic.Int64
		stopped    atomic.Bool
	)
	work := func() {
		for !stopped.Load() && ctx.Err() == nil {
			i := int(next.Add(1) - 1)
			if i >= len(snap) {
				return
			}
			e := snap[i]
			e.res = w.observe(ctx, e.name)
			if e.res.state == stateUnavailable {
				if n := failsInRow.Add(1); w.outageAfter > 0 && n >= int64(w.outageAfter) {
					stopped.Store(true)
				}
			} else {
				failsInRow.Store(0)
			}
		}
	}
	workers := min(w.concurrency, len(snap))
	if workers <= 1 {
		work()
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(work)
	}
	wg.Wait()
}

// observe checks one name: Stat, and Get + checksum only when the store
// has no versions.
func (w *Watcher) observe(ctx context.Context, name string) observation {
	md, err := w.store.Stat(ctx, name)
	if err == nil && md.Version != "" {
		return observation{state: statePresent, version: md.Version, tag: versionTag(md.Version)}
	}
	if err == nil {
		var s *secretstore.Secret
		s, err = w.store.Get(ctx, name)
		if err == nil {
			// Stat showed no version: the tag is the SHA-256 of the data,
			// whatever the read says.
			s.Version = ""
			return observation{state: statePresent, tag: s.ContentTag()}
		}
	}
	switch {
	case errors.Is(err, edgesecrets.ErrNotFound):
		return observation{state: stateMissing}
	case errors.Is(err, edgesecrets.ErrPermission):
		return observation{state: stateForbidden, err: err}
	}
	return observation{state: stateUnavailable, err: err}
}

// apply turns this cycle's observations into a Cycle (events and counts)
// and new state, and lists the names not checked. w.mu is held, so
// Unwatch cannot race with reading removed.
func (w *Watcher) apply(snap []*watchEntry) (c Cycle, unavailable []string, firstErr error) {
	for _, e := range snap {
		if e.removed {
			continue
		}
		c.Watched++
		r := e.res
		switch r.state {
		case stateUnavailable, stateUnknown:
			c.Unavailable++
			unavailable = append(unavailable, e.name)
			if firstErr == nil && r.err != nil {
				firstErr = r.err
			}
			continue
		case statePresent:
			c.Answered++
			if !r.listed {
				c.AnsweredAlone++
			}
			tag := r.tag
			differs := e.tag != (secretstore.ContentTag{}) && tag != e.tag
			switch {
			case !e.seen:
				c.Events = append(c.Events, Event{Kind: Appeared, Name: e.name, Version: r.version, Initial: true})
			case e.state != statePresent:
				c.Events = append(c.Events, Event{Kind: Appeared, Name: e.name, Version: r.version})
				if differs || e.force {
					c.Events = append(c.Events, Event{Kind: Changed, Name: e.name, Version: r.version})
				}
			case differs || e.force:
				c.Events = append(c.Events, Event{Kind: Changed, Name: e.name, Version: r.version})
			}
			e.tag = tag
		case stateMissing:
			c.Answered++
			c.AnsweredAlone++
			if !e.seen || e.state != stateMissing {
				c.Events = append(c.Events, Event{Kind: Deleted, Name: e.name, Initial: !e.seen})
			}
		case stateForbidden:
			c.Forbidden++
			if !e.seen || e.state != stateForbidden {
				c.Events = append(c.Events, Event{Kind: Forbidden, Name: e.name, Initial: !e.seen, Err: r.err})
			}
		}
		e.seen, e.state, e.force = true, r.state, false
		e.res = observation{}
	}
	return c, unavailable, firstErr
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
