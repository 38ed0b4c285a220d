package binding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// ServiceQuery asks a Resolver for the versions of one service.
type ServiceQuery struct {
	Org string
	URL string
	// Arch is the architecture wanted; "" means any.
	Arch string
}

// Resolver supplies service definitions: an exchange client, or a Catalog
// of local files.
type Resolver interface {
	// ServiceVersions returns every known version of the service (for the
	// architecture asked, or all of them). No match is an empty result, not
	// an error; an error means the lookup itself failed.
	ServiceVersions(ctx context.Context, q ServiceQuery) ([]*ServiceDefinition, error)
}

// ExistenceChecker says whether vault secrets exist. StoreChecker asks a
// secretstore.Store; Client asks the agbot API. The organisation is part of
// the checker (the store adapter is built for one, the agbot takes it from
// the caller's credentials).
type ExistenceChecker interface {
	// SecretExists reports whether the secret exists. Errors carry the
	// secretstore kinds: ErrUnavailable, ErrPermission, ErrInvalid.
	SecretExists(ctx context.Context, name VaultSecretName) (bool, error)
}

// Options configure Validate.
type Options struct {
	// Resolver supplies the service definitions. Required.
	Resolver Resolver
	// Checker checks that bound vault secrets exist. When nil, existence is
	// not checked and Report.ExistenceChecked is false.
	Checker ExistenceChecker
	// Logger receives debug lines naming services, secrets and bindings
	// (never values). Default: discard.
	Logger *slog.Logger
}

// Validate checks a pattern's or deployment policy's secret bindings against
// the services it deploys and their whole dependency trees, and returns a
// report of every problem (see the Code constants). It is the check behind
// deploycheck, adding a deployment policy and publishing a pattern; build the
// Target with Pattern.Target or DeploymentPolicy.Target.
//
// Problems go into the report; the error is non-nil only when ctx ends or
// opts lack a Resolver. Existence is checked once per distinct vault secret
// with the checker; after the store reports itself unavailable (or
// forbidden) the remaining secrets are reported as not checked rather than
// asked for one by one.
func Validate(ctx context.Context, t Target, opts Options) (*Report, error) {
	if opts.Resolver == nil {
		return nil, errors.New("binding: Validate needs a Resolver")
	}
	v := &validation{opts: opts, log: opts.Logger, rep: &Report{Problems: []Problem{}}, visited: map[ServiceRef]bool{}}
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
			v.rep.add(CodeBindingUnused, e.problem(), "secretBinding entry %d matches no service deployed here or among its dependencies, so it is not needed.", e.index)
		}
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
	v.log.Debug("secret bindings validated", "services", len(v.rep.Services), "resolved", len(v.rep.Resolved),
		"errors", len(v.rep.Errors()), "warnings", len(v.rep.Warnings()))
	return v.rep, nil
}

// ValidateService checks a service definition on its own, as publishing a
// service does: every secret name is a single safe path element, every
// format is known, and secrets are only declared where device deployments
// can receive them (cluster-only: error; device and cluster: warning).
func ValidateService(def *ServiceDefinition) *Report {
	rep := &Report{Problems: []Problem{}, Services: []ServiceRef{def.Ref()}}
	checkDefinition(rep, def)
	return rep
}

// checkDefinition reports the service-level rules for def.
func checkDefinition(rep *Report, def *ServiceDefinition) {
	ref := def.Ref()
	for _, name := range slices.Sorted(maps.Keys(def.Secrets)) {
		p := Problem{Service: ref, ServiceSecret: name}
		if err := safename.Check(name); err != nil {
			rep.add(CodeSecretNameInvalid, p, "Service %s declares secret %q, whose name %s; it must be a single safe file name.", refString(ref), name, err)
		}
		switch f := def.Secrets[name].Format; f {
		case "", FormatJSON, FormatRaw:
		default:
			rep.add(CodeSecretFormatInvalid, p, "Service %s declares secret %q with format %q; the format must be %q or %q.", refString(ref), name, f, FormatJSON, FormatRaw)
		}
	}
	if len(def.Secrets) == 0 {
		return
	}
	switch def.DeploymentKind() {
	case DeployCluster:
		rep.add(CodeSecretsClusterOnly, Problem{Service: ref}, "Service %s declares secrets but has only a cluster deployment; secrets are supported on edge devices only.", refString(ref))
	case DeployMixed:
		rep.add(CodeSecretsMixedDeployment, Problem{Service: ref}, "Service %s declares secrets and has a cluster deployment; only its device deployment will receive them.", refString(ref))
	}
}

// entry is a secretBinding entry with its selector parsed.
type entry struct {
	index    int // 1-based
	sb       *SecretBinding
	usable   bool // selector valid: can match services
	versions VersionRange
	vault    []*VaultSecretName // parsed vault name per binding; nil when invalid
	used     bool
}

func (e *entry) problem() Problem {
	return Problem{Binding: e.index, Service: ServiceRef{
		Org: e.sb.ServiceOrgid, URL: e.sb.ServiceURL, Arch: e.sb.ServiceArch,
		Version: e.sb.ServiceVersionRange, Container: e.sb.ServiceContainer,
	}}
}

type validation struct {
	opts    Options
	log     *slog.Logger
	rep     *Report
	entries []*entry
	visited map[ServiceRef]bool
}

// checkEntry reports the problems an entry has on its own.
func (v *validation) checkEntry(index int, sb *SecretBinding) *entry {
	e := &entry{index: index, sb: sb, vault: make([]*VaultSecretName, len(sb.Bindings))}
	p := e.problem()
	e.usable = true
	if sb.ServiceOrgid == "" {
		e.usable = false
		v.rep.add(CodeFieldMissing, p, "secretBinding entry %d has no serviceOrgid.", index)
	}
	if sb.ServiceURL == "" {
		e.usable = false
		v.rep.add(CodeFieldMissing, p, "secretBinding entry %d has no serviceUrl.", index)
	}
	if len(sb.Bindings) == 0 {
		v.rep.add(CodeFieldMissing, p, "secretBinding entry %d binds no secrets.", index)
	}
	if err := checkArch(sb.ServiceArch); err != nil {
		e.usable = false
		v.rep.add(CodeArchInvalid, p, "secretBinding entry %d has an invalid serviceArch: %s.", index, err)
	}
	if sb.ServiceVersionRange != "" {
		r, err := ParseVersionRange(sb.ServiceVersionRange)
		if err != nil {
			e.usable = false
			v.rep.add(CodeVersionRangeInvalid, p, "secretBinding entry %d has an invalid serviceVersionRange: %s.", index, err)
		}
		e.versions = r
	}
	for i, b := range sb.Bindings {
		bp := p
		bp.ServiceSecret, bp.VaultSecret = b.ServiceSecret, b.VaultSecret
		switch err := safename.Check(b.ServiceSecret); {
		case b.ServiceSecret == "":
			v.rep.add(CodeFieldMissing, bp, "secretBinding entry %d binds vault secret %q to an empty service secret name.", index, b.VaultSecret)
		case err != nil:
			v.rep.add(CodeSecretNameInvalid, bp, "secretBinding entry %d binds service secret %q, whose name %s; it must be a single safe file name.", index, b.ServiceSecret, err)
		}
		if b.VaultSecret == "" {
			v.rep.add(CodeFieldMissing, bp, "secretBinding entry %d binds service secret %q to no vault secret.", index, b.ServiceSecret)
			continue
		}
		name, err := ParseVaultSecretName(b.VaultSecret)
		if err != nil {
			v.rep.add(CodeVaultSecretInvalid, bp, "secretBinding entry %d binds service secret %q to an invalid vault secret name: %s.", index, b.ServiceSecret, err)
			continue
		}
		e.vault[i] = &name
	}
	return e
}

// walk visits the top-level services and their dependency trees breadth first.
func (v *validation) walk(ctx context.Context, top []ServiceRef) error {
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
		ref := def.Ref()
		if v.visited[ref] {
			continue
		}
		v.visited[ref] = true
		v.rep.Services = append(v.rep.Services, ref)
		checkDefinition(v.rep, def)
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
func (v *validation) lookup(ctx context.Context, ref ServiceRef) (defs []*ServiceDefinition, versions []Version, ok bool, err error) {
	q := ServiceQuery{Org: ref.Org, URL: ref.URL, Arch: ref.Arch}
	if q.Arch == AnyArch {
		q.Arch = ""
	}
	found, err := v.opts.Resolver.ServiceVersions(ctx, q)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, nil, false, ctxErr
	}
	if err != nil {
		v.rep.add(CodeServiceUnresolved, Problem{Service: ref}, "Service %s could not be looked up: %s.", refString(ref), err)
		return nil, nil, false, nil
	}
	for _, d := range found {
		if d == nil || d.Org != ref.Org || d.URL != ref.URL || !ArchMatches(ref.Arch, d.Arch) {
			continue
		}
		ver, err := ParseVersion(d.Version)
		if err != nil {
			v.log.Debug("ignoring service definition with invalid version", "service", refString(d.Ref()), "error", err)
			continue
		}
		defs, versions = append(defs, d), append(versions, ver)
	}
	return defs, versions, true, nil
}

// resolveTop finds the definitions a top-level reference deploys: per
// architecture, the exact version asked for, or the highest one.
func (v *validation) resolveTop(ctx context.Context, ref ServiceRef) ([]*ServiceDefinition, error) {
	ref.Container = ""
	if ref.Org == "" || ref.URL == "" {
		v.rep.add(CodeServiceUnresolved, Problem{Service: ref}, "A deployed service has no organisation or URL.")
		return nil, nil
	}
	want := VersionRange{}
	if ref.Version != "" {
		ver, err := ParseVersion(ref.Version)
		if err != nil {
			v.rep.add(CodeServiceUnresolved, Problem{Service: ref}, "Deployed service %s has an invalid version: %s.", refString(ref), err)
			return nil, nil
		}
		want = exactVersion(ver)
	}
	defs, versions, ok, err := v.lookup(ctx, ref)
	if !ok {
		return nil, err
	}
	best := highestPerArch(defs, versions, want)
	if len(best) == 0 {
		v.rep.add(CodeServiceUnresolved, Problem{Service: ref}, "Deployed service %s was not found.", refString(ref))
	}
	return best, nil
}

// resolveDependency finds the highest version of dep within its range, for
// the parent's architecture when dep names none; nil when there is none.
func (v *validation) resolveDependency(ctx context.Context, parent *ServiceDefinition, dep ServiceDependency) (*ServiceDefinition, error) {
	ref := ServiceRef{Org: dep.Org, URL: dep.URL, Arch: dep.Arch, Version: dep.rangeText()}
	if ref.Arch == "" {
		ref.Arch = parent.Arch
	}
	p := Problem{Service: ref}
	if ref.Org == "" || ref.URL == "" {
		v.rep.add(CodeServiceUnresolved, p, "Service %s requires a service without organisation or URL.", refString(parent.Ref()))
		return nil, nil
	}
	var want VersionRange
	if ref.Version != "" {
		r, err := ParseVersionRange(ref.Version)
		if err != nil {
			v.rep.add(CodeServiceUnresolved, p, "Service %s requires %s/%s with an invalid version range: %s.", refString(parent.Ref()), ref.Org, ref.URL, err)
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
		v.rep.add(CodeServiceUnresolved, p, "Service %s requires %s/%s version %s for %s, and no such version was found.", refString(parent.Ref()), ref.Org, ref.URL, want, ref.Arch)
		return nil, nil
	}
	return best[0], nil
}

// highestPerArch keeps, per architecture, the highest version within want,
// in the order architectures first appear.
func highestPerArch(defs []*ServiceDefinition, versions []Version, want VersionRange) []*ServiceDefinition {
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

// bindService applies the matching entries to def: container choice,
// declared secrets, conflicts, and finally the declared secrets left unbound.
func (v *validation) bindService(def *ServiceDefinition) {
	ref := def.Ref()
	ver, err := ParseVersion(def.Version)
	if err != nil {
		return // lookup only yields parsable versions
	}
	containers := def.Containers()
	type boundTo struct {
		vault string
		entry int
	}
	bound := map[[2]string]boundTo{} // [container, service secret]
	covered := map[string]bool{}     // declared secrets some entry addresses
	for _, e := range v.entries {
		sb := e.sb
		if !e.usable || sb.ServiceOrgid != def.Org || sb.ServiceURL != def.URL || !ArchMatches(sb.ServiceArch, def.Arch) || !e.versions.Contains(ver) {
			continue
		}
		e.used = true
		p := Problem{Service: ref, Binding: e.index}
		container := sb.ServiceContainer
		containerOK := true
		switch {
		case container != "" && !slices.Contains(containers, container):
			p.Service.Container = container
			v.rep.add(CodeContainerUnknown, p, "secretBinding entry %d names container %q, which service %s does not have (containers: %s).", e.index, container, refString(ref), listOrNone(containers))
			containerOK = false
		case container == "" && len(containers) > 1:
			v.rep.add(CodeContainerRequired, p, "secretBinding entry %d has no serviceContainer, and service %s has several containers (%s).", e.index, refString(ref), listOrNone(containers))
			containerOK = false
		case container == "" && len(containers) == 1:
			container = containers[0]
		}
		p.Service.Container = container
		for i, b := range sb.Bindings {
			if b.ServiceSecret == "" || safename.Check(b.ServiceSecret) != nil {
				continue // reported with the entry
			}
			bp := p
			bp.ServiceSecret, bp.VaultSecret = b.ServiceSecret, b.VaultSecret
			decl, declared := def.Secrets[b.ServiceSecret]
			if !declared {
				v.rep.add(CodeSecretUndeclared, bp, "secretBinding entry %d binds secret %q, which service %s does not declare.", e.index, b.ServiceSecret, refString(ref))
				continue
			}
			covered[b.ServiceSecret] = true
			if !containerOK {
				continue
			}
			key := [2]string{container, b.ServiceSecret}
			if prev, dup := bound[key]; dup {
				if prev.vault == b.VaultSecret {
					v.rep.add(CodeBindingDuplicate, bp, "secretBinding entries %d and %d both bind secret %q of %s to vault secret %q.", prev.entry, e.index, b.ServiceSecret, refString(p.Service), b.VaultSecret)
				} else {
					v.rep.add(CodeBindingConflict, bp, "secretBinding entry %d binds secret %q of %s to vault secret %q, but entry %d already binds it to %q.", e.index, b.ServiceSecret, refString(p.Service), b.VaultSecret, prev.entry, prev.vault)
				}
				continue
			}
			bound[key] = boundTo{vault: b.VaultSecret, entry: e.index}
			if e.vault[i] != nil && len(containers) > 0 {
				format := decl.Format
				if format == "" {
					format = FormatJSON
				}
				v.rep.Resolved = append(v.rep.Resolved, ResolvedBinding{
					Service: p.Service, ServiceSecret: b.ServiceSecret, Format: format, VaultSecret: *e.vault[i], Binding: e.index,
				})
			}
		}
	}
	if def.DeploymentKind() == DeployCluster {
		return // reported as secrets_cluster_only; binding them is moot
	}
	for _, name := range slices.Sorted(maps.Keys(def.Secrets)) {
		if !covered[name] && safename.Check(name) == nil { // an unsafe name is reported as such and cannot be bound
			v.rep.add(CodeSecretUnbound, Problem{Service: ref, ServiceSecret: name}, "Service %s declares secret %q, and no secretBinding entry binds it.", refString(ref), name)
		}
	}
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

// checkExistence asks the checker about each distinct resolved vault secret
// once and reports every binding whose secret is missing or uncheckable.
func (v *validation) checkExistence(ctx context.Context) error {
	type outcome struct {
		code Code
		err  error
	}
	results := map[string]outcome{}
	var stopped *outcome // set once the store is unavailable or forbidden
	for _, rb := range v.rep.Resolved {
		name := rb.VaultSecret.String()
		if _, done := results[name]; done {
			continue
		}
		if stopped != nil {
			results[name] = *stopped
			continue
		}
		exists, err := v.opts.Checker.SecretExists(ctx, rb.VaultSecret)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		var o outcome
		switch {
		case err == nil && exists:
		case err == nil:
			o.code = CodeVaultSecretMissing
		case errors.Is(err, secretstore.ErrPermission):
			o = outcome{CodeStoreForbidden, err}
		case errors.Is(err, secretstore.ErrInvalid):
			o = outcome{CodeVaultSecretInvalid, err}
		default:
			o = outcome{CodeStoreUnavailable, err}
		}
		results[name] = o
		if o.code == CodeStoreForbidden || o.code == CodeStoreUnavailable {
			stopped = &outcome{o.code, fmt.Errorf("not checked after an earlier check failed: %w", err)}
		}
		v.log.Debug("vault secret checked", "vaultSecret", name, "exists", exists, "error", err)
	}
	for _, rb := range v.rep.Resolved {
		o := results[rb.VaultSecret.String()]
		p := Problem{Service: rb.Service, Binding: rb.Binding, ServiceSecret: rb.ServiceSecret, VaultSecret: rb.VaultSecret.String()}
		switch o.code {
		case CodeVaultSecretMissing:
			v.rep.add(o.code, p, "Vault secret %q, bound to secret %q of %s, does not exist.", p.VaultSecret, rb.ServiceSecret, refString(rb.Service))
		case CodeVaultSecretInvalid:
			v.rep.add(o.code, p, "The store refused vault secret name %q, bound to secret %q of %s: %s.", p.VaultSecret, rb.ServiceSecret, refString(rb.Service), o.err)
		case CodeStoreForbidden:
			v.rep.add(o.code, p, "The store refused to say whether vault secret %q, bound to secret %q of %s, exists: %s.", p.VaultSecret, rb.ServiceSecret, refString(rb.Service), o.err)
		case CodeStoreUnavailable:
			v.rep.add(o.code, p, "Could not check vault secret %q, bound to secret %q of %s, because the store is unavailable: %s.", p.VaultSecret, rb.ServiceSecret, refString(rb.Service), o.err)
		}
	}
	return nil
}
