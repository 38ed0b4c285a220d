package testkit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/testgate"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// Rule breaks a Driver can be told to commit. The first group breaks
// rules secretstore.Store enforces for every driver: through the portable
// type, the conformance suite still passes. The second breaks rules only
// a driver can keep: each makes the conformance case named after it fail.
const (
	// BreakSloppyList: List returns names unsorted, twice, outside the
	// prefix, outside any scope and invalid.
	BreakSloppyList = "sloppy-list"
	// BreakNotFoundOnDelete: deleting a missing secret fails with ErrNotFound.
	BreakNotFoundOnDelete = "notfound-on-delete"
	// BreakIgnoreConditions: Put ignores IfVersion and CreateOnly, so
	// racing compare-and-set writes all win.
	BreakIgnoreConditions = "ignore-conditions"

	BreakMissingIsEmpty    = "missing-is-empty"    // GetMissing: a missing secret reads as empty
	BreakDropLabels        = "drop-labels"         // PutGetRoundTrip: labels are not kept
	BreakLoseBinary        = "lose-binary"         // BinaryValues: invalid UTF-8 is replaced
	BreakMergeData         = "merge-data"          // FullReplace: Put merges into the old data
	BreakKeepOldLabels     = "keep-old-labels"     // Labels: a label change is ignored
	BreakSameVersion       = "same-version"        // CompareAndSet: an update keeps the version
	BreakStaleStat         = "stale-stat"          // StatVersionChangesOnUpdate: Stat shows the first version
	BreakKeepDeleted       = "keep-deleted"        // DeleteIdempotent: Delete does nothing
	BreakFirstPageOnly     = "first-page-only"     // ListPrefixAndPaging: List stops after 10 names
	BreakPartialUpdate     = "partial-update"      // ConcurrentWriters: an update keeps its first key's old value
	BreakLowercaseNames    = "lowercase-names"     // OddNamesRejectedOrRoundTripped: names are folded to lower case
	BreakBatchDropsLabels  = "batch-drops-labels"  // GetBatch: batch reads lose labels
	BreakBatchStaleVersion = "batch-stale-version" // WatcherSeesChanges: the metadata listing shows the first version
)

// CaseBroken maps each break of a driver-only rule to the conformance case
// it makes fail. BreakIgnoreConditions breaks ConcurrentCompareAndSet.
var CaseBroken = map[string]string{
	BreakIgnoreConditions:  "ConcurrentCompareAndSet",
	BreakMissingIsEmpty:    "GetMissing",
	BreakDropLabels:        "PutGetRoundTrip",
	BreakLoseBinary:        "BinaryValues",
	BreakMergeData:         "FullReplace",
	BreakKeepOldLabels:     "Labels",
	BreakSameVersion:       "CompareAndSet",
	BreakStaleStat:         "StatVersionChangesOnUpdate",
	BreakKeepDeleted:       "DeleteIdempotent",
	BreakFirstPageOnly:     "ListPrefixAndPaging",
	BreakPartialUpdate:     "ConcurrentWriters",
	BreakLowercaseNames:    "OddNamesRejectedOrRoundTripped",
	BreakBatchDropsLabels:  "GetBatch",
	BreakBatchStaleVersion: "WatcherSeesChanges",
}

// Driver is a map-backed driver.Store for tests: it counts calls per
// operation and name, injects per-name errors, can hold calls at a gate,
// hide versions, and commit rule breaks (the Break constants).
//
// It is lenient where secretstore.Store is strict, as a careless driver
// would be: it validates nothing, serves after Close, ignores contexts
// (but for Gate), and keeps and returns the maps it is given. Its writes
// are atomic under one lock unless broken.
type Driver struct {
	breaks map[string]bool

	mu       sync.Mutex
	secrets  map[string]*driver.Secret
	first    map[string]string // the first version of each name, for the stale breaks
	version  int
	faults   map[string]fault // per name, for calls naming it
	noVer    bool
	credErr  error
	calls    map[string]int // "op name"
	tokens   []string       // of every Put, in order
	hook     func(op string) error
	inflight int
	maxIn    int

	writes  atomic.Int64
	batches atomic.Int64

	// Gate, when held, holds every Stat and StatBatch until released or
	// the call's context ends.
	Gate testgate.Gate
}

// NewStore wraps d (a new Driver when nil) in a Store that does not
// retry.
func NewStore(t testing.TB, d driver.Store) *secretstore.Store {
	t.Helper()
	if d == nil {
		d = NewDriver()
	}
	s, err := secretstore.New(d, secretstore.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Put writes {"v": value} to name in s.
func Put(t testing.TB, s *secretstore.Store, name, value string) {
	t.Helper()
	if _, err := s.Put(context.Background(), &secretstore.Secret{Name: name, Data: edgesecrets.Data{"v": []byte(value)}}, secretstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// NewDriver returns an empty Driver committing breaks.
func NewDriver(breaks ...string) *Driver {
	d := &Driver{breaks: map[string]bool{}, secrets: map[string]*driver.Secret{}, first: map[string]string{},
		faults: map[string]fault{}, calls: map[string]int{}}
	for _, b := range breaks {
		d.breaks[b] = true
	}
	return d
}

// Writes returns how many writes (creates, updates, deletes) the driver
// has performed.
func (d *Driver) Writes() int64 { return d.writes.Load() }

// Batches returns how many GetBatch and StatBatch calls it has served.
func (d *Driver) Batches() int64 { return d.batches.Load() }

// Calls returns how many calls of op (a secretstore Op name; "statbatch",
// "getbatch") named name it has served; name "" counts every name.
func (d *Driver) Calls(op, name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if name != "" {
		return d.calls[op+" "+name]
	}
	n := 0
	for k, c := range d.calls {
		if strings.HasPrefix(k, op+" ") {
			n += c
		}
	}
	return n
}

// CallsByName returns how many calls of op it has served per name.
func (d *Driver) CallsByName(op string) map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, c := range d.calls {
		if name, ok := strings.CutPrefix(k, op+" "); ok {
			out[name] += c
		}
	}
	return out
}

// Tokens returns the Write.Token of every Put call, in order.
func (d *Driver) Tokens() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.tokens)
}

// MaxInflight returns the most Stat calls it has seen at once.
func (d *Driver) MaxInflight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.maxIn
}

// fault is an injected failure: n more calls (0: every call).
type fault struct {
	kind error
	n    int
}

// Fail makes every call naming one of names fail with an error of kind
// (a driver kind); a nil kind clears the fault.
func (d *Driver) Fail(kind error, names ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range names {
		if kind == nil {
			delete(d.faults, n)
		} else {
			d.faults[n] = fault{kind: kind}
		}
	}
}

// FailTimes makes the next n calls naming name fail with an error of kind.
func (d *Driver) FailTimes(n int, kind error, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults[name] = fault{kind: kind, n: n}
}

// HideVersions makes Get, Stat and the batches report no version, as a
// store without versions does.
func (d *Driver) HideVersions(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.noVer = on
}

// SetCredentials sets what CheckCredentials returns.
func (d *Driver) SetCredentials(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.credErr = err
}

// begin counts a call and returns its injected fault.
func (d *Driver) begin(op, name string) error {
	d.mu.Lock()
	d.calls[op+" "+name]++
	hook := d.hook
	f, failing := d.faults[name]
	switch {
	case f.n == 1:
		delete(d.faults, name)
	case f.n > 1:
		f.n--
		d.faults[name] = f
	}
	d.mu.Unlock()
	if hook != nil {
		if err := hook(op); err != nil {
			return err
		}
	}
	if failing {
		return &secretstore.Error{Kind: f.kind, Err: errors.New("injected")}
	}
	return nil
}

// SetHook makes every call run h first, with its operation's name; an
// error from h fails the call. h may call SetHook.
func (d *Driver) SetHook(h func(op string) error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hook = h
}

// view returns what a read shows of sec.
func (d *Driver) view(name string, sec *driver.Secret, stale bool) *driver.Secret {
	out := *sec
	if stale {
		out.Version = d.first[name]
	}
	if d.noVer {
		out.Version = ""
	}
	return &out
}

func (d *Driver) read(op, name string, stale bool) (*driver.Secret, error) {
	if err := d.begin(op, name); err != nil {
		return nil, err
	}
	return d.lookup(name, stale)
}

// lookup finds name's secret, for a read already counted.
func (d *Driver) lookup(name string, stale bool) (*driver.Secret, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sec, ok := d.secrets[d.key(name)]
	switch {
	case !ok && d.breaks[BreakMissingIsEmpty]:
		return &driver.Secret{Data: map[string][]byte{}}, nil
	case !ok:
		return nil, &secretstore.Error{Kind: edgesecrets.ErrNotFound}
	}
	return d.view(d.key(name), sec, stale), nil
}

func (d *Driver) key(name string) string {
	if d.breaks[BreakLowercaseNames] {
		return strings.ToLower(name)
	}
	return name
}

// Get implements driver.Store.
func (d *Driver) Get(_ context.Context, name string) (*driver.Secret, error) {
	return d.read("get", name, false)
}

// Stat implements driver.Store.
func (d *Driver) Stat(ctx context.Context, name string) (*driver.Secret, error) {
	d.mu.Lock()
	d.inflight++
	d.maxIn = max(d.maxIn, d.inflight)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inflight--
		d.mu.Unlock()
	}()
	fault := d.begin("stat", name)
	if err := d.Gate.Wait(ctx); err != nil {
		return nil, err
	}
	if fault != nil {
		return nil, fault
	}
	return d.lookup(name, d.breaks[BreakStaleStat])
}

// Put implements driver.Store.
func (d *Driver) Put(_ context.Context, w *driver.Write) error {
	d.mu.Lock()
	d.tokens = append(d.tokens, w.Token)
	d.mu.Unlock()
	if err := d.begin("put", w.Name); err != nil {
		return err
	}
	key := d.key(w.Name)
	if d.breaks[BreakIgnoreConditions] {
		// A slow write: racing writers have all read the old version
		// before the first one lands.
		time.Sleep(20 * time.Millisecond)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, exists := d.secrets[key]
	if !d.breaks[BreakIgnoreConditions] {
		switch {
		case w.CreateOnly && exists:
			return &secretstore.Error{Kind: edgesecrets.ErrConflict, Err: errors.New("exists")}
		case w.IfVersion != "" && (!exists || cur.Version != w.IfVersion):
			return &secretstore.Error{Kind: edgesecrets.ErrConflict, Err: errors.New("version moved")}
		}
	}
	next := &driver.Secret{Data: w.Data, Labels: w.Labels, UpdatedAt: time.Now()}
	if d.breaks[BreakLoseBinary] {
		next.Data = map[string][]byte{}
		for k, v := range w.Data {
			next.Data[k] = []byte(strings.ToValidUTF8(string(v), "?"))
		}
	}
	if exists && d.breaks[BreakPartialUpdate] && len(next.Data) > 0 {
		first := slices.Sorted(maps.Keys(next.Data))[0]
		next.Data = maps.Clone(next.Data)
		next.Data[first] = cur.Data[first]
	}
	if exists && d.breaks[BreakMergeData] {
		merged := maps.Clone(cur.Data)
		maps.Copy(merged, next.Data)
		next.Data = merged
	}
	if d.breaks[BreakDropLabels] {
		next.Labels = nil
	}
	if exists && len(cur.Labels) > 0 && d.breaks[BreakKeepOldLabels] {
		next.Labels = cur.Labels
	}
	d.version++
	next.Version = strconv.Itoa(d.version)
	if exists && d.breaks[BreakSameVersion] {
		next.Version = cur.Version
	}
	if _, ok := d.first[key]; !ok {
		d.first[key] = next.Version
	}
	d.secrets[key] = next
	d.writes.Add(1)
	return nil
}

// Delete implements driver.Store.
func (d *Driver) Delete(_ context.Context, name string) error {
	if err := d.begin("delete", name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	key := d.key(name)
	if _, ok := d.secrets[key]; !ok {
		if d.breaks[BreakNotFoundOnDelete] {
			return &secretstore.Error{Kind: edgesecrets.ErrNotFound}
		}
		return nil
	}
	if d.breaks[BreakKeepDeleted] {
		return nil
	}
	delete(d.secrets, key)
	delete(d.first, key)
	d.writes.Add(1)
	return nil
}

// List implements driver.Store.
func (d *Driver) List(_ context.Context, prefix string) ([]string, error) {
	if err := d.begin("list", prefix); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var names []string
	for name := range d.secrets {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if d.breaks[BreakFirstPageOnly] && len(names) > 10 {
		names = names[:10]
	}
	if d.breaks[BreakSloppyList] {
		slices.Reverse(names)
		names = append(names, names...)
		names = append(names, "elsewhere/x", prefix+"/../escape", prefix+"a//b", "zzz-not-under-the-prefix")
	}
	return names, nil
}

// CheckCredentials implements driver.CredentialChecker.
func (d *Driver) CheckCredentials(context.Context) error {
	if err := d.begin("check-credentials", ""); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.credErr
}

// Close implements driver.Store; the driver goes on serving.
func (d *Driver) Close() error { return nil }

// Batching returns d with the optional batch capabilities,
// driver.BatchGetter and driver.BatchStater.
func Batching(d *Driver) driver.Store { return batching{d} }

type batching struct{ *Driver }

// GetBatch implements driver.BatchGetter.
func (b batching) GetBatch(ctx context.Context, names []string) (map[string]*driver.Secret, error) {
	b.batches.Add(1)
	out := map[string]*driver.Secret{}
	for _, n := range names {
		if err := b.begin("getbatch", n); err != nil {
			return nil, err
		}
		b.mu.Lock()
		sec, ok := b.secrets[b.key(n)]
		if ok {
			v := b.view(b.key(n), sec, false)
			if b.breaks[BreakBatchDropsLabels] {
				v.Labels = nil
			}
			out[n] = v
		}
		b.mu.Unlock()
	}
	return out, nil
}

// StatBatch implements driver.BatchStater: the metadata of the names that
// exist and have no fault set.
func (b batching) StatBatch(ctx context.Context, names []string) (map[string]*driver.Secret, error) {
	b.batches.Add(1)
	if err := b.begin("statbatch", ""); err != nil {
		return nil, err
	}
	if err := b.Gate.Wait(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]*driver.Secret{}
	for _, n := range names {
		if _, failing := b.faults[n]; failing {
			continue
		}
		if sec, ok := b.secrets[b.key(n)]; ok {
			out[n] = b.view(b.key(n), sec, b.breaks[BreakBatchStaleVersion])
		}
	}
	return out, nil
}

// String names the breaks, for test logs.
func (d *Driver) String() string {
	return fmt.Sprintf("testkit.Driver%v", slices.Sorted(maps.Keys(d.breaks)))
}
