package agentapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/ohsecret"
)

// Instance says which service instance receives the secrets of one service
// (container) of a proposal, and how its files may be shared.
type Instance struct {
	// ID identifies the instance on this node: a single safe path element
	// (agreement.CheckSecretName) without a colon. It names the instance's directory and is
	// the user id of the instance's HTTP Basic credentials.
	ID string
	// GroupReadable makes the instance's directories 0750 and its files
	// 0440, owned by Group, so a container running as a non-root user in
	// that group can read its mount. Otherwise they are 0700 and 0400.
	GroupReadable bool
	// Group is the numeric group id used when GroupReadable is set.
	Group int
	// Files are per service secret name options of its file: owner,
	// group, mode, template (FileOptions). A name the proposal does not
	// carry is ignored. Checked with the instance (Check).
	Files map[string]FileOptions
}

// Instances maps each service (container) of a proposal, exactly as the
// proposal names it (agreement.ServiceSecrets.Service), to the instance
// that receives its secrets. Entries for services the proposal does not
// name are ignored.
type Instances map[agreement.ServiceRef]Instance

// ReplyFor turns the outcome of ApplyProposal or ApplyUpdate into the reply the
// agent sends back: accepted when err is nil; otherwise rejected, with err's
// sentence as the reason when the message itself was at fault (errors
// matching edgesecrets.ErrInvalid, ErrNotFound or ErrConflict) and a generic
// reason for local failures, whose details belong in the agent's log.
//
// A rejection because a template failed (ErrTemplateFailed) has a reason
// starting with ReasonTemplateFailed and a colon.
func ReplyFor(agreementID string, err error) agreement.Reply {
	r := agreement.Reply{Version: 1, AgreementID: agreementID, Accepted: err == nil, Unknown: errors.Is(err, errUnknownAgreement)}
	switch {
	case err == nil:
	case errors.Is(err, ErrTemplateFailed):
		r.Reason = ReasonTemplateFailed + ": " + err.Error()
	case errors.Is(err, edgesecrets.ErrInvalid), errors.Is(err, edgesecrets.ErrNotFound), errors.Is(err, edgesecrets.ErrConflict):
		r.Reason = err.Error()
	default:
		r.Reason = "the agent could not store the secrets"
	}
	return r
}

// errUnknownAgreement: a secrets update of an agreement no instance holds
// (the agent's files were lost, its keys kept). Its reply says so
// (agreement.Reply.Unknown) and the agbot proposes the agreement again.
var errUnknownAgreement = errors.New("no instance holds secrets of agreement")

// rendered is one secret file to write: its name, content and content hash.
type rendered struct {
	name    string
	content []byte
	sum     string
	// single: the file holds one value (formats raw and value_only), and
	// ohKey is the Open Horizon key delivered with it (ohKeyOf).
	single bool
	ohKey  string
}

func render(instance, name string, d agreement.SecretDetails, o FileOptions) (rendered, error) {
	var content []byte
	var err error
	if o.templated() {
		content, err = renderTemplated(instance, name, d, o)
	} else {
		content, err = renderSecret(name, d)
	}
	if err != nil {
		return rendered{}, err
	}
	sum := sha256.Sum256(content)
	r := rendered{name: name, content: content, sum: hex.EncodeToString(sum[:])}
	r.ohKey, r.single = ohKeyOf(d)
	return r, nil
}

// ohKeyOf returns, for a secret whose file holds one value, the key the
// Open Horizon profile answers with it: the "key" of a secret written the
// Open Horizon way ({"key","value"}), or the name of a one-key secret's
// key, as the agbot's secrets-manager API maps them (ohsecret.FromData).
// single is false for a JSON-format secret, whose file holds every key.
func ohKeyOf(d agreement.SecretDetails) (key string, single bool) {
	k, single, err := agreement.ContentKey(d.Format, d.Data.Keys())
	switch {
	case err != nil || !single:
		return "", false
	case k == ohsecret.ValueMember:
		return string(d.Data[ohsecret.KeyMember]), true
	}
	return k, true
}

// plan is the validated work of an apply for one instance.
type plan struct {
	meta  *metadata // the instance's metadata after the apply (a fresh copy)
	seq   uint64    // the envelope sequence of the message applied, or 0
	isNew bool
	// regroup: a re-applied proposal changes the instance's group settings.
	regroup bool
	// respec: the names whose file options a re-applied proposal changes
	// (rewritten even when their content is unchanged).
	respec map[string]bool
	files  []rendered // sorted by name
	drop   []string   // names no longer in a re-applied proposal
}

// ApplyProposal stores the secrets of a proposal: for each service of p,
// the instance instances maps it to gets a directory with one file per
// service secret name. Nothing is written unless the whole proposal is
// valid; the error then lists every problem.
//
// Applying a proposal again for the same agreement (a retransmission) is
// idempotent: unchanged files are not rewritten, changed ones are, names no
// longer present are wiped, and the updated/acknowledged names of the
// remaining ones are kept. An instance id that holds another agreement's or
// another service's secrets is refused (edgesecrets.ErrConflict).
//
// It returns, per instance id, the service secret names whose files it
// wrote (sorted); files whose content was unchanged are not listed. Should
// the disk fail part way, what was written stays recorded (and listed) and
// the error is returned: apply the proposal again, or remove its instances
// with RemoveAgreement.
func (s *Store) ApplyProposal(ctx context.Context, p agreement.Proposal, instances Instances) (written map[string][]string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyProposal(ctx, p, instances, 0)
}

// applyProposal is ApplyProposal with s.mu held; seq, when not 0, is the
// proposal's envelope sequence, recorded in each instance's metadata.
func (s *Store) applyProposal(ctx context.Context, p agreement.Proposal, instances Instances, seq uint64) (map[string][]string, error) {
	plans, err := s.planProposal(p, instances)
	if err != nil {
		return nil, fmt.Errorf("agentapi: proposal of agreement %s rejected: %w", quoteName(p.AgreementID), err)
	}
	for _, pl := range plans {
		pl.seq = seq
	}
	changes, err := s.execute(ctx, plans, false)
	if err != nil {
		return changes, fmt.Errorf("agentapi: applying the proposal of agreement %s: %w", quoteName(p.AgreementID), err)
	}
	s.log.Info("proposal applied", "agreement", p.AgreementID, "instances", len(plans), "written", changes)
	return changes, nil
}

func (s *Store) planProposal(p agreement.Proposal, instances Instances) ([]*plan, error) {
	if p.AgreementID == "" {
		return nil, fmt.Errorf("%w: the agreement id is empty", edgesecrets.ErrInvalid)
	}
	var errs []error
	byRef := make(map[agreement.ServiceRef]bool)
	byID := make(map[string]*plan)
	for _, ss := range p.Services {
		svc := serviceName(ss.Service)
		if byRef[ss.Service] {
			errs = append(errs, fmt.Errorf("%w: service %s is listed twice", edgesecrets.ErrInvalid, svc))
			continue
		}
		byRef[ss.Service] = true
		inst, ok := instances[ss.Service]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: no instance was given for service %s", edgesecrets.ErrInvalid, svc))
			continue
		}
		if err := inst.Check(); err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", svc, err))
			continue
		}
		if _, dup := byID[inst.ID]; dup {
			errs = append(errs, fmt.Errorf("%w: instance %s is given for more than one service", edgesecrets.ErrInvalid, quoteName(inst.ID)))
			continue
		}
		pl := &plan{meta: &metadata{
			Version: metadataVersion, ID: inst.ID, AgreementID: p.AgreementID, Service: ss.Service,
			GroupReadable: inst.GroupReadable, Files: map[string]string{},
			Options: fileOptionsOf(inst.Files, ss.Secrets),
		}}
		if inst.GroupReadable {
			pl.meta.Group = inst.Group
		}
		if old := s.instances[inst.ID]; old == nil {
			pl.isNew = true
		} else if old.AgreementID != p.AgreementID || old.Service != ss.Service {
			errs = append(errs, fmt.Errorf("%w: instance %s already holds the secrets of agreement %s, service %s",
				edgesecrets.ErrConflict, quoteName(inst.ID), quoteName(old.AgreementID), serviceName(old.Service)))
			continue
		} else {
			pl.meta.Files = maps.Clone(old.Files)
			pl.meta.Keys = maps.Clone(old.Keys)
			pl.meta.Updated = slices.Clone(old.Updated)
			pl.meta.Acknowledged = slices.Clone(old.Acknowledged)
			pl.meta.Sequence, pl.meta.Sealed = old.Sequence, old.Sealed
			pl.regroup = old.GroupReadable != pl.meta.GroupReadable || old.Group != pl.meta.Group
			pl.respec = changedOptions(old.Options, pl.meta.Options)
			if len(pl.respec) > 0 && old.dirMode() != pl.meta.dirMode() {
				pl.regroup = true
			}
			for name := range old.Files {
				if _, ok := ss.Secrets[name]; !ok {
					pl.drop = append(pl.drop, name)
				}
			}
			slices.Sort(pl.drop)
		}
		byID[inst.ID] = pl
		var problems []error
		pl.files, problems = renderServiceSecrets(inst.ID, ss, pl.meta.Options, nil)
		s.warnTemplates(problems)
		errs = append(errs, problems...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return sortedPlans(byID), nil
}

// ApplyUpdate applies an agreement update of kind agreement.UpdateKindSecrets:
// for each service it names, the files of that service's instance whose
// content changed are rewritten and their names marked updated (GET /secrets
// lists them until acknowledged or the service restarts); unchanged files
// are left alone. Services are matched to instances by the agreement id and
// the exact ServiceRef of the proposal. An update naming an unknown kind,
// agreement, service or secret, or carrying an invalid secret, is rejected
// and nothing is written; the error lists every problem. It returns what
// it wrote as ApplyProposal does.
func (s *Store) ApplyUpdate(ctx context.Context, u agreement.Update) (written map[string][]string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyUpdate(ctx, u, 0)
}

// applyUpdate is ApplyUpdate with s.mu held; seq as in applyProposal.
func (s *Store) applyUpdate(ctx context.Context, u agreement.Update, seq uint64) (map[string][]string, error) {
	su, err := u.Secrets()
	if err != nil {
		return nil, fmt.Errorf("agentapi: update rejected: %w: %w", edgesecrets.ErrInvalid, err)
	}
	plans, err := s.planUpdate(u.AgreementID, su)
	if err != nil {
		return nil, fmt.Errorf("agentapi: update of agreement %s rejected: %w", quoteName(u.AgreementID), err)
	}
	for _, pl := range plans {
		pl.seq = seq
	}
	changes, err := s.execute(ctx, plans, true)
	if err != nil {
		return changes, fmt.Errorf("agentapi: applying the update of agreement %s: %w", quoteName(u.AgreementID), err)
	}
	s.log.Info("update applied", "agreement", u.AgreementID, "written", changes)
	return changes, nil
}

func (s *Store) planUpdate(agreementID string, su agreement.SecretsUpdate) ([]*plan, error) {
	owners := make(map[agreement.ServiceRef]*metadata)
	for _, m := range s.instances {
		if m.AgreementID == agreementID {
			owners[m.Service] = m
		}
	}
	if len(owners) == 0 {
		return nil, fmt.Errorf("%w: %w %s", edgesecrets.ErrNotFound, errUnknownAgreement, quoteName(agreementID))
	}
	var errs []error
	byID := make(map[string]*plan)
	for _, ss := range su.Services {
		svc := serviceName(ss.Service)
		m := owners[ss.Service]
		if m == nil {
			errs = append(errs, fmt.Errorf("%w: the agreement has no service %s", edgesecrets.ErrNotFound, svc))
			continue
		}
		// Update.Secrets has already refused a service listed twice.
		pl := &plan{meta: m.clone()}
		byID[m.ID] = pl
		var problems []error
		pl.files, problems = renderServiceSecrets(m.ID, ss, m.Options, func(name string) error {
			if _, ok := m.Files[name]; !ok {
				return fmt.Errorf("%w: service %s (instance %s) has no secret %s",
					edgesecrets.ErrNotFound, svc, quoteName(m.ID), quoteName(name))
			}
			return nil
		})
		s.warnTemplates(problems)
		errs = append(errs, problems...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return sortedPlans(byID), nil
}

// renderServiceSecrets checks the name of every secret of ss, and with
// known (when not nil) that the instance has it, and renders its file
// content. It returns the files in name order and every problem found.
func renderServiceSecrets(instance string, ss agreement.ServiceSecrets, opts map[string]FileOptions, known func(name string) error) ([]rendered, []error) {
	svc := serviceName(ss.Service)
	var files []rendered
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(ss.Secrets)) {
		if err := checkSecretName(name); err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", svc, err))
			continue
		}
		if known != nil {
			if err := known(name); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		r, err := render(instance, name, ss.Secrets[name], opts[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", svc, err))
			continue
		}
		files = append(files, r)
	}
	return files, errs
}

func sortedPlans(byID map[string]*plan) []*plan {
	plans := make([]*plan, 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		plans = append(plans, byID[id])
	}
	return plans
}

// execute carries out validated plans. markUpdated says whether written
// files count as updates (true for updates, false for proposals).
func (s *Store) execute(ctx context.Context, plans []*plan, markUpdated bool) (map[string][]string, error) {
	changes := map[string][]string{}
	for _, pl := range plans {
		if err := ctx.Err(); err != nil {
			return changes, err
		}
		written, err := s.executeOne(pl, markUpdated)
		if len(written) > 0 {
			changes[pl.meta.ID] = written
		}
		if err != nil {
			return changes, fmt.Errorf("instance %s: %w", quoteName(pl.meta.ID), err)
		}
	}
	return changes, nil
}

// executeOne applies one instance's plan: its directory and metadata
// made ready, its files dropped and written, then, whatever was written,
// even on failure, recorded (synced, sealed, metadata and status saved,
// watchers told). The write's error wins over the record's.
func (s *Store) executeOne(pl *plan, markUpdated bool) ([]string, error) {
	m := pl.meta
	dir := m.dir()
	advanced, err := s.prepareInstance(pl, dir)
	if err != nil {
		return nil, err
	}
	updatedBefore := slices.Clone(m.Updated)
	written, keysChanged, werr := s.writeFiles(pl, markUpdated)
	filesChanged := len(written) > 0 || len(pl.drop) > 0 || pl.isNew
	if !filesChanged && !pl.regroup && !advanced && !keysChanged {
		return written, werr
	}
	updated := func() bool {
		return markUpdated && len(written) > 0 || pl.regroup || !slices.Equal(updatedBefore, m.Updated)
	}
	rerr := s.recordApplied(m, dir, filesChanged, pl.isNew || pl.regroup, updated)
	if werr != nil {
		return written, werr
	}
	return written, rerr
}

// prepareInstance makes the instance's directory ready and takes the
// plan's sequence; a new instance's leftovers of an earlier failed apply
// are wiped first, and its metadata saved before any file is written, so
// that a crash leaves files Open knows about. It reports whether the
// sequence advanced.
func (s *Store) prepareInstance(pl *plan, dir string) (advanced bool, err error) {
	m := pl.meta
	if pl.isNew {
		if err := s.wipe(s.data, dir); err != nil {
			return false, err
		}
		for _, name := range pl.files {
			m.Files[name.name] = ""
		}
	}
	if err := makeDir(s.data, dir, m.dirMode(), m.gid()); err != nil {
		return false, err
	}
	advanced = pl.seq > m.Sequence
	if advanced {
		m.Sequence = pl.seq
	}
	if pl.isNew {
		if err := s.saveMetadata(m); err != nil {
			if werr := s.wipe(s.data, dir); werr != nil {
				// The next apply of the instance wipes the leftover first.
				s.log.Error("could not wipe the files of an instance whose metadata failed to save", "instance", m.ID, "dir", dir, "err", werr)
			}
			return advanced, err
		}
	}
	return advanced, nil
}

// writeFiles wipes the plan's dropped files and writes its changed ones,
// and returns the names written and whether an Open Horizon key changed
// (whether or not its file did).
func (s *Store) writeFiles(pl *plan, markUpdated bool) (written []string, keysChanged bool, err error) {
	m := pl.meta
	for _, name := range pl.drop {
		if err := s.wipe(s.data, m.file(name)); err != nil {
			return written, keysChanged, err
		}
		delete(m.Files, name)
		delete(m.Keys, name)
		m.Updated = removeName(m.Updated, name)
		m.Acknowledged = removeName(m.Acknowledged, name)
	}
	for _, f := range pl.files {
		rel := m.file(f.name)
		keysChanged = m.setKey(f) || keysChanged
		if m.Files[f.name] == f.sum && !pl.respec[f.name] {
			if mode, err := s.data.lstat(rel); err == nil && mode.IsRegular() {
				if pl.regroup {
					if err := s.fixMode(rel, f.name, mode.Perm(), m); err != nil {
						return written, keysChanged, err
					}
				}
				continue
			}
		}
		if err := s.writeSecretFile(s.data, rel, f.content, m.fileModeOf(f.name), m.uidOf(f.name), m.gidOf(f.name)); err != nil {
			return written, keysChanged, err
		}
		m.Files[f.name] = f.sum
		written = append(written, f.name)
		if markUpdated {
			m.markUpdated(f.name)
		}
	}
	return written, keysChanged, nil
}

// recordApplied records what an apply changed in the instance: the
// directory synced, the files sealed (memory-backed stores, when files
// changed), metadata and status files saved, and watchers told.
// provided and updated say which status files to touch; updated is asked
// once the metadata is saved.
func (s *Store) recordApplied(m *metadata, dir string, filesChanged, provided bool, updated func() bool) error {
	err := syncDir(s.data, dir)
	if err == nil && s.memory() && filesChanged {
		m.Sealed, err = s.sealFiles(m)
	}
	if err == nil {
		err = s.saveMetadata(m)
	}
	if err == nil {
		err = s.writeStatus(m, provided, updated())
	}
	s.publish(m.ID, m)
	return err
}

// fixMode gives an unchanged file the mode and group of its instance.
func (s *Store) fixMode(rel, name string, perm fs.FileMode, m *metadata) error {
	if perm != m.fileModeOf(name) {
		if err := s.data.chmod(rel, m.fileModeOf(name)); err != nil {
			return err
		}
	}
	if m.gidOf(name) != noGroup {
		return s.data.chgrp(rel, m.gidOf(name))
	}
	return nil
}

// warnTemplates logs each template failure among problems: the instance,
// the secret and where the template failed, never a value.
func (s *Store) warnTemplates(problems []error) {
	for _, p := range problems {
		var te *templateError
		if errors.As(p, &te) {
			s.log.Warn("a template failed; nothing is written and the last good file is kept",
				"instance", te.instance, "secret", te.secret, "err", te.where)
		}
	}
}

// fileOptionsOf keeps the options of the secrets a proposal carries.
func fileOptionsOf(opts map[string]FileOptions, secrets map[string]agreement.SecretDetails) map[string]FileOptions {
	var kept map[string]FileOptions
	for name, o := range opts {
		if _, ok := secrets[name]; !ok || o.equal(FileOptions{}) {
			continue
		}
		if kept == nil {
			kept = map[string]FileOptions{}
		}
		kept[name] = o.clone()
	}
	return kept
}

// changedOptions returns the names whose options differ between old and new.
func changedOptions(old, new map[string]FileOptions) map[string]bool {
	changed := map[string]bool{}
	for name, o := range old {
		if n, ok := new[name]; !ok || !n.equal(o) {
			changed[name] = true
		}
	}
	for name := range new {
		if _, ok := old[name]; !ok {
			changed[name] = true
		}
	}
	return changed
}

// serviceName renders a ServiceRef for errors and logs.
func serviceName(ref agreement.ServiceRef) string {
	s := ref.Org + "/" + ref.URL
	if ref.Arch != "" {
		s += " arch " + ref.Arch
	}
	if ref.Version != "" {
		s += " version " + ref.Version
	}
	if ref.Container != "" {
		s += " container " + ref.Container
	}
	return quoteName(s)
}
