package agreement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// BoundSecret is the store secret a service secret is bound to.
type BoundSecret struct {
	// VaultSecret is the secret's name in the store.
	VaultSecret string
	// Format is how the agent lays the secret out: FormatJSON (the default
	// when empty) or FormatRaw.
	Format string
	// Sent is the tag of the content the agbot sealed into the proposal:
	// Secret.ContentTag of what it read to build it (ReadProposal sets
	// it). With it, the tracker sends the agreement an update whenever the
	// store holds other content, also when the secret rotated before the
	// watcher first looked at it, while the agbot was down, or before the
	// agreement was registered with a secret already watched.
	//
	// Zero keeps the behaviour of agreements registered without it: the
	// agreement is sent the secret on every Changed event of the watcher,
	// which compares with its own first observation, so a rotation between
	// the proposal and that observation (or while the agbot was down) is
	// never delivered. If several bindings of one agreement name the same
	// store secret with different non-zero tags, it is updated at the
	// first observation.
	Sent secretstore.ContentTag
}

// ServiceBinding is one service (container) of an agreement and its secret
// bindings.
type ServiceBinding struct {
	Service ServiceRef
	// Secrets maps each service secret name (its file name on the node) to
	// the store secret bound to it.
	Secrets map[string]BoundSecret
}

// Revocation says why the tracker asks for an agreement to be cancelled.
type Revocation struct {
	// VaultSecret is the secret that went away.
	VaultSecret string
	// Kind is secretstore.Deleted or secretstore.Forbidden.
	Kind secretstore.EventKind
}

// SecretReader reads new secret values. *secretstore.Reader implements it:
// its coalescing makes one backend read serve every agreement.
type SecretReader interface {
	Get(ctx context.Context, name string) (*secretstore.Secret, error)
	// Invalidate drops any cached copy of name.
	Invalidate(name string)
}

// NameWatcher is the part of *secretstore.Watcher the tracker drives.
type NameWatcher interface {
	Watch(names ...string) error
	Unwatch(names ...string)
	Retry(names ...string)
	// Observed returns the content tag of the name's last observation, if
	// it found the secret present.
	Observed(name string) (secretstore.ContentTag, bool)
}

// UpdateQueue takes agreement updates for delivery. *Outbox implements it.
type UpdateQueue interface {
	Queue(ctx context.Context, u Update) error
	Forget(ctx context.Context, agreementID string) error
}

// TrackerOptions configure a Tracker. Reader, Watcher and Outbox are required.
type TrackerOptions struct {
	Reader  SecretReader
	Watcher NameWatcher
	Outbox  UpdateQueue
	// Cancel is called for each agreement bound to a secret that was
	// deleted or to which access was revoked, and was not back within
	// GracePeriod (UX-9: revoked and not replaced, so undeploy). It may be
	// called more than once for an agreement bound to several such
	// secrets, so it should be idempotent, and normally ends with
	// Unregister. Nil: revocations are only logged.
	Cancel func(ctx context.Context, agreementID string, r Revocation)
	// Retry is called for a deployment recorded with Refused once every
	// secret it was missing exists. Nil: appearances are only logged.
	Retry func(ctx context.Context, deploymentID string)
	// GracePeriod delays Cancel; if the secret reappears meanwhile the
	// agreements are kept. Zero cancels at once.
	GracePeriod time.Duration
	// Clock runs the grace timers; nil means the real clock.
	Clock clockwork.Clock
	// Logger receives what the tracker does, naming agreements, secrets and
	// bindings, never values. Nil discards.
	Logger *slog.Logger
}

// Tracker is the agbot's index from store secrets to the agreements that
// use them. It keeps the watcher's set of names in step with the
// registered agreements, and turns the watcher's events into actions:
//
//   - Changed: it reads the new value once (invalidating the reader's cache
//     first) and queues, for exactly the agreements bound to the secret
//     whose agents do not hold that content yet, one secrets update
//     carrying only the changed secrets;
//   - Deleted, Forbidden: after GracePeriod it calls Cancel for each bound
//     agreement, unless the secret reappeared meanwhile;
//   - Appeared: it cancels a pending grace period, calls Retry for the
//     deployments refused for missing secrets that now all exist, and, like
//     Changed, updates the agreements that were sent other content than
//     the store holds (on a first observation, this is a rotation that
//     happened before the watcher looked);
//   - Unavailable: it logs and waits; an outage cancels nothing.
//
// For each agreement and store secret the tracker keeps the tag of the
// content the agent was last sent: BoundSecret.Sent at Register, then the
// tag of each update it queues. An update goes out when the watcher's
// current observation differs from that tag, so the agent gets every
// rotation exactly once, whenever it happened. A secret bound without Sent
// is not tracked: as before, the agreement is sent it on every Changed
// event (see BoundSecret.Sent). Bindings returns the tags to persist, so
// an agbot restart re-registers its agreements with what their agents
// hold.
//
// Hand HandleEvents the events of each secretstore.Watcher cycle.
type Tracker struct {
	reader  SecretReader
	watcher NameWatcher
	outbox  UpdateQueue
	cancel  func(context.Context, string, Revocation)
	retry   func(context.Context, string)
	grace   time.Duration
	clock   clockwork.Clock
	log     *slog.Logger

	mu         sync.Mutex
	agreements map[string]*registration
	users      map[string]map[string]struct{} // vault secret → agreement ids
	refusals   map[string]map[string]struct{} // deployment → missing vault secrets
	waiting    map[string]map[string]struct{} // vault secret → refused deployments
	graces     map[string]*graceTimer         // vault secret → pending cancel
}

// registration is one registered agreement.
type registration struct {
	services []ServiceBinding
	// held maps each store secret bound with Sent to the tag of the
	// content its agent was last sent; a zero tag (bindings of one secret
	// sent different content) differs from every observation. Secrets
	// bound without Sent are not tracked: they are updated on Changed.
	held map[string]secretstore.ContentTag
}

type graceTimer struct {
	timer clockwork.Timer
	kind  secretstore.EventKind
}

// NewTracker returns a tracker with no agreements.
func NewTracker(opts TrackerOptions) (*Tracker, error) {
	var missing []string
	if opts.Reader == nil {
		missing = append(missing, "Reader")
	}
	if opts.Watcher == nil {
		missing = append(missing, "Watcher")
	}
	if opts.Outbox == nil {
		missing = append(missing, "Outbox")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("agreement: tracker: missing %s", strings.Join(missing, ", "))
	}
	if opts.GracePeriod < 0 {
		return nil, fmt.Errorf("agreement: tracker: negative grace period %s", opts.GracePeriod)
	}
	t := &Tracker{
		reader:     opts.Reader,
		watcher:    opts.Watcher,
		outbox:     opts.Outbox,
		cancel:     opts.Cancel,
		retry:      opts.Retry,
		grace:      opts.GracePeriod,
		clock:      opts.Clock,
		log:        opts.Logger,
		agreements: map[string]*registration{},
		users:      map[string]map[string]struct{}{},
		refusals:   map[string]map[string]struct{}{},
		waiting:    map[string]map[string]struct{}{},
		graces:     map[string]*graceTimer{},
	}
	if t.clock == nil {
		t.clock = clockwork.NewRealClock()
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	return t, nil
}

// Register records the agreement's bindings (replacing any earlier ones)
// and watches the secrets they name. It validates every binding first and
// reports every problem; on error nothing changes.
//
// Give each binding the Sent tag of the content sealed into the proposal,
// as ReadProposal returns it (or, after an agbot restart, the tag Bindings
// returned before it). If the
// watcher already holds an observation of a secret that differs from it,
// the next cycle reports the secret Changed (Watcher.Retry) and the
// agreement gets an update; so do agreements bound to that secret without
// Sent, as on any Changed.
func (t *Tracker) Register(agreementID string, services []ServiceBinding) error {
	if err := checkBindings(agreementID, services); err != nil {
		return err
	}
	reg := &registration{services: make([]ServiceBinding, len(services)), held: sentTags(services)}
	for i, sb := range services {
		reg.services[i] = ServiceBinding{Service: sb.Service, Secrets: maps.Clone(sb.Secrets)}
	}
	names := vaultSecrets(reg.services)

	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.watcher.Watch(names...); err != nil {
		return fmt.Errorf("agreement %s: %w", agreementID, err)
	}
	var stale []string
	for n, sent := range reg.held {
		// Not yet observed (or missing): its first observation decides.
		if cur, observed := t.watcher.Observed(n); observed && cur != sent {
			stale = append(stale, n)
		}
	}
	slices.Sort(stale)
	old := t.agreements[agreementID]
	t.agreements[agreementID] = reg
	for _, n := range names {
		addTo(t.users, n, agreementID)
	}
	if old != nil {
		for _, n := range vaultSecrets(old.services) {
			if !slices.Contains(names, n) {
				removeFrom(t.users, n, agreementID)
				t.unwatchUnused(n)
			}
		}
	}
	if len(stale) > 0 {
		t.watcher.Retry(stale...)
		t.log.Info("agreement was sent other content than the store holds now; update at the next cycle",
			slog.String("agreement", agreementID), slog.Any("secrets", stale))
	}
	t.log.Debug("agreement registered", slog.String("agreement", agreementID), slog.Any("bindings", bindingsLog(reg.services)))
	return nil
}

// Bindings returns a copy of the agreement's bindings with each Sent set
// to the tag of the content its agent was last sent (queued): what to
// persist with the agreement, so that re-registering it after an agbot
// restart sends exactly the rotations it missed. The tags are checksums
// for stores without versions: persist them with ContentTag.Encode, never
// log them encoded.
func (t *Tracker) Bindings(agreementID string) ([]ServiceBinding, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	reg, ok := t.agreements[agreementID]
	if !ok {
		return nil, false
	}
	out := make([]ServiceBinding, len(reg.services))
	for i, sb := range reg.services {
		out[i] = ServiceBinding{Service: sb.Service, Secrets: make(map[string]BoundSecret, len(sb.Secrets))}
		for name, b := range sb.Secrets {
			if held := reg.held[b.VaultSecret]; !held.IsZero() {
				b.Sent = held
			}
			out[i].Secrets[name] = b
		}
	}
	return out, true
}

// Unregister forgets the agreement: its secrets are no longer watched for
// it and its outbox record is dropped.
func (t *Tracker) Unregister(ctx context.Context, agreementID string) error {
	t.mu.Lock()
	old, ok := t.agreements[agreementID]
	delete(t.agreements, agreementID)
	var oldServices []ServiceBinding
	if ok {
		oldServices = old.services
	}
	for _, n := range vaultSecrets(oldServices) {
		removeFrom(t.users, n, agreementID)
		t.unwatchUnused(n)
	}
	t.mu.Unlock()
	if ok {
		t.log.Debug("agreement unregistered", slog.String("agreement", agreementID))
	}
	return t.outbox.Forget(ctx, agreementID)
}

// Refused records that a deployment was refused because the named secrets
// do not exist, and watches them; Retry is called once they all do.
// Calling it again for the deployment replaces the set.
func (t *Tracker) Refused(deploymentID string, missing ...string) error {
	var problems []error
	if deploymentID == "" {
		problems = append(problems, errors.New("deployment id is empty"))
	}
	if len(missing) == 0 {
		problems = append(problems, errors.New("no missing secret named"))
	}
	for _, n := range missing {
		if err := secretstore.ValidateName(n); err != nil {
			problems = append(problems, fmt.Errorf("secret %q: %w", n, err))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("agreement: refused deployment %q: %w", deploymentID, errors.Join(problems...))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.watcher.Watch(missing...); err != nil {
		return fmt.Errorf("agreement: refused deployment %q: %w", deploymentID, err)
	}
	t.dropRefusal(deploymentID)
	for _, n := range missing {
		addTo(t.refusals, deploymentID, n)
		addTo(t.waiting, n, deploymentID)
	}
	t.log.Debug("deployment waiting for secrets", slog.String("deployment", deploymentID), slog.Any("secrets", missing))
	return nil
}

// DropRefusal forgets a refused deployment without retrying it.
func (t *Tracker) DropRefusal(deploymentID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropRefusal(deploymentID)
}

// Agreements returns the ids of the agreements bound to a store secret,
// sorted.
func (t *Tracker) Agreements(vaultSecret string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.users[vaultSecret]))
}

// Close stops pending grace timers; their agreements are not cancelled.
func (t *Tracker) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n, g := range t.graces {
		g.timer.Stop()
		delete(t.graces, n)
	}
}

// HandleEvents acts on one watcher cycle's events (secretstore.Cycle's
// Events). Call it from the handler given to secretstore.Watcher.Run, on
// the watcher's goroutine; calls must not overlap.
func (t *Tracker) HandleEvents(ctx context.Context, events []secretstore.Event) {
	present := map[string]bool{} // secrets seen present → Changed reported
	for _, e := range events {
		switch e.Kind {
		case secretstore.Appeared:
			t.appeared(ctx, e.Name)
			if _, ok := present[e.Name]; !ok {
				present[e.Name] = false
			}
		case secretstore.Changed:
			present[e.Name] = true
		case secretstore.Deleted, secretstore.Forbidden:
			t.revoked(ctx, e.Name, e.Kind)
		case secretstore.Unavailable:
			t.log.Warn("secret store unavailable; agreements kept, will check again",
				slog.Int("secrets", len(e.Names)), slog.Bool("outage", e.Outage))
		}
	}
	if len(present) > 0 {
		t.rotate(ctx, present)
	}
}

// outdated returns, for each secret of present (name → Changed reported),
// the agreements to update: those tracking what their agents hold whose
// content differs from the watcher's observation, and on Changed those
// registered without Sent.
func (t *Tracker) outdated(present map[string]bool) map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string][]string{}
	for n, changed := range present {
		cur, observed := t.watcher.Observed(n)
		for id := range t.users[n] {
			held, tracked := t.agreements[id].held[n]
			switch {
			case tracked && observed:
				if held == cur {
					continue
				}
			case !changed:
				continue // no Sent, or nothing observed to compare with
			}
			out[n] = append(out[n], id)
		}
	}
	return out
}

// rotate reads each outdated secret once and queues one update per
// affected agreement, carrying only its outdated secrets.
func (t *Tracker) rotate(ctx context.Context, present map[string]bool) {
	outdated := t.outdated(present)
	if len(outdated) == 0 {
		return
	}

	values := make(map[string]*secretstore.Secret, len(outdated))
	for _, n := range slices.Sorted(maps.Keys(outdated)) {
		t.reader.Invalidate(n)
		s, err := t.reader.Get(ctx, n)
		switch {
		case errors.Is(err, secretstore.ErrNotFound):
			// Gone since the watcher saw it: the next cycle reports Deleted.
			continue
		case err != nil:
			t.log.Warn("could not read rotated secret; will retry next cycle", slog.String("secret", n), slog.String("err", err.Error()))
			t.watcher.Retry(n)
			continue
		}
		values[n] = s
	}
	if len(values) == 0 {
		return
	}

	type pending struct {
		update Update
		reg    *registration
		names  []string
	}
	var updates []pending
	t.mu.Lock()
	affected := map[string][]string{} // agreement → secrets to send
	for n, ids := range outdated {
		if _, ok := values[n]; ok {
			for _, id := range ids {
				affected[id] = append(affected[id], n)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(affected)) {
		reg := t.agreements[id]
		if reg == nil {
			continue // unregistered meanwhile
		}
		var names []string
		for _, n := range affected[id] {
			if held, tracked := reg.held[n]; !tracked || held != values[n].ContentTag() {
				names = append(names, n) // else: the store is back to what the agent has
			}
		}
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		var su SecretsUpdate
		for _, sb := range reg.services {
			secrets := map[string]SecretDetails{}
			for svcName, b := range sb.Secrets {
				if slices.Contains(names, b.VaultSecret) {
					secrets[svcName] = SecretDetails{Format: b.Format, Data: values[b.VaultSecret].Data}
				}
			}
			if len(secrets) > 0 {
				su.Services = append(su.Services, ServiceSecrets{Service: sb.Service, Secrets: secrets})
			}
		}
		u, err := NewSecretsUpdate(id, su)
		if err != nil {
			t.log.Error("could not encode secrets update", slog.String("agreement", id), slog.String("err", err.Error()))
			continue
		}
		updates = append(updates, pending{update: u, reg: reg, names: names})
		t.log.Debug("secrets update for agreement", slog.String("agreement", id), slog.Any("secrets", updateLog(su)))
	}
	t.mu.Unlock()

	var failed []string
	queued := 0
	for _, p := range updates {
		if err := t.outbox.Queue(ctx, p.update); err != nil {
			t.log.Error("could not queue secrets update; will retry next cycle",
				slog.String("agreement", p.update.AgreementID), slog.String("err", err.Error()))
			failed = append(failed, p.names...)
			continue
		}
		queued++
		t.mu.Lock()
		if t.agreements[p.update.AgreementID] == p.reg { // not replaced meanwhile
			for _, n := range p.names {
				if _, tracked := p.reg.held[n]; tracked {
					p.reg.held[n] = values[n].ContentTag()
				}
			}
		}
		t.mu.Unlock()
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		t.watcher.Retry(slices.Compact(failed)...)
	}
	t.log.Info("secrets rotated; updates queued", slog.Any("secrets", slices.Sorted(maps.Keys(values))),
		slog.Int("agreements", queued))
}

// revoked starts the grace period for, or cancels at once, the agreements
// bound to a deleted or forbidden secret.
func (t *Tracker) revoked(ctx context.Context, name string, kind secretstore.EventKind) {
	t.mu.Lock()
	n := len(t.users[name])
	if n == 0 {
		t.mu.Unlock()
		return
	}
	if t.grace > 0 {
		if _, pending := t.graces[name]; !pending {
			g := &graceTimer{kind: kind}
			g.timer = t.clock.AfterFunc(t.grace, func() { t.graceOver(ctx, name, g) })
			t.graces[name] = g
			t.log.Warn("secret revoked; its agreements are cancelled unless it is back within the grace period",
				slog.String("secret", name), slog.String("event", kind.String()), slog.Int("agreements", n),
				slog.Duration("grace", t.grace))
		}
		t.mu.Unlock()
		return
	}
	ids := slices.Sorted(maps.Keys(t.users[name]))
	t.mu.Unlock()
	t.cancelAll(ctx, ids, Revocation{VaultSecret: name, Kind: kind})
}

// graceOver cancels the agreements still bound to name, unless the grace
// period was ended by the secret's return (or Close) meanwhile.
func (t *Tracker) graceOver(ctx context.Context, name string, g *graceTimer) {
	t.mu.Lock()
	if t.graces[name] != g {
		t.mu.Unlock()
		return
	}
	delete(t.graces, name)
	ids := slices.Sorted(maps.Keys(t.users[name]))
	t.mu.Unlock()
	if ctx.Err() != nil {
		return // shutting down: leave the decision to the next run
	}
	t.cancelAll(ctx, ids, Revocation{VaultSecret: name, Kind: g.kind})
}

func (t *Tracker) cancelAll(ctx context.Context, ids []string, r Revocation) {
	t.log.Warn("secret revoked; cancelling its agreements", slog.String("secret", r.VaultSecret),
		slog.String("event", r.Kind.String()), slog.Int("agreements", len(ids)))
	if t.cancel == nil {
		return
	}
	for _, id := range ids {
		t.cancel(ctx, id, r)
	}
}

// appeared ends a grace period and retries the deployments that waited
// only for this secret.
func (t *Tracker) appeared(ctx context.Context, name string) {
	t.mu.Lock()
	if g, ok := t.graces[name]; ok {
		g.timer.Stop()
		delete(t.graces, name)
		t.log.Info("revoked secret is back within the grace period; agreements kept", slog.String("secret", name))
	}
	var ready []string
	for dep := range t.waiting[name] {
		removeFrom(t.refusals, dep, name)
		if len(t.refusals[dep]) == 0 {
			ready = append(ready, dep)
		}
	}
	delete(t.waiting, name)
	t.unwatchUnused(name)
	t.mu.Unlock()

	slices.Sort(ready)
	for _, dep := range ready {
		t.log.Info("secrets of a refused deployment exist now; retrying it", slog.String("deployment", dep))
		if t.retry != nil {
			t.retry(ctx, dep)
		}
	}
}

// dropRefusal forgets a refused deployment. t.mu is held.
func (t *Tracker) dropRefusal(deploymentID string) {
	for n := range t.refusals[deploymentID] {
		removeFrom(t.waiting, n, deploymentID)
		t.unwatchUnused(n)
	}
	delete(t.refusals, deploymentID)
}

// unwatchUnused stops watching name when no agreement or refusal needs it.
// t.mu is held.
func (t *Tracker) unwatchUnused(name string) {
	if len(t.users[name]) > 0 || len(t.waiting[name]) > 0 {
		return
	}
	t.watcher.Unwatch(name)
	if g, ok := t.graces[name]; ok {
		g.timer.Stop()
		delete(t.graces, name)
	}
}

// checkBindings validates an agreement's bindings, reporting every problem.
func checkBindings(agreementID string, services []ServiceBinding) error {
	var problems []error
	if agreementID == "" {
		problems = append(problems, errors.New("agreement id is empty"))
	}
	seen := map[ServiceRef]bool{}
	for _, sb := range services {
		svc := sb.Service.String()
		if err := sb.Service.Validate(); err != nil {
			problems = append(problems, err)
		}
		if seen[sb.Service] {
			problems = append(problems, fmt.Errorf("service %s is listed twice", svc))
		}
		seen[sb.Service] = true
		for _, name := range slices.Sorted(maps.Keys(sb.Secrets)) {
			b := sb.Secrets[name]
			if err := safename.Check(name); err != nil {
				problems = append(problems, fmt.Errorf("service %s: secret name %.80q is not a single file name: it %w", svc, name, err))
			}
			if err := secretstore.ValidateName(b.VaultSecret); err != nil {
				problems = append(problems, fmt.Errorf("service %s: secret %q is bound to an invalid store secret name %q: %w", svc, name, b.VaultSecret, err))
			}
			switch b.Format {
			case "", FormatJSON, FormatRaw:
			default:
				problems = append(problems, fmt.Errorf("service %s: secret %q has unknown format %q", svc, name, b.Format))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("agreement %q: invalid bindings: %w", agreementID, errors.Join(problems...))
	}
	return nil
}

// vaultSecrets returns the distinct store secrets of bindings, sorted.
func vaultSecrets(services []ServiceBinding) []string {
	var names []string
	for _, sb := range services {
		for _, b := range sb.Secrets {
			names = append(names, b.VaultSecret)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// sentTags returns the Sent tags of bindings by store secret. A secret
// whose bindings were sent different content maps to the zero tag, which
// differs from every observation.
func sentTags(services []ServiceBinding) map[string]secretstore.ContentTag {
	held := map[string]secretstore.ContentTag{}
	mixed := map[string]bool{}
	for _, sb := range services {
		for _, b := range sb.Secrets {
			if b.Sent.IsZero() {
				continue
			}
			if sent, ok := held[b.VaultSecret]; ok && sent != b.Sent {
				mixed[b.VaultSecret] = true
			}
			held[b.VaultSecret] = b.Sent
		}
	}
	for n := range mixed {
		held[n] = secretstore.ContentTag{}
	}
	return held
}

// bindingsLog renders bindings for a log line: service secret → store secret.
func bindingsLog(services []ServiceBinding) []string {
	var out []string
	for _, sb := range services {
		for _, name := range slices.Sorted(maps.Keys(sb.Secrets)) {
			out = append(out, sb.Service.URL+":"+name+"="+sb.Secrets[name].VaultSecret)
		}
	}
	return out
}

// updateLog renders a secrets update for a log line: service secret names.
func updateLog(su SecretsUpdate) []string {
	var out []string
	for _, ss := range su.Services {
		for _, name := range ss.SecretNames() {
			out = append(out, ss.Service.URL+":"+name)
		}
	}
	return out
}

func addTo(m map[string]map[string]struct{}, key, val string) {
	set, ok := m[key]
	if !ok {
		set = map[string]struct{}{}
		m[key] = set
	}
	set[val] = struct{}{}
}

func removeFrom(m map[string]map[string]struct{}, key, val string) {
	if set, ok := m[key]; ok {
		delete(set, val)
		if len(set) == 0 {
			delete(m, key)
		}
	}
}
