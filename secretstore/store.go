package secretstore

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/metric"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// Store is the portable secret store: a backend's driver (memory, vault,
// awssm or out-of-tree) behind the rules every store shares, which Store
// enforces itself. Backends return one from their constructors; Open
// returns one from a config.
//
// Names are slash-separated paths relative to the store's scope; every
// method rejects a name that fails ValidateName with edgesecrets.ErrInvalid. Errors
// are *Error values naming the operation and the secret, of one kind each
// (see edgesecrets.ErrNotFound and the others), never holding a value. A call that
// fails with edgesecrets.ErrUnavailable is tried again, up to Options.MaxAttempts in
// all, with a growing pause between attempts; a pause that would end
// after the context's deadline is not started, so a caller bounds the
// whole call, retries included, with a deadline and gets the store's
// edgesecrets.ErrUnavailable rather than a context error when attempts failed before
// it. Values and labels are copied in and out: the caller may change what
// it passed or got.
//
// Store also counts its calls and notes when the backend last answered
// (LastSuccess, Stats), for the agbot's /health.
//
// All methods are safe for concurrent use.
type Store struct {
	drv         driver.Store
	scope       string // "" or a valid name, no surrounding slashes
	maxAttempts int
	maxBackoff  time.Duration

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	lastOK atomic.Int64 // unix nanoseconds; 0 = never
	mu     sync.Mutex
	stats  map[string]OpStats
	ins    *instruments
}

// Options configure a Store.
type Options struct {
	// Scope is the path prefix every name is relative to: name n is the
	// driver's "<Scope>/<n>". Empty means none; surrounding slashes are
	// trimmed; otherwise it must be a valid name.
	Scope string
	// MaxAttempts is how often a call that fails with edgesecrets.ErrUnavailable is
	// tried in all: 1 turns retrying off; zero means 3.
	MaxAttempts int
	// MaxBackoff caps the pause between attempts, which starts at 100ms
	// and doubles, with jitter. Zero means 2s.
	MaxBackoff time.Duration
	// Backend names the backend in the metrics' "backend" attribute;
	// empty means "unknown".
	Backend string
	// MeterProvider makes the store's instruments; nil means the global
	// one, otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

// Retry defaults.
const (
	defaultMaxAttempts = 3
	defaultMaxBackoff  = 2 * time.Second
	firstBackoff       = 100 * time.Millisecond
	// maxMaxAttempts bounds MaxAttempts so a typo cannot make a call
	// retry for hours.
	maxMaxAttempts = 20
)

// New returns the portable Store over a backend's driver. Backend
// packages call it from their constructors; programs call those, or Open.
func New(d driver.Store, opts Options) (*Store, error) {
	invalid := func(problem string) (*Store, error) {
		return nil, &Error{Op: opOpen, Kind: edgesecrets.ErrInvalid, Err: errors.New(problem)}
	}
	if d == nil {
		return invalid("the driver is nil")
	}
	scope, err := cleanScope(opts.Scope)
	if err != nil {
		return invalid(err.Error())
	}
	switch {
	case opts.MaxAttempts < 0 || opts.MaxAttempts > maxMaxAttempts:
		return invalid(fmt.Sprintf("MaxAttempts %d is outside 0..%d", opts.MaxAttempts, maxMaxAttempts))
	case opts.MaxBackoff < 0:
		return invalid("MaxBackoff is negative")
	}
	s := &Store{drv: d, scope: scope, maxAttempts: opts.MaxAttempts, maxBackoff: opts.MaxBackoff, stats: map[string]OpStats{}}
	if s.maxAttempts == 0 {
		s.maxAttempts = defaultMaxAttempts
	}
	if s.maxBackoff == 0 {
		s.maxBackoff = defaultMaxBackoff
	}
	if s.ins, err = newInstruments(opts.MeterProvider, opts.Backend); err != nil {
		return invalid(err.Error())
	}
	return s, nil
}

// PutOptions modify a Put. The zero value is an unconditional full replace.
type PutOptions struct {
	// IfVersion makes the write conditional: it succeeds only if the
	// secret's current version equals IfVersion, else fails with edgesecrets.ErrConflict.
	// Stores without versions reject it with edgesecrets.ErrInvalid.
	IfVersion string
	// CreateOnly makes the write fail with edgesecrets.ErrConflict if the secret exists.
	CreateOnly bool
}

// OpStats counts the calls of one operation.
type OpStats struct {
	Calls  int64
	Errors int64
}

// path returns the driver's name for name.
func (s *Store) path(name string) string {
	if s.scope == "" {
		return name
	}
	return s.scope + "/" + name
}

// rel returns the name of a driver name, and false when it lies outside
// the scope.
func (s *Store) rel(path string) (string, bool) {
	if s.scope == "" {
		return path, path != ""
	}
	rest, ok := strings.CutPrefix(path, s.scope+"/")
	return rest, ok && rest != ""
}

// live checks that the store is open and ctx not done.
func (s *Store) live(ctx context.Context, op, name string) error {
	if err := ctx.Err(); err != nil {
		return &Error{Op: op, Name: name, Err: err}
	}
	if s.closed.Load() {
		return &Error{Op: op, Name: name, Kind: edgesecrets.ErrUnavailable, Err: errors.New("store is closed")}
	}
	return nil
}

// retry runs attempt until it succeeds, fails with an error of another
// kind than edgesecrets.ErrUnavailable, or the attempts or ctx's deadline run out, and
// returns its error wrapped for op on name.
func (s *Store) retry(ctx context.Context, op, name string, attempt func(context.Context) error) error {
	var last error
	for n := 1; ; n++ {
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		err = wrapError(ctx, op, name, err)
		if !errors.Is(err, edgesecrets.ErrUnavailable) {
			if last != nil && edgesecrets.KindOf(err) == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// The deadline ended an attempt after others had failed:
				// the store was unavailable until the caller's bound.
				return last
			}
			return err
		}
		last = tried(err, n)
		if n >= s.maxAttempts {
			return last
		}
		wait := s.backoff(n)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return last
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return &Error{Op: op, Name: name, Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// tried notes in err, an *Error, that it ended the n-th attempt.
func tried(err error, n int) error {
	var e *Error
	if n < 2 || !errors.As(err, &e) {
		return err
	}
	if e.Err == nil {
		return &Error{Op: e.Op, Name: e.Name, Kind: e.Kind, Err: fmt.Errorf("attempt %d", n)}
	}
	return &Error{Op: e.Op, Name: e.Name, Kind: e.Kind, Err: fmt.Errorf("%w (attempt %d)", e.Err, n)}
}

// backoff is the pause after the n-th failed attempt: 100ms doubling, at
// most maxBackoff, with the upper half jittered.
func (s *Store) backoff(n int) time.Duration {
	d := firstBackoff << min(n-1, 20)
	d = min(d, s.maxBackoff)
	return d/2 + rand.N(d/2+1)
}

// record counts one call of op and notes an answer from the backend: no
// error, or edgesecrets.ErrNotFound, edgesecrets.ErrConflict or edgesecrets.ErrPermission. edgesecrets.ErrUnavailable,
// edgesecrets.ErrInvalid (mostly refused before reaching the backend) and context
// errors are not answers.
func (s *Store) record(op string, err error) {
	s.mu.Lock()
	st := s.stats[op]
	st.Calls++
	if err != nil {
		st.Errors++
	}
	s.stats[op] = st
	s.mu.Unlock()
	switch edgesecrets.KindOf(err) {
	case nil:
		if err != nil {
			return
		}
	case edgesecrets.ErrNotFound, edgesecrets.ErrConflict, edgesecrets.ErrPermission: //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
	default:
		return
	}
	s.lastOK.Store(time.Now().UnixNano())
}

// LastSuccess returns the time of the last call the backend answered (no
// error, or edgesecrets.ErrNotFound, edgesecrets.ErrConflict or edgesecrets.ErrPermission), or the zero time
// if there was none: the agbot's /health "lastVaultInteraction".
func (s *Store) LastSuccess() time.Time {
	ns := s.lastOK.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Stats returns the number of calls and of failed calls per operation,
// keyed by operation name (see Error.Op): a copy. A GetBatch counts as
// one "get", a watch cycle's metadata listing as one "stat".
func (s *Store) Stats() map[string]OpStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.stats)
}

// toSecret copies what a driver returned into a Secret named name.
func toSecret(name string, d *driver.Secret) *Secret {
	data := edgesecrets.Data(d.Data).Clone()
	if data == nil {
		data = edgesecrets.Data{}
	}
	return &Secret{Name: name, Data: data, Labels: maps.Clone(d.Labels), Version: d.Version, UpdatedAt: d.UpdatedAt}
}

// toMetadata copies what a driver's Stat returned into Metadata for name.
func toMetadata(name string, d *driver.Secret) Metadata {
	return Metadata{Name: name, Version: d.Version, UpdatedAt: d.UpdatedAt, Labels: maps.Clone(d.Labels)}
}

// errNoAnswer is the cause when a driver returns neither a secret nor an error.
var errNoAnswer = errors.New("the driver returned nothing")

// Get returns the current version of the named secret, or an error
// matching edgesecrets.ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (*Secret, error) {
	got, err := s.read(ctx, opGet, name, s.drv.Get)
	if err != nil {
		return nil, err
	}
	return toSecret(name, got), nil
}

// Stat returns the secret's metadata without reading its values when the
// backend allows (Vault KV v2 metadata, AWS DescribeSecret).
func (s *Store) Stat(ctx context.Context, name string) (Metadata, error) {
	got, err := s.read(ctx, opStat, name, s.drv.Stat)
	if err != nil {
		return Metadata{}, err
	}
	return toMetadata(name, got), nil
}

// read makes one read of the driver's (Get or Stat) for op on name, with
// the checks, retries and count every call has.
func (s *Store) read(ctx context.Context, op, name string, read func(context.Context, string) (*driver.Secret, error)) (got *driver.Secret, err error) {
	start := time.Now()
	defer func() { s.record(op, err); s.ins.observe(op, start, err) }()
	if err := s.start(ctx, op, name); err != nil {
		return nil, err
	}
	err = s.retry(ctx, op, name, func(ctx context.Context) (err error) {
		got, err = read(ctx, s.path(name))
		if err == nil && got == nil {
			err = &Error{Kind: edgesecrets.ErrUnavailable, Err: errNoAnswer}
		}
		return err
	})
	return got, err
}

// start validates name and checks that the store is open.
func (s *Store) start(ctx context.Context, op, name string) error {
	if err := checkName(op, name); err != nil {
		return err
	}
	return s.live(ctx, op, name)
}

// Put replaces the secret's data and labels (creating it if needed) and
// reports whether anything changed. It reads the secret first; a write
// that would change nothing returns false without calling the backend's
// write API, and a compare-and-set or create-only write that the read
// shows to lose fails with edgesecrets.ErrConflict without writing. Secret.Version and
// Secret.UpdatedAt are ignored; use PutOptions.IfVersion for
// compare-and-set.
//
// A Put whose write failed with edgesecrets.ErrUnavailable is tried again: an
// unconditional one from the read, so a write that landed though its
// answer was lost is not written twice (and still reports a change); a
// compare-and-set or create-only one by sending the same write again,
// which a store with idempotency keys (AWS) recognises.
func (s *Store) Put(ctx context.Context, in *Secret, opts PutOptions) (changed bool, err error) {
	start := time.Now()
	defer func() { s.record(opPut, err); s.ins.observe(opPut, start, err) }()
	if err := checkSecret(in); err != nil {
		return false, err
	}
	name := in.Name
	if limit, size := s.MaxValueBytes(), dataSize(in.Data); limit > 0 && size > limit {
		return false, &Error{Op: opPut, Name: name, Kind: edgesecrets.ErrInvalid,
			Err: fmt.Errorf("the secret's data is %d bytes, over the store's limit of %d bytes per secret", size, limit)}
	}
	if err := s.live(ctx, opPut, name); err != nil {
		return false, err
	}
	path := s.path(name)
	data, labels := in.Data.Clone(), maps.Clone(in.Labels)
	conditional := opts.IfVersion != "" || opts.CreateOnly
	token := newToken()
	var sent *driver.Write // a write that failed and may have landed
	err = s.retry(ctx, opPut, name, func(ctx context.Context) error {
		if sent != nil && conditional {
			// Read again, the write would lose to itself: send it again,
			// with its token.
			err := s.drv.Put(ctx, sent)
			changed = err == nil
			return err
		}
		cur, err := s.current(ctx, path)
		if err != nil {
			return err
		}
		if err := putConflict(cur, opts); err != nil {
			return err
		}
		if cur != nil && cur.Data != nil && data.Equal(cur.Data) && maps.Equal(labels, cur.Labels) {
			changed = sent != nil // a lost answer to a write that landed
			return nil
		}
		w := &driver.Write{Name: path, Data: data, Labels: labels, Current: cur, IfVersion: opts.IfVersion, CreateOnly: opts.CreateOnly, Token: token}
		if err := s.drv.Put(ctx, w); err != nil {
			sent = w
			return err
		}
		changed = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return changed, nil
}

// MaxValueBytes returns the most data one secret may hold in the
// backend, counted as the sum of the lengths of its data keys and values,
// or 0 when the backend names no limit: 65536 for AWS Secrets Manager (a
// SecretString's limit), 32 MiB for Vault (its default
// max_request_size), 1 MiB for the memory backend. Put refuses a secret
// over it with edgesecrets.ErrInvalid, naming the limit, before anything is sent.
func (s *Store) MaxValueBytes() int {
	if l, ok := s.drv.(driver.ValueLimiter); ok {
		return max(l.MaxValueBytes(), 0)
	}
	return 0
}

// dataSize is a secret's data size as MaxValueBytes counts it.
func dataSize(d edgesecrets.Data) int {
	n := 0
	for k, v := range d {
		n += len(k) + len(v)
	}
	return n
}

// current reads a secret for Put: nil when it is missing, and without
// Data when its value cannot be read (edgesecrets.ErrInvalid), which Put replaces.
func (s *Store) current(ctx context.Context, path string) (*driver.Secret, error) {
	cur, err := s.drv.Get(ctx, path)
	switch {
	case errors.Is(err, edgesecrets.ErrNotFound):
		return nil, nil
	case errors.Is(err, edgesecrets.ErrInvalid):
		md, serr := s.drv.Stat(ctx, path)
		if serr != nil || md == nil {
			return nil, err
		}
		return &driver.Secret{Labels: md.Labels, Version: md.Version, UpdatedAt: md.UpdatedAt}, nil
	case err != nil:
		return nil, err
	case cur == nil:
		return nil, &Error{Kind: edgesecrets.ErrUnavailable, Err: errNoAnswer}
	}
	return cur, nil
}

// newToken returns a random idempotency key in the form of a UUID.
func newToken() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// putConflict returns the error of a conditional Put that the current
// secret cur (nil: missing) rules out, or nil.
func putConflict(cur *driver.Secret, opts PutOptions) error {
	conflict := func(why string) error { return &Error{Kind: edgesecrets.ErrConflict, Err: errors.New(why)} }
	switch {
	case opts.CreateOnly && cur != nil:
		return conflict("secret exists and the write is create-only")
	case opts.IfVersion == "":
		return nil
	case cur == nil:
		return conflict("secret does not exist, so its version cannot match")
	case cur.Version == "":
		return &Error{Kind: edgesecrets.ErrInvalid, Err: errors.New("the store keeps no versions, so IfVersion cannot be checked")}
	case cur.Version != opts.IfVersion:
		return conflict("current version does not match the expected version")
	}
	return nil
}

// Delete removes the secret. Deleting a missing secret is not an error.
func (s *Store) Delete(ctx context.Context, name string) (err error) {
	start := time.Now()
	defer func() { s.record(opDelete, err); s.ins.observe(opDelete, start, err) }()
	if err := s.start(ctx, opDelete, name); err != nil {
		return err
	}
	return s.retry(ctx, opDelete, name, func(ctx context.Context) error {
		err := s.drv.Delete(ctx, s.path(name))
		if errors.Is(err, edgesecrets.ErrNotFound) {
			return nil
		}
		return err
	})
}

// List returns the names of all secrets whose name starts with prefix,
// at any depth, sorted. The prefix is a plain string prefix: "db/p"
// matches "db/password" and "db/pool/user". Paging is handled inside.
// An empty prefix lists everything.
func (s *Store) List(ctx context.Context, prefix string) (names []string, err error) {
	start := time.Now()
	defer func() { s.record(opList, err); s.ins.observe(opList, start, err) }()
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	if err := s.live(ctx, opList, prefix); err != nil {
		return nil, err
	}
	full := prefix
	if s.scope != "" {
		full = s.scope + "/" + prefix
	}
	var got []string
	err = s.retry(ctx, opList, prefix, func(ctx context.Context) (err error) {
		got, err = s.drv.List(ctx, full)
		return err
	})
	if err != nil {
		return nil, err
	}
	names = []string{}
	for _, p := range got {
		if n, ok := s.rel(p); ok && strings.HasPrefix(n, prefix) && ValidateName(n) == nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// GetBatch reads several secrets: in one backend call per batch when the
// backend can (AWS BatchGetSecretValue), one Get per distinct name
// otherwise. Missing secrets are absent from the result; an invalid name
// or any other error aborts the read. It counts as one opGet.
func (s *Store) GetBatch(ctx context.Context, names []string) (out map[string]*Secret, err error) {
	start := time.Now()
	defer func() { s.record(opGet, err); s.ins.observe(opGet, start, err) }()
	distinct, byPath, err := s.batchNames(ctx, opGet, names)
	if err != nil {
		return nil, err
	}
	out = make(map[string]*Secret, len(distinct))
	bg, ok := s.drv.(driver.BatchGetter)
	if !ok {
		for _, name := range distinct {
			var got *driver.Secret
			err := s.retry(ctx, opGet, name, func(ctx context.Context) (err error) {
				got, err = s.drv.Get(ctx, s.path(name))
				return err
			})
			switch {
			case errors.Is(err, edgesecrets.ErrNotFound):
			case err != nil:
				return nil, err
			case got != nil:
				out[name] = toSecret(name, got)
			}
		}
		return out, nil
	}
	var got map[string]*driver.Secret
	err = s.retry(ctx, opGet, batchName(distinct), func(ctx context.Context) (err error) {
		got, err = bg.GetBatch(ctx, slices.Collect(maps.Keys(byPath)))
		return err
	})
	if err != nil {
		return nil, err
	}
	for p, sec := range got {
		if name, ok := byPath[p]; ok && sec != nil {
			out[name] = toSecret(name, sec)
		}
	}
	return out, nil
}

// batchNames validates names and returns them without duplicates, in
// order, with the driver name of each.
func (s *Store) batchNames(ctx context.Context, op string, names []string) ([]string, map[string]string, error) {
	distinct := make([]string, 0, len(names))
	byPath := make(map[string]string, len(names))
	for _, name := range names {
		if err := checkName(op, name); err != nil {
			return nil, nil, err
		}
		if _, dup := byPath[s.path(name)]; !dup {
			byPath[s.path(name)] = name
			distinct = append(distinct, name)
		}
	}
	if err := s.live(ctx, op, batchName(distinct)); err != nil {
		return nil, nil, err
	}
	return distinct, byPath, nil
}

// batchName is the name in the error of a batch call: its only name, or
// none.
func batchName(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return ""
}

// StatBatch reads the metadata of several secrets, as Stat does: in one
// backend listing per batch when the backend has one (AWS ListSecrets, a
// page per 100 secrets). Names absent from the result may be missing,
// refused or merely not listed (a listing can lag, and can show a secret
// the caller may not read): ask about those with Stat. An invalid name or
// any other error aborts the read. It counts as one opStat.
//
// For a backend without a batch metadata read (Vault and memory read
// metadata one secret at a time) it returns an error matching
// errors.ErrUnsupported and no kind, which is not counted as a call: ask
// with one Stat per name.
func (s *Store) StatBatch(ctx context.Context, names []string) (out map[string]Metadata, err error) {
	bs, ok := s.drv.(driver.BatchStater)
	if !ok {
		return nil, errNoBatchStat()
	}
	start := time.Now()
	defer func() { s.record(opStat, err); s.ins.observe(opStat, start, err) }()
	_, byPath, err := s.batchNames(ctx, opStat, names)
	if err != nil {
		return nil, err
	}
	var got map[string]*driver.Secret
	err = s.retry(ctx, opStat, "", func(ctx context.Context) (err error) {
		got, err = bs.StatBatch(ctx, slices.Collect(maps.Keys(byPath)))
		return err
	})
	if err != nil {
		return nil, err
	}
	out = make(map[string]Metadata, len(got))
	for p, md := range got {
		if name, ok := byPath[p]; ok && md != nil {
			out[name] = toMetadata(name, md)
		}
	}
	return out, nil
}

// errNoBatchStat is StatBatch's error for a backend without a batch
// metadata read.
func errNoBatchStat() error {
	return &Error{Op: opStat, Err: fmt.Errorf("the store has no batch metadata read: %w", errors.ErrUnsupported)}
}

// CheckCredentials tells whether the store accepts the caller's own
// credentials (a Vault token, AWS keys), apart from any one secret. A
// caller that sees secrets refused or missing asks it before concluding
// they were revoked: when the store rejects the caller itself, every name
// reads refused and nothing was learnt about any secret.
//
// It returns nil when the store accepts the credentials; an error matching
// edgesecrets.ErrPermission when it rejects them (expired, revoked, or they can no
// longer be renewed or obtained again), naming the cause and never the
// credential; an error matching edgesecrets.ErrUnavailable when it cannot tell; a
// context error; or, for a backend without such a check, an error matching
// errors.ErrUnsupported and no kind, which is not counted as a call.
func (s *Store) CheckCredentials(ctx context.Context) error {
	const op = opCheckCredentials
	cc, ok := s.drv.(driver.CredentialChecker)
	if !ok {
		return errNoCheck()
	}
	unsupported := false
	start := time.Now()
	err := s.live(ctx, op, "")
	if err == nil {
		err = s.retry(ctx, op, "", func(ctx context.Context) error {
			err := cc.CheckCredentials(ctx)
			if errors.Is(err, errors.ErrUnsupported) {
				unsupported = true // a driver over a store without a check
				return nil
			}
			return err
		})
	}
	if unsupported {
		return errNoCheck()
	}
	var e *Error
	if errors.As(err, &e) && (e.Kind == edgesecrets.ErrNotFound || e.Kind == edgesecrets.ErrConflict || e.Kind == edgesecrets.ErrInvalid) { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
		// The store answered, but nothing about the credentials: keep the
		// cause's text, not its kind.
		var cause error
		if e.Err != nil {
			cause = errors.New(e.Err.Error())
		}
		err = &Error{Op: op, Kind: edgesecrets.ErrUnavailable, Err: cause}
	}
	s.record(op, err)
	s.ins.observe(op, start, err)
	return err
}

// errNoCheck is CheckCredentials' error for a store without a check.
func errNoCheck() error {
	return &Error{Op: opCheckCredentials, Err: fmt.Errorf("the store has no credential check: %w", errors.ErrUnsupported)}
}

// As sets target to the backend's client when target is a pointer to its
// type, and reports whether it did: **api.Client for Vault,
// **secretsmanager.Client for AWS (see each backend's documentation). It
// is the way to the backend's features that Store does not cover.
func (s *Store) As(target any) bool {
	a, ok := s.drv.(interface{ As(any) bool })
	return ok && a.As(target)
}

// Close releases the store's resources. Later calls fail with
// edgesecrets.ErrUnavailable; Close itself may be called again and returns the first
// call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.closeErr = s.drv.Close()
	})
	return s.closeErr
}
