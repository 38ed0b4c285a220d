package binding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/ohversion"
	"github.com/edgesecrets/edgesecrets/internal/safename"
)

// ServiceQuery asks a Resolver for the versions of one service.
type ServiceQuery struct {
	Org string
	URL string
	// Arch is the architecture wanted; "" means any.
	Arch string
}

// Resolver supplies service definitions: an exchange client, or the one
// NewCatalog returns over local files.
type Resolver interface {
	// ServiceVersions returns every known version of the service (for the
	// architecture asked, or all of them). No match is an empty result, not
	// an error; an error means the lookup itself failed.
	ServiceVersions(ctx context.Context, q ServiceQuery) ([]*ServiceDefinition, error)
}

// ExistenceChecker says whether vault secrets exist. The one
// NewStoreChecker returns asks a secretstore.Store; secretsapi.Client asks the agbot
// API. The organisation is part of
// the checker (the store adapter is built for one, the agbot takes it from
// the caller's credentials).
type ExistenceChecker interface {
	// SecretExists reports whether the secret exists. Errors carry the
	// secretstore kinds: ErrUnavailable, ErrPermission, ErrInvalid.
	SecretExists(ctx context.Context, name VaultSecretName) (bool, error)
}

// KeyChecker is an ExistenceChecker that can also say which data keys a
// vault secret has (never its values), so that Validate checks each
// binding's declared format against the secret's content
// (CodeSecretFormatMismatch). NewStoreChecker's checker is one.
type KeyChecker interface {
	ExistenceChecker
	// SecretKeys returns the data key names of an existing secret,
	// sorted. Errors carry the secretstore kinds.
	SecretKeys(ctx context.Context, name VaultSecretName) ([]string, error)
}

// Options configure Validate.
type Options struct {
	// Resolver supplies the service definitions. Required.
	Resolver Resolver
	// Checker checks that bound vault secrets exist. When nil, existence is
	// not checked and Report.ExistenceChecked is false (as for a public
	// pattern at publication, whose nodes' organisations are not known).
	Checker ExistenceChecker
	// Point is where in Open Horizon's flow the validation runs; it sets
	// the severities (see Code). The zero value is PointDeployCheck.
	Point Point
	// Node is the id, within the organisation the Checker looks in, of the
	// node the deployment is checked for. With it, a binding of an entry
	// with enableNodeLevelSecrets is checked against the node-level secret
	// first and the organisation- or user-level one next (see
	// Report.Bindings); without it, against its name as written, as anax
	// checks at publication. It must be a single safe path element.
	Node string
	// CheckFormats, with a Checker that is a KeyChecker (NewStoreChecker's
	// is), also checks each binding's declared format against the keys of
	// the vault secret it resolves to (CodeSecretFormatMismatch). That
	// reads each such secret once (its values are wiped at once), where
	// the existence check only asks for metadata: the agbot's check before
	// an agreement sets it.
	CheckFormats bool
	// Logger receives debug lines naming services, secrets and bindings
	// (never values). Default: discard.
	Logger *slog.Logger
}

// Validate checks a pattern's or deployment policy's secret bindings against
// the services it deploys and their whole dependency trees, and returns a
// report of every problem (see the Code constants) with the severities Open
// Horizon gives them at opts.Point. It serves deploycheck, adding a
// deployment policy, publishing a pattern and the agbot's check before an
// agreement; DecodePattern and DecodeDeploymentPolicy build the Target.
//
// Each declared secret is bound in every container that declares it (and
// in the cluster deployment when that declares it); serviceContainer, when
// given, narrows an entry to one container. Every entry that selects a
// service applies; where two bind the same secret of the same container,
// the first in document order wins, as in Open Horizon.
//
// Problems go into the report; the error is non-nil only when ctx ends,
// opts lack a Resolver or opts.Node is not a safe name. Existence is checked
// once per distinct vault secret with the checker; after the store reports
// itself unavailable (or forbidden) the remaining secrets are reported as not
// checked rather than asked for one by one.
func Validate(ctx context.Context, t Target, opts Options) (*Report, error) {
	if opts.Resolver == nil {
		return nil, errors.New("binding: Validate needs a Resolver")
	}
	if opts.Node != "" {
		if err := safename.Check(opts.Node); err != nil {
			return nil, fmt.Errorf("binding: Validate: %w: node id %s", edgesecrets.ErrInvalid, err)
		}
	}
	v := &validation{opts: opts, log: opts.Logger, rep: &Report{Problems: []Problem{}}, visited: map[agreement.ServiceRef]bool{}}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	for i := range t.SecretBindings {
		v.entries = append(v.entries, v.checkEntry(i+1, &t.SecretBindings[i]))
	}
	if err := v.walk(ctx, t.Services); err != nil {
		return nil, err
	}
	for _, e := range v.entries {
		if e.usable && !e.used {
			v.add(CodeBindingUnused, e.problem(), "secretBinding entry %d matches no service deployed here or among its dependencies, so it is not needed.", e.index)
		}
		v.reportUndeclared(e)
		v.settleSeverities(e)
	}
	if opts.Checker != nil {
		v.rep.ExistenceChecked = true
		if err := v.checkExistence(ctx); err != nil {
			return nil, err
		}
	}
	for _, p := range v.rep.Problems {
		v.log.Debug("binding problem", "code", p.Code, "severity", p.Severity, "service", refString(p.Service),
			"binding", p.Binding, "serviceSecret", p.ServiceSecret, "vaultSecret", p.VaultSecret)
	}
	v.log.Debug("secret bindings validated", "point", opts.Point.name(), "services", len(v.rep.Services), "resolved", len(v.rep.Resolved),
		"errors", len(v.rep.Errors()), "warnings", len(v.rep.Warnings()), "notes", len(v.rep.bySeverity(severityNote)))
	return v.rep, nil
}

// ValidateService checks a service definition on its own, as publishing a
// service does: every declared secret name (top level, each container, the
// cluster deployment) is a single safe path element, every format is known,
// and top-level (design form) secrets are declared where device containers
// can receive them (cluster-only: error; device and cluster: warning).
func ValidateService(def *ServiceDefinition) *Report {
	rep := &Report{Problems: []Problem{}, Services: []agreement.ServiceRef{def.ref()}}
	checkDefinition(rep, PointPublish, def)
	return rep
}

// where names the place a declaration is made, for messages.
func (d declaration) where(ref agreement.ServiceRef) string {
	switch d.place {
	case declContainer:
		return fmt.Sprintf("Container %q of service %s", d.container, refString(ref))
	case declCluster:
		return "The cluster deployment of service " + refString(ref)
	}
	return "Service " + refString(ref)
}

// problem is the Problem about the declaration.
func (d declaration) problem(ref agreement.ServiceRef) Problem {
	ref.Container = d.container
	return Problem{Service: ref, ServiceSecret: d.name}
}

// checkDefinition reports the service-level rules for def.
func checkDefinition(rep *Report, at Point, def *ServiceDefinition) {
	ref := def.ref()
	for _, d := range def.declarations() {
		p := d.problem(ref)
		if err := safename.Check(d.name); err != nil {
			rep.add(at, CodeSecretNameInvalid, p, "%s declares secret %q, whose name %s; it must be a single safe file name.", d.where(ref), d.name, err)
		}
		switch f := d.secret.Format; f {
		case "", agreement.FormatJSON, agreement.FormatValueOnly, agreement.FormatRaw:
		default:
			rep.add(at, CodeSecretFormatInvalid, p, "%s declares secret %q with format %q; the format must be %q (the default), %q or %q.", d.where(ref), d.name, f, agreement.FormatJSON, agreement.FormatValueOnly, agreement.FormatRaw)
		}
	}
	if len(def.Secrets) == 0 {
		return
	}
	switch def.kind() {
	case deployCluster:
		rep.add(at, CodeSecretsClusterOnly, Problem{Service: ref}, "Service %s declares secrets at the top of its definition but has only a cluster deployment; declare them in clusterDeployment.secrets.", refString(ref))
	case deployMixed:
		rep.add(at, CodeSecretsMixedDeployment, Problem{Service: ref}, "Service %s declares secrets at the top of its definition and has a cluster deployment; only its device containers will receive them (declare the cluster's in clusterDeployment.secrets).", refString(ref))
	}
}

// entry is a secretBinding entry with its selector parsed.
type entry struct {
	index    int // 1-based
	sb       *SecretBinding
	usable   bool // selector valid: can match services
	versions ohversion.Range
	vault    []*VaultSecretName // parsed vault name per binding; nil when invalid
	used     bool               // selected a service, version included
	selected bool               // org, url and arch selected a service, whatever the version
	needed   []bool             // per binding: binds a secret a selected service declares
	// undeclared is, per binding, the first selected service (container)
	// that does not declare the secret; reported when no service needs it.
	undeclared   []*Problem
	undeclaredIn []int // how many selected services (containers) lack it
	// pending are problems whose severity depends on whether the entry or
	// binding turns out to be needed; binding is -1 for the entry's own.
	pending []pendingProblem
}

type pendingProblem struct {
	problem int // index in Report.Problems
	binding int
}

func (e *entry) problem() Problem {
	return Problem{Binding: e.index, Service: agreement.ServiceRef{
		Org: e.sb.ServiceOrgid, URL: e.sb.ServiceURL, Arch: e.sb.ServiceArch,
		Version: e.sb.ServiceVersionRange, Container: e.sb.ServiceContainer,
	}}
}

// selects reports whether the entry's organisation, URL and architecture
// select def.
func (e *entry) selects(def *ServiceDefinition) bool {
	return e.sb.ServiceOrgid == def.Org && e.sb.ServiceURL == def.URL &&
		ohversion.CheckArch(e.sb.ServiceArch) == nil && ohversion.ArchMatches(e.sb.ServiceArch, def.Arch)
}

type validation struct {
	opts    Options
	log     *slog.Logger
	rep     *Report
	entries []*entry
	visited map[agreement.ServiceRef]bool
}

// add reports a problem with its severity at the validation's point.
func (v *validation) add(c Code, p Problem, format string, args ...any) int {
	return v.rep.add(v.opts.Point, c, p, format, args...)
}

// checkEntry reports the problems an entry has on its own. Those that only
// matter when the entry (or binding) is needed are settled after the walk.
func (v *validation) checkEntry(index int, sb *SecretBinding) *entry {
	e := &entry{index: index, sb: sb, vault: make([]*VaultSecretName, len(sb.Bindings)),
		needed: make([]bool, len(sb.Bindings)), undeclared: make([]*Problem, len(sb.Bindings)), undeclaredIn: make([]int, len(sb.Bindings))}
	p := e.problem()
	e.usable = true
	pend := func(binding, problem int) {
		e.pending = append(e.pending, pendingProblem{problem: problem, binding: binding})
	}
	if sb.ServiceOrgid == "" {
		e.usable = false
		pend(-1, v.add(CodeFieldMissing, p, "secretBinding entry %d has no serviceOrgid.", index))
	}
	if sb.ServiceURL == "" {
		e.usable = false
		pend(-1, v.add(CodeFieldMissing, p, "secretBinding entry %d has no serviceUrl.", index))
	}
	if len(sb.Bindings) == 0 {
		pend(-1, v.add(CodeFieldMissing, p, "secretBinding entry %d binds no secrets.", index))
	}
	if err := ohversion.CheckArch(sb.ServiceArch); err != nil {
		e.usable = false
		pend(-1, v.add(CodeArchInvalid, p, "secretBinding entry %d has an invalid serviceArch: %s.", index, err))
	}
	if sb.ServiceVersionRange != "" {
		r, err := ohversion.ParseRange(sb.ServiceVersionRange)
		if err != nil {
			e.usable = false
			pend(-1, v.add(CodeVersionRangeInvalid, p, "secretBinding entry %d has an invalid serviceVersionRange: %s.", index, err))
		}
		e.versions = r
	}
	for i, b := range sb.Bindings {
		bp := p
		bp.ServiceSecret, bp.VaultSecret = b.ServiceSecret, b.VaultSecret
		switch err := safename.Check(b.ServiceSecret); {
		case b.ServiceSecret == "":
			pend(i, v.add(CodeFieldMissing, bp, "secretBinding entry %d binds vault secret %q to an empty service secret name.", index, b.VaultSecret))
		case err != nil:
			pend(i, v.add(CodeSecretNameInvalid, bp, "secretBinding entry %d binds service secret %q, whose name %s; it must be a single safe file name.", index, b.ServiceSecret, err))
		}
		if b.VaultSecret == "" {
			pend(i, v.add(CodeFieldMissing, bp, "secretBinding entry %d binds service secret %q to no vault secret.", index, b.ServiceSecret))
			continue
		}
		name, err := ParseVaultSecretName(b.VaultSecret)
		if err != nil {
			pend(i, v.add(CodeVaultSecretInvalid, bp, "secretBinding entry %d binds service secret %q to an invalid vault secret name: %s.", index, b.ServiceSecret, err))
			continue
		}
		e.vault[i] = &name
	}
	return e
}

// reportUndeclared reports each binding of e for a secret that no service
// the entry selects declares, as Open Horizon reports a binding no service
// requires: once, however many services (architectures, versions) the entry
// selects, and not at all when one of them needs it.
func (v *validation) reportUndeclared(e *entry) {
	for i, p := range e.undeclared {
		if p == nil || e.needed[i] {
			continue
		}
		b := e.sb.Bindings[i]
		in := "service " + refString(p.Service)
		if p.Service.Container != "" {
			svc := p.Service
			svc.Container = ""
			in = fmt.Sprintf("container %q of service %s", p.Service.Container, refString(svc))
		}
		if n := e.undeclaredIn[i]; n > 1 {
			in = fmt.Sprintf("%s or any of the %d other services it selects", in, n-1)
		}
		v.add(CodeSecretUndeclared, *p, "secretBinding entry %d binds secret %q, which %s does not declare, so the binding is not needed.", e.index, b.ServiceSecret, in)
	}
}

// settleSeverities gives the entry's pending problems binding_unused's
// severity where Open Horizon would see an extraneous binding: a binding no
// selected service declares, an entry that cannot select any service. An
// invalid version range stays an error when the entry selects a deployed
// service by organisation, URL and architecture, since anax fails there.
func (v *validation) settleSeverities(e *entry) {
	unneeded := CodeBindingUnused.severityAt(v.opts.Point)
	for _, pp := range e.pending {
		p := &v.rep.Problems[pp.problem]
		switch {
		case pp.binding >= 0 && e.needed[pp.binding]:
		case pp.binding < 0 && p.Code == CodeVersionRangeInvalid && e.selected:
		default:
			p.Severity = unneeded
		}
	}
}

// walk visits the top-level services and their dependency trees breadth first.
func (v *validation) walk(ctx context.Context, top []agreement.ServiceRef) error {
	var queue []*ServiceDefinition
	for _, ref := range top {
		defs, err := v.resolveTop(ctx, ref)
		if err != nil {
			return err
		}
		queue = append(queue, defs...)
	}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		def := queue[0]
		queue = queue[1:]
		ref := def.ref()
		if v.visited[ref] {
			continue
		}
		v.visited[ref] = true
		v.rep.Services = append(v.rep.Services, ref)
		checkDefinition(v.rep, v.opts.Point, def)
		v.bindService(def)
		for _, dep := range def.RequiredServices {
			d, err := v.resolveDependency(ctx, def, dep)
			if err != nil {
				return err
			}
			if d != nil {
				queue = append(queue, d)
			}
		}
	}
	return nil
}

// lookup asks the resolver and keeps only well-formed matches of org, url
// and arch pattern, with their parsed versions. A failed lookup is reported
// against ref and returns ok false.
func (v *validation) lookup(ctx context.Context, ref agreement.ServiceRef) (defs []*ServiceDefinition, versions []ohversion.Version, ok bool, err error) {
	q := ServiceQuery{Org: ref.Org, URL: ref.URL, Arch: ref.Arch}
	if q.Arch == ohversion.AnyArch {
		q.Arch = ""
	}
	found, err := v.opts.Resolver.ServiceVersions(ctx, q)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, nil, false, ctxErr
	}
	if err != nil {
		v.add(CodeServiceUnresolved, Problem{Service: ref}, "Service %s could not be looked up: %s.", refString(ref), err)
		return nil, nil, false, nil
	}
	for _, d := range found {
		if d == nil || d.Org != ref.Org || d.URL != ref.URL || !ohversion.ArchMatches(ref.Arch, d.Arch) {
			continue
		}
		ver, err := ohversion.Parse(d.Version)
		if err != nil {
			v.log.Debug("ignoring service definition with invalid version", "service", refString(d.ref()), "error", err)
			continue
		}
		defs, versions = append(defs, d), append(versions, ver)
	}
	return defs, versions, true, nil
}

// resolveTop finds the definitions a top-level reference deploys: per
// architecture, the exact version asked for, or the highest one.
func (v *validation) resolveTop(ctx context.Context, ref agreement.ServiceRef) ([]*ServiceDefinition, error) {
	ref.Container = ""
	if ref.Org == "" || ref.URL == "" {
		v.add(CodeServiceUnresolved, Problem{Service: ref}, "A deployed service has no organisation or URL.")
		return nil, nil
	}
	want := ohversion.Range{}
	if ref.Version != "" {
		ver, err := ohversion.Parse(ref.Version)
		if err != nil {
			v.add(CodeServiceUnresolved, Problem{Service: ref}, "Deployed service %s has an invalid version: %s.", refString(ref), err)
			return nil, nil
		}
		want = ohversion.Exact(ver)
	}
	defs, versions, ok, err := v.lookup(ctx, ref)
	if !ok {
		return nil, err
	}
	best := highestPerArch(defs, versions, want)
	if len(best) == 0 {
		v.add(CodeServiceUnresolved, Problem{Service: ref}, "Deployed service %s was not found.", refString(ref))
	}
	return best, nil
}

// resolveDependency finds the highest version of dep within its range, for
// the parent's architecture when dep names none; nil when there is none.
func (v *validation) resolveDependency(ctx context.Context, parent *ServiceDefinition, dep ServiceDependency) (*ServiceDefinition, error) {
	ref := agreement.ServiceRef{Org: dep.Org, URL: dep.URL, Arch: dep.Arch, Version: dep.rangeText()}
	if ref.Arch == "" {
		ref.Arch = parent.Arch
	}
	p := Problem{Service: ref}
	if ref.Org == "" || ref.URL == "" {
		v.add(CodeServiceUnresolved, p, "Service %s requires a service without organisation or URL.", refString(parent.ref()))
		return nil, nil
	}
	var want ohversion.Range
	if ref.Version != "" {
		r, err := ohversion.ParseRange(ref.Version)
		if err != nil {
			v.add(CodeServiceUnresolved, p, "Service %s requires %s/%s with an invalid version range: %s.", refString(parent.ref()), ref.Org, ref.URL, err)
			return nil, nil
		}
		want = r
	}
	defs, versions, ok, err := v.lookup(ctx, ref)
	if !ok {
		return nil, err
	}
	best := highestPerArch(defs, versions, want)
	if len(best) == 0 {
		v.add(CodeServiceUnresolved, p, "Service %s requires %s/%s version %s for %s, and no such version was found.", refString(parent.ref()), ref.Org, ref.URL, want, ref.Arch)
		return nil, nil
	}
	return best[0], nil
}

// highestPerArch keeps, per architecture, the highest version within want,
// in the order architectures first appear.
func highestPerArch(defs []*ServiceDefinition, versions []ohversion.Version, want ohversion.Range) []*ServiceDefinition {
	best := map[string]int{}
	var order []string
	for i, d := range defs {
		if !want.Contains(versions[i]) {
			continue
		}
		j, seen := best[d.Arch]
		if !seen {
			order = append(order, d.Arch)
		}
		if !seen || versions[i].Compare(versions[j]) > 0 {
			best[d.Arch] = i
		}
	}
	out := make([]*ServiceDefinition, 0, len(order))
	for _, a := range order {
		out = append(out, defs[best[a]])
	}
	return out
}

// place is where a bound secret is delivered: a device container, or the
// cluster deployment (cluster true, container "").
type place struct {
	container string
	cluster   bool
	format    string
}

// placesFor returns where a binding of a secret declared by decls goes,
// with serviceContainer narrow ("" for none): each declaring container
// (narrow keeps only that one), the cluster deployment when it declares the
// secret and nothing narrows, and for a service-level (design form)
// declaration the narrowed or only container. needContainer is true when
// only a service-level declaration applies and the service has several
// containers to choose from; declared is false when nothing declares the
// secret within the narrowing.
func placesFor(containers []string, decls []declaration, narrow string) (places []place, needContainer, declared bool) {
	var service *declaration
	for i, d := range decls {
		switch d.place {
		case declContainer:
			if narrow == "" || narrow == d.container {
				places = append(places, place{container: d.container, format: d.secret.format()})
			}
		case declCluster:
			if narrow == "" {
				places = append(places, place{cluster: true, format: d.secret.format()})
			}
		case declService:
			service = &decls[i]
		}
	}
	if service == nil {
		return places, false, len(places) > 0
	}
	target := narrow
	if target == "" && len(containers) == 1 {
		target = containers[0]
	}
	if target == "" {
		// No container to choose (a cluster-only service, reported as such)
		// or several: one is needed unless a container declares it too.
		return places, len(containers) > 1 && len(places) == 0, true
	}
	if !slices.ContainsFunc(places, func(p place) bool { return !p.cluster && p.container == target }) {
		places = append(places, place{container: target, format: service.secret.format()})
	}
	return places, false, true
}

// bindService applies the entries that select def: where each bound secret
// goes, first-wins duplicates and conflicts, and finally the declared
// secrets left unbound.
func (v *validation) bindService(def *ServiceDefinition) {
	ver, err := ohversion.Parse(def.Version)
	if err != nil {
		return // lookup only yields parsable versions
	}
	sb := &serviceBinder{v: v, ref: def.ref(), containers: def.containers(), decls: def.declarations(),
		byName: map[string][]declaration{}, bound: map[slot]boundTo{}, attempted: map[string]bool{}}
	for _, d := range sb.decls {
		sb.byName[d.name] = append(sb.byName[d.name], d)
	}
	for _, e := range v.entries {
		if !e.selects(def) {
			continue
		}
		e.selected = true
		if !e.usable || !e.versions.Contains(ver) {
			continue
		}
		e.used = true
		sb.apply(e)
	}
	sb.reportUnbound(def.kind() == deployCluster)
}

// slot is where one bound secret goes: a container's or the cluster
// deployment's secret of that name.
type slot struct {
	place
	name string
}

// boundTo is the vault secret a slot is bound to, and by which entry.
type boundTo struct {
	vault string
	entry int
}

// serviceBinder is bindService's work on one service definition.
type serviceBinder struct {
	v          *validation
	ref        agreement.ServiceRef
	containers []string
	decls      []declaration
	byName     map[string][]declaration // the declarations of each secret name
	bound      map[slot]boundTo
	attempted  map[string]bool // secrets an entry addressed but could not place
}

// apply places the bindings of one entry that selects the service.
func (sb *serviceBinder) apply(e *entry) {
	p := Problem{Service: sb.ref, Binding: e.index}
	narrow := e.sb.ServiceContainer
	if narrow != "" && !slices.Contains(sb.containers, narrow) {
		p.Service.Container = narrow
		sb.v.add(CodeContainerUnknown, p, "secretBinding entry %d names container %q, which service %s does not have (containers: %s).", e.index, narrow, refString(sb.ref), listOrNone(sb.containers))
		for i, b := range e.sb.Bindings {
			if len(sb.byName[b.ServiceSecret]) > 0 {
				e.needed[i], sb.attempted[b.ServiceSecret] = true, true
			}
		}
		return
	}
	requiredReported := false
	for i, b := range e.sb.Bindings {
		if b.ServiceSecret == "" || safename.Check(b.ServiceSecret) != nil {
			continue // reported with the entry
		}
		bp := p
		bp.ServiceSecret, bp.VaultSecret = b.ServiceSecret, b.VaultSecret
		places, needContainer, declared := placesFor(sb.containers, sb.byName[b.ServiceSecret], narrow)
		if !declared {
			if e.undeclared[i] == nil {
				bp.Service.Container = narrow
				e.undeclared[i] = &bp
			}
			e.undeclaredIn[i]++
			continue
		}
		e.needed[i] = true
		if len(places) == 0 {
			sb.attempted[b.ServiceSecret] = true // no container to deliver it to: reported as such, or moot
		}
		if needContainer && !requiredReported {
			sb.v.add(CodeContainerRequired, p, "secretBinding entry %d has no serviceContainer, and service %s has several containers (%s) for the secrets declared at the top of its definition.", e.index, refString(sb.ref), listOrNone(sb.containers))
			requiredReported = true
		}
		for _, pl := range places {
			sb.bind(e, i, bp, pl)
		}
	}
}

// bind binds binding i of entry e in one place, unless an earlier entry
// bound it there (a duplicate, or a conflict the earlier one wins).
func (sb *serviceBinder) bind(e *entry, i int, bp Problem, pl place) {
	b := e.sb.Bindings[i]
	tp := bp
	tp.Service.Container = pl.container
	key := slot{place{container: pl.container, cluster: pl.cluster}, b.ServiceSecret}
	if prev, dup := sb.bound[key]; dup {
		if prev.vault == b.VaultSecret {
			sb.v.add(CodeBindingDuplicate, tp, "secretBinding entries %d and %d both bind secret %q of %s to vault secret %q.", prev.entry, e.index, b.ServiceSecret, placeRef(tp.Service, pl.cluster), b.VaultSecret)
		} else {
			sb.v.add(CodeBindingConflict, tp, "secretBinding entry %d binds secret %q of %s to vault secret %q, but entry %d already binds it to %q, which applies.", e.index, b.ServiceSecret, placeRef(tp.Service, pl.cluster), b.VaultSecret, prev.entry, prev.vault)
		}
		return
	}
	sb.bound[key] = boundTo{vault: b.VaultSecret, entry: e.index}
	if e.vault[i] != nil {
		sb.v.rep.Resolved = append(sb.v.rep.Resolved, ResolvedBinding{
			Service: tp.Service, ServiceSecret: b.ServiceSecret, Format: pl.format, VaultSecret: *e.vault[i],
			NodeLevel: e.sb.EnableNodeLevelSecrets, Binding: e.index,
		})
	}
}

// reportUnbound reports each declared secret no entry bound (or
// addressed).
func (sb *serviceBinder) reportUnbound(clusterOnly bool) {
	for _, d := range sb.decls {
		if safename.Check(d.name) != nil || sb.attempted[d.name] {
			continue // an unsafe name is reported as such and cannot be bound
		}
		var covered bool
		switch d.place {
		case declService:
			if clusterOnly {
				continue // reported as secrets_cluster_only; binding them is moot
			}
			for k := range sb.bound {
				covered = covered || (!k.cluster && k.name == d.name)
			}
		case declContainer:
			_, covered = sb.bound[slot{place{container: d.container}, d.name}]
		case declCluster:
			_, covered = sb.bound[slot{place{cluster: true}, d.name}]
		}
		if !covered {
			sb.v.add(CodeSecretUnbound, d.problem(sb.ref), "%s declares secret %q, and no secretBinding entry binds it.", d.where(sb.ref), d.name)
		}
	}
}

// placeRef writes a service (container) or its cluster deployment.
func placeRef(s agreement.ServiceRef, cluster bool) string {
	if cluster {
		return "the cluster deployment of " + refString(s)
	}
	return refString(s)
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, ", ")
}

// existence is what a checker said about one vault secret.
type existence struct {
	exists bool
	code   Code // "" when the check worked; the problem code otherwise
	err    error
}

// checkExistence asks the checker about each distinct candidate vault
// secret once and reports every binding whose secret is missing, falls back
// from the node-level secret, or could not be checked.
func (v *validation) checkExistence(ctx context.Context) error {
	results := map[string]existence{}
	var stopped *existence // set once the store is unavailable or forbidden
	check := func(name VaultSecretName) (existence, error) {
		key := name.String()
		if r, done := results[key]; done {
			return r, nil
		}
		if stopped != nil {
			results[key] = *stopped
			return *stopped, nil
		}
		exists, err := v.opts.Checker.SecretExists(ctx, name)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return existence{}, ctxErr
		}
		r := existence{exists: exists, err: err}
		switch {
		case err == nil:
		case errors.Is(err, edgesecrets.ErrPermission):
			r.code = CodeStoreForbidden
		case errors.Is(err, edgesecrets.ErrInvalid):
			r.code = CodeVaultSecretInvalid
		default:
			r.code = CodeStoreUnavailable
		}
		results[key] = r
		if r.code == CodeStoreForbidden || r.code == CodeStoreUnavailable {
			stopped = &existence{code: r.code, err: fmt.Errorf("not checked after an earlier check failed: %w", err)}
		}
		v.log.Debug("vault secret checked", "vaultSecret", key, "exists", exists, "error", err)
		return r, nil
	}
	keys := map[string][]string{}
	for _, rb := range v.rep.Resolved {
		cands := candidates(rb.VaultSecret, rb.NodeLevel, v.opts.Node)
		found, failed := -1, existence{}
		var failedName VaultSecretName
		for i, c := range cands {
			r, err := check(c)
			if err != nil {
				return err
			}
			if r.code != "" {
				failed, failedName = r, c
				break
			}
			if r.exists {
				found = i
				break
			}
		}
		p := Problem{Service: rb.Service, Binding: rb.Binding, ServiceSecret: rb.ServiceSecret, VaultSecret: rb.VaultSecret.String()}
		of := placeRef(rb.Service, rb.Service.Container == "") // only the cluster deployment has none
		switch {
		case failed.code == CodeVaultSecretInvalid:
			v.add(failed.code, p, "The store refused vault secret name %q, bound to secret %q of %s: %s.", failedName.String(), rb.ServiceSecret, of, failed.err)
		case failed.code == CodeStoreForbidden:
			v.add(failed.code, p, "The store refused to say whether vault secret %q, bound to secret %q of %s, exists: %s.", failedName.String(), rb.ServiceSecret, of, failed.err)
		case failed.code == CodeStoreUnavailable:
			v.add(failed.code, p, "Could not check vault secret %q, bound to secret %q of %s, because the store is unavailable: %s.", failedName.String(), rb.ServiceSecret, of, failed.err)
		case found < 0 && len(cands) > 1:
			v.add(CodeVaultSecretMissing, p, "Neither vault secret %q nor %q, bound to secret %q of %s, exists.", cands[0].String(), cands[1].String(), rb.ServiceSecret, of)
		case found < 0:
			v.add(CodeVaultSecretMissing, p, "Vault secret %q, bound to secret %q of %s, does not exist.", p.VaultSecret, rb.ServiceSecret, of)
		case found > 0:
			v.add(CodeNodeSecretFallback, p, "Node-level vault secret %q, bound to secret %q of %s, does not exist; %q is used instead.", cands[0].String(), rb.ServiceSecret, of, cands[found].String())
		}
		if found >= 0 {
			if err := v.checkFormat(ctx, rb, cands[found], keys); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkFormat reports a binding whose vault secret name (found to exist)
// has content its declared format cannot render, when the checker can say
// which keys the secret has (KeyChecker). keys caches the answers by name;
// a check that fails is left out (existence was checked).
func (v *validation) checkFormat(ctx context.Context, rb ResolvedBinding, name VaultSecretName, keys map[string][]string) error {
	kc, ok := v.opts.Checker.(KeyChecker)
	switch rb.Format {
	case agreement.FormatJSON, agreement.FormatRaw, agreement.FormatValueOnly:
	default:
		return nil // reported as CodeSecretFormatInvalid
	}
	if !ok || !v.opts.CheckFormats {
		return nil
	}
	k, done := keys[name.String()]
	if !done {
		var err error
		k, err = kc.SecretKeys(ctx, name)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			v.log.Debug("vault secret keys not checked", "vaultSecret", name.String(), "error", err)
			k = nil
		}
		keys[name.String()] = k
	}
	if k == nil {
		return nil
	}
	if _, _, err := agreement.ContentKey(rb.Format, k); err != nil {
		p := Problem{Service: rb.Service, Binding: rb.Binding, ServiceSecret: rb.ServiceSecret, VaultSecret: rb.VaultSecret.String()}
		v.add(CodeSecretFormatMismatch, p, "Vault secret %q, bound to secret %q of %s, cannot be written in the secret's format %q: %s; the agreement waits until the secret is rewritten (a key and a value, as hzn writes it) or bound with another format.",
			name.String(), rb.ServiceSecret, placeRef(rb.Service, rb.Service.Container == ""), rb.Format, err)
	}
	return nil
}
