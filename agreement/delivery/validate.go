package delivery

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/delivery/state"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// settings are Options with the defaults applied.
type settings struct {
	Options
	grace   time.Duration // 0 for NoGrace
	budget  Budget
	workers int
	senders int
	batch   int
	lease   time.Duration
	resync  time.Duration
}

// check validates opts and applies the defaults. Its error names every
// missing or invalid option.
func (opts Options) check() (settings, error) {
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if opts.Store == nil {
		bad("missing Store")
	}
	if opts.State == nil {
		bad("missing State")
	}
	if opts.Keys == nil {
		bad("missing Keys")
	}
	if opts.Agents == nil {
		bad("missing Agents")
	}
	if opts.Transport == nil {
		bad("missing Transport")
	}
	if opts.Interval != 0 && opts.Interval < time.Second {
		bad("Interval %s is below the watcher's minimum of 1s", opts.Interval)
	}
	if opts.Grace < 0 && opts.Grace != NoGrace {
		bad("Grace %s is negative; use NoGrace to cancel without a grace period", opts.Grace)
	}
	if opts.Budget.Count < 0 {
		bad("Budget.Count %d is negative", opts.Budget.Count)
	}
	if opts.Budget.Percent < 0 || opts.Budget.Percent > 100 {
		bad("Budget.Percent %g is not between 0 and 100", opts.Budget.Percent)
	}
	for _, d := range []struct {
		name string
		val  time.Duration
	}{{"ResyncPeriod", opts.ResyncPeriod}, {"ReplyTimeout", opts.ReplyTimeout}, {"InitialDelay", opts.InitialDelay}, {"MaxDelay", opts.MaxDelay}, {"DivergedAfter", opts.DivergedAfter}} {
		if d.val < 0 {
			bad("%s %s is negative", d.name, d.val)
		}
	}
	if opts.Workers < 0 {
		bad("Workers %d is negative", opts.Workers)
	}
	if opts.Senders < 0 {
		bad("Senders %d is negative", opts.Senders)
	}

	s := settings{Options: opts}
	s.Interval = cmp.Or(opts.Interval, defaultInterval)
	switch opts.Grace {
	case 0:
		s.grace = defaultGrace
	case NoGrace:
		s.grace = 0
	default:
		s.grace = opts.Grace
	}
	s.budget = opts.Budget
	if s.budget == (Budget{}) {
		s.budget = Budget{Count: defaultBudgetCount, Percent: defaultBudgetPercent}
	}
	s.ReplyTimeout = cmp.Or(opts.ReplyTimeout, defaultReplyTimeout)
	s.resync = max(cmp.Or(opts.ResyncPeriod, defaultResyncPeriod), s.Interval)
	s.InitialDelay = cmp.Or(opts.InitialDelay, defaultInitialDelay)
	s.MaxDelay = cmp.Or(opts.MaxDelay, defaultMaxDelay)
	if s.MaxDelay < s.InitialDelay {
		bad("MaxDelay %s is below InitialDelay %s", s.MaxDelay, s.InitialDelay)
	}
	s.DivergedAfter = cmp.Or(opts.DivergedAfter, defaultDivergedAfter)
	s.workers = cmp.Or(opts.Workers, 4*runtime.GOMAXPROCS(0))
	s.senders = cmp.Or(opts.Senders, defaultSenders)
	s.batch = max(64, 8*s.workers)
	s.lease = max(2*s.ReplyTimeout, 10*time.Second)
	if len(problems) > 0 {
		return settings{}, fmt.Errorf("delivery: invalid options: %w", errors.Join(problems...))
	}
	return s, nil
}

// checkAgreement validates an agreement to register, naming every
// problem; the error matches edgesecrets.ErrInvalid.
func checkAgreement(a Agreement) error {
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	// A proposal without services checks exactly the agreement id rules.
	if err := (agreement.Proposal{AgreementID: a.ID}).Validate(); err != nil {
		bad("%w", err)
	}
	if a.Node == "" {
		bad("node is empty")
	}
	if len(a.Services) == 0 {
		bad("no services: nothing to deliver")
	}
	seen := map[agreement.ServiceRef]bool{}
	for _, sb := range a.Services {
		svc := sb.Service.String()
		if err := sb.Service.Validate(); err != nil {
			bad("%w", err)
		}
		if seen[sb.Service] {
			bad("service %s is listed twice", svc)
		}
		seen[sb.Service] = true
		if len(sb.Secrets) == 0 {
			bad("service %s binds no secrets", svc)
		}
		for _, name := range slices.Sorted(maps.Keys(sb.Secrets)) {
			b := sb.Secrets[name]
			if err := agreement.CheckSecretName(name); err != nil {
				bad("service %s: %w", svc, err)
			}
			if len(b.StoreNames) == 0 {
				bad("service %s: secret %q is bound to no store secret", svc, name)
			}
			for i, n := range b.StoreNames {
				if err := secretstore.ValidateName(n); err != nil {
					bad("service %s: secret %q: store name %.80q: %w", svc, name, n, err)
				}
				if slices.Index(b.StoreNames, n) != i {
					bad("service %s: secret %q names store secret %q twice", svc, name, n)
				}
			}
			switch b.Format {
			case "", agreement.FormatJSON, agreement.FormatRaw, agreement.FormatValueOnly:
			default:
				bad("service %s: secret %q has unknown format %.32q", svc, name, b.Format)
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("delivery: agreement %q: %w: %w", a.ID, edgesecrets.ErrInvalid, errors.Join(problems...))
	}
	return nil
}

// newRecord returns the record of a validated agreement: one slot per
// service secret, sorted by service and name.
func newRecord(a Agreement, now time.Time) *state.Record {
	r := &state.Record{
		ID:          a.ID,
		Node:        a.Node,
		Services:    cloneServices(a.Services),
		Phase:       state.PhaseActive,
		NextAttempt: now,
		CreatedAt:   now,
		UpdatedAt:   now,
	}
	for i, sb := range r.Services {
		for _, name := range slices.Sorted(maps.Keys(sb.Secrets)) {
			r.Slots = append(r.Slots, state.Slot{Service: i, Name: name})
		}
	}
	return r
}

// slotBinding returns the binding of slot s of r.
func slotBinding(r *state.Record, s state.Slot) binding.BoundSecret {
	return r.Services[s.Service].Secrets[s.Name]
}
