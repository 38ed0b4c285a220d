package awssm

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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"go.opentelemetry.io/otel/metric"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
)

// API is the part of the Secrets Manager client the store uses.
// *secretsmanager.Client implements it; tests and embedders may wrap it.
type API interface {
	CreateSecret(context.Context, *secretsmanager.CreateSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.CreateSecretOutput, error)
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	BatchGetSecretValue(context.Context, *secretsmanager.BatchGetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.BatchGetSecretValueOutput, error)
	PutSecretValue(context.Context, *secretsmanager.PutSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
	DescribeSecret(context.Context, *secretsmanager.DescribeSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error)
	ListSecrets(context.Context, *secretsmanager.ListSecretsInput, ...func(*secretsmanager.Options)) (*secretsmanager.ListSecretsOutput, error)
	DeleteSecret(context.Context, *secretsmanager.DeleteSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.DeleteSecretOutput, error)
	RestoreSecret(context.Context, *secretsmanager.RestoreSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.RestoreSecretOutput, error)
	TagResource(context.Context, *secretsmanager.TagResourceInput, ...func(*secretsmanager.Options)) (*secretsmanager.TagResourceOutput, error)
	UntagResource(context.Context, *secretsmanager.UntagResourceInput, ...func(*secretsmanager.Options)) (*secretsmanager.UntagResourceOutput, error)
	UpdateSecretVersionStage(context.Context, *secretsmanager.UpdateSecretVersionStageInput, ...func(*secretsmanager.Options)) (*secretsmanager.UpdateSecretVersionStageOutput, error)
}

var _ API = (*secretsmanager.Client)(nil)

// Limits of the AWS API the store works within.
const (
	// maxNameLength is AWS's limit on a secret name, scope included.
	maxNameLength = 512
	// batchSize is the most secrets one BatchGetSecretValue call reads.
	batchSize = 20
	// maxListPageSize is the largest ListSecrets page.
	maxListPageSize = 100
)

// pendingStage is the staging label a compare-and-set Put attaches to the
// version it writes before moving AWSCURRENT to it. A version that lost the
// race has it removed again; the winning version keeps it until the next
// compare-and-set write moves it.
const pendingStage = "EDGESECRETS_PENDING"

// describeConcurrency bounds the DescribeSecret calls GetBatch runs at once.
const describeConcurrency = 8

// Options configure New. The zero value uses the default AWS configuration
// (environment, shared files, instance role) with no scope.
type Options struct {
	// Client is the Secrets Manager client, used as it is, its retryer
	// included. When nil, one is made from AWSConfig without retries of
	// its own: the store retries (MaxAttempts).
	Client API
	// AWSConfig configures the client New makes: region, credentials,
	// BaseEndpoint (for an emulator). When nil as well,
	// config.LoadDefaultConfig is used.
	AWSConfig *aws.Config
	// Scope is the name prefix every secret name is relative to: name n is
	// stored as "<Scope>/<n>". Empty means none.
	Scope string
	// RecoveryWindowDays is how long a deleted secret can be restored, 7 to
	// 30; 0 means AWS's default of 30.
	RecoveryWindowDays int
	// ForceDelete deletes secrets without a recovery window. It excludes
	// RecoveryWindowDays.
	ForceDelete bool
	// KMSKeyID is the KMS key new secrets are encrypted with; empty means
	// the account's aws/secretsmanager key.
	KMSKeyID string
	// ListPageSize is the ListSecrets page size, 1 to 100; 0 means 100.
	ListPageSize int
	// MaxAttempts is how often the store tries a call that failed with
	// ErrUnavailable (throttling, 5xx, network), 1 to 20; 0 means 3, or 1
	// with a Client of the caller's. MaxBackoff caps the pause between
	// attempts; 0 means 2s. See secretstore.Options.
	MaxAttempts int
	MaxBackoff  time.Duration
	// Logger receives diagnostics (operation, name, AWS error code, request
	// id; never values). Nil discards them.
	Logger *slog.Logger
	// MeterProvider makes the store's instruments
	// (secretstore.Options.MeterProvider); nil means the global one.
	MeterProvider metric.MeterProvider
}

// store is the driver over AWS Secrets Manager.
type store struct {
	api      API
	scope    string // the scope, for the credential check's filter
	window   int
	force    bool
	kmsKeyID string
	pageSize int
	log      *slog.Logger
}

var (
	_ driver.BatchGetter       = (*store)(nil)
	_ driver.BatchStater       = (*store)(nil)
	_ driver.CredentialChecker = (*store)(nil)
)

// New returns a store. Bad options are reported together in a
// *secretstore.ConfigError, which matches edgesecrets.ErrInvalid.
func New(ctx context.Context, opts Options) (*secretstore.Store, error) {
	s, attempts, err := newDriver(ctx, opts)
	if err != nil {
		return nil, err
	}
	return secretstore.New(s, secretstore.Options{Scope: s.scope, MaxAttempts: attempts, MaxBackoff: opts.MaxBackoff, Backend: "awssm", MeterProvider: opts.MeterProvider})
}

// newDriver returns the driver opts describe, and how many attempts the
// store should make.
func newDriver(ctx context.Context, opts Options) (*store, int, error) {
	scope, problems := checkOptions(opts)
	if problems != nil {
		return nil, 0, &secretstore.ConfigError{Problems: problems}
	}
	s := &store{
		api: opts.Client, scope: scope, window: opts.RecoveryWindowDays, force: opts.ForceDelete,
		kmsKeyID: opts.KMSKeyID, pageSize: opts.ListPageSize, log: opts.Logger,
	}
	if s.pageSize == 0 {
		s.pageSize = maxListPageSize
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	attempts := opts.MaxAttempts
	if s.api != nil {
		if attempts == 0 {
			attempts = 1 // the caller's client retries
		}
		return s, attempts, nil
	}
	var cfg aws.Config
	if opts.AWSConfig != nil {
		cfg = opts.AWSConfig.Copy()
	} else {
		loaded, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, 0, &secretstore.Error{Op: "open", Kind: edgesecrets.ErrInvalid, Err: loadError(err)}
		}
		cfg = loaded
	}
	if cfg.Region == "" {
		return nil, 0, &secretstore.Error{Op: "open", Kind: edgesecrets.ErrInvalid, Err: errors.New("no AWS region: set the awssm region, AWS_REGION or a profile's region")}
	}
	// One attempt per call: secretstore.Store retries, within the caller's
	// deadline.
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	s.api = secretsmanager.NewFromConfig(cfg)
	return s, attempts, nil
}

// checkOptions returns the scope, trimmed, and every problem with opts.
func checkOptions(opts Options) (string, []string) {
	var problems []string
	scope := strings.Trim(opts.Scope, "/")
	if scope != "" {
		if err := secretstore.ValidateName(scope); err != nil {
			problems = append(problems, fmt.Sprintf("scope %q: %v", opts.Scope, err))
		} else if err := checkAWSName(scope); err != nil {
			problems = append(problems, fmt.Sprintf("scope %q: %v", opts.Scope, err))
		}
	}
	problems = append(problems, deleteProblems(opts.RecoveryWindowDays, opts.ForceDelete)...)
	if opts.ListPageSize < 0 || opts.ListPageSize > maxListPageSize {
		problems = append(problems, fmt.Sprintf("list page size %d is outside 1..%d", opts.ListPageSize, maxListPageSize))
	}
	if opts.MaxAttempts < 0 || opts.MaxAttempts > maxAttemptsLimit {
		problems = append(problems, fmt.Sprintf("MaxAttempts %d is outside 1..%d (0 means the default)", opts.MaxAttempts, maxAttemptsLimit))
	}
	if opts.MaxBackoff < 0 {
		problems = append(problems, "MaxBackoff is negative")
	}
	return scope, problems
}

// deleteProblems checks the recovery window settings, shared by Options and
// the JSON config.
func deleteProblems(days int, force bool) []string {
	var problems []string
	if days != 0 && (days < 7 || days > 30) {
		problems = append(problems, fmt.Sprintf("recoveryWindowDays %d is outside AWS's 7..30 days", days))
	}
	if force && days != 0 {
		problems = append(problems, "forceDelete and recoveryWindowDays exclude each other")
	}
	return problems
}

// Get implements driver.Store: DescribeSecret (labels, current version,
// pending deletion) then GetSecretValue of that version.
func (s *store) Get(ctx context.Context, name string) (*driver.Secret, error) {
	if err := checkPath(name); err != nil {
		return nil, err
	}
	m, err := s.describe(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := m.visible(); err != nil {
		return nil, err
	}
	data, err := s.readValue(ctx, name, m.current)
	if err != nil {
		return nil, err
	}
	return &driver.Secret{Data: data, Labels: m.labels, Version: m.current, UpdatedAt: m.changed}, nil
}

// Stat implements driver.Store with one DescribeSecret call; no value is
// read. Version is the VersionId holding AWSCURRENT.
func (s *store) Stat(ctx context.Context, name string) (*driver.Secret, error) {
	if err := checkPath(name); err != nil {
		return nil, err
	}
	m, err := s.describe(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := m.visible(); err != nil {
		return nil, err
	}
	return &driver.Secret{Version: m.current, UpdatedAt: m.changed, Labels: m.labels}, nil
}

// Put implements driver.Store. See the package documentation for how
// secrets pending deletion, compare-and-set and retries are handled.
func (s *store) Put(ctx context.Context, in *driver.Write) error {
	if err := checkPath(in.Name); err != nil {
		return err
	}
	if err := checkLabels(in.Labels); err != nil {
		return invalid(err)
	}
	value, err := encodeData(in.Data)
	if err != nil {
		return invalid(err)
	}
	w := write{Write: in, value: value}
	// The first try trusts what the store read just before. A write races
	// with others between reading and writing; when it loses in a way that
	// a fresh look settles (the secret appeared, vanished or was scheduled
	// for deletion meanwhile), it starts over.
	cur := in.Current
	var lastErr error
	for range 3 {
		again, err := s.putOnce(ctx, w, cur)
		if !again {
			return err
		}
		lastErr, cur = err, nil
	}
	return lastErr
}

// write is one Put's input, with the encoded value.
type write struct {
	*driver.Write
	value string
}

func invalid(err error) error { return &secretstore.Error{Kind: edgesecrets.ErrInvalid, Err: err} }
func conflict(why string) error {
	return &secretstore.Error{Kind: edgesecrets.ErrConflict, Err: errors.New(why)}
}

// putOnce tries a Put once, from cur (what the store read just before;
// nil: look). again reports a lost race worth retrying, with err
// describing it should it be the last try.
func (s *store) putOnce(ctx context.Context, w write, cur *driver.Secret) (again bool, err error) {
	if cur != nil {
		if w.CreateOnly {
			return false, conflict("secret exists and the write is create-only")
		}
		m := metadata{current: cur.Version, labels: cur.Labels}
		return s.update(ctx, w, m, cur.Data, false)
	}
	m, err := s.describe(ctx, w.Name)
	if errors.Is(err, edgesecrets.ErrNotFound) {
		if w.IfVersion != "" {
			return false, conflict("secret does not exist, so its version cannot match")
		}
		return s.create(ctx, w)
	}
	if err != nil {
		return false, err
	}
	if m.current == w.Token && !m.pending {
		return false, nil // this Put's own write, landed though its answer was lost
	}
	restored := false
	switch {
	case m.pending && w.IfVersion != "":
		return false, conflict("secret is scheduled for deletion, so its version cannot match")
	case m.pending:
		// A secret scheduled for deletion does not exist as far as the
		// store's users can tell, so Put brings it back with the new
		// content: restore, then write as usual.
		if _, err := s.api.RestoreSecret(ctx, &secretsmanager.RestoreSecretInput{SecretId: &w.Name}); err != nil {
			return false, s.fail(ctx, "put", w.Name, err)
		}
		restored = true
		s.log.DebugContext(ctx, "restored secret scheduled for deletion before writing it", "name", w.Name)
	case w.CreateOnly:
		return false, conflict("secret exists and the write is create-only")
	case w.IfVersion != "" && w.IfVersion != m.current:
		return false, conflict("current version does not match the expected version")
	}
	again, err = s.update(ctx, w, m, nil, restored)
	if err != nil && !again && restored && !errors.Is(err, edgesecrets.ErrConflict) {
		s.undoRestore(ctx, w)
	}
	return again, err
}

// update writes what differs between the secret described by m (whose
// value is curData, or read when nil) and w: the value, the tags, or both.
// restored says the secret was just brought back from pending deletion,
// which counts as a change.
func (s *store) update(ctx context.Context, w write, m metadata, curData map[string][]byte, restored bool) (again bool, err error) {
	dataChanged := true
	switch {
	case curData != nil:
		dataChanged = !edgesecrets.Data(curData).Equal(w.Data)
	case m.current != "":
		cur, err := s.readValue(ctx, w.Name, m.current)
		switch {
		case errors.Is(err, edgesecrets.ErrNotFound):
			return true, err
		case errors.Is(err, edgesecrets.ErrInvalid):
			// Not a JSON object (written by another tool): replaced.
		case err != nil:
			return false, err
		default:
			dataChanged = !edgesecrets.Data(cur).Equal(w.Data)
		}
	}
	labelsChanged := !maps.Equal(m.labels, w.Labels)
	if !dataChanged && !labelsChanged && !restored {
		return false, nil
	}
	if dataChanged {
		var err error
		if w.IfVersion != "" || (restored && w.CreateOnly) {
			err = s.swapValue(ctx, w, m.current)
		} else {
			err = s.putValue(ctx, w)
		}
		if err != nil {
			return errors.Is(err, edgesecrets.ErrNotFound), err
		}
	}
	if labelsChanged {
		return false, s.syncTags(ctx, w, m.labels)
	}
	return false, nil
}

// undoTimeout bounds the DeleteSecret that undoes a restore after a failed Put.
const undoTimeout = 10 * time.Second

// undoRestore schedules a secret restored by a failed Put for deletion again,
// so the failure does not bring back its old value. It runs even when the
// Put's context was cancelled.
func (s *store) undoRestore(ctx context.Context, w write) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	if err := s.Delete(ctx, w.Name); err != nil {
		s.log.WarnContext(ctx, "a failed Put restored a secret scheduled for deletion and could not delete it again", "name", w.Name, "error", err)
	}
}

// create makes a new secret with its tags in one CreateSecret call.
func (s *store) create(ctx context.Context, w write) (again bool, err error) {
	in := &secretsmanager.CreateSecretInput{Name: &w.Name, SecretString: &w.value, ClientRequestToken: &w.Token}
	if len(w.Labels) > 0 {
		in.Tags = toTags(w.Labels)
	}
	if s.kmsKeyID != "" {
		in.KmsKeyId = &s.kmsKeyID
	}
	_, err = s.api.CreateSecret(ctx, in)
	switch code := codeOf(err); {
	case err == nil:
		return false, nil
	case code == codeExists && w.CreateOnly:
		return false, conflict("secret exists and the write is create-only")
	case code == codeExists:
		return true, s.fail(ctx, "put", w.Name, err) // created meanwhile: update it instead
	case code == codeInvalidRequest:
		// The name is still being deleted (scheduled meanwhile, or a forced
		// deletion AWS has not finished): a fresh look decides.
		return true, &secretstore.Error{Kind: edgesecrets.ErrUnavailable, Err: errors.New("the name is still being deleted by AWS; retry later")}
	}
	return false, s.fail(ctx, "put", w.Name, err)
}

// putValue writes a new AWSCURRENT version. The client request token (the
// Put's idempotency key) makes a repeat of this call idempotent: a retry
// after a lost response meets the version it already created and changes
// nothing.
func (s *store) putValue(ctx context.Context, w write) error {
	_, err := s.api.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: &w.Name, SecretString: &w.value, ClientRequestToken: &w.Token})
	if code := codeOf(err); code == codeInvalidRequest || code == codeNotFound {
		// Scheduled for deletion or deleted meanwhile.
		return &secretstore.Error{Kind: edgesecrets.ErrNotFound, Err: errors.New("secret was deleted during the write")}
	}
	if err != nil {
		return s.fail(ctx, "put", w.Name, err)
	}
	return nil
}

// swapValue is a server-side compare-and-set: it writes the value as a
// version labelled pendingStage, then moves AWSCURRENT to it from base.
// Secrets Manager refuses the move unless AWSCURRENT is still on base, so of
// racing writers exactly one wins.
func (s *store) swapValue(ctx context.Context, w write, base string) error {
	token := w.Token
	lost := conflict("current version does not match the expected version")
	_, err := s.api.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
		SecretId: &w.Name, SecretString: &w.value, ClientRequestToken: &token, VersionStages: []string{pendingStage},
	})
	if code := codeOf(err); code == codeInvalidRequest || code == codeNotFound {
		return lost
	}
	if err != nil {
		return s.fail(ctx, "put", w.Name, err)
	}
	move := &secretsmanager.UpdateSecretVersionStageInput{SecretId: &w.Name, VersionStage: aws.String("AWSCURRENT"), MoveToVersionId: &token}
	if base != "" {
		move.RemoveFromVersionId = &base
	}
	_, err = s.api.UpdateSecretVersionStage(ctx, move)
	switch codeOf(err) {
	case "":
		if err != nil {
			return s.fail(ctx, "put", w.Name, err)
		}
		return nil
	case codeInvalidParameter, codeInvalidRequest, codeNotFound:
		if m, err := s.describe(ctx, w.Name); err == nil && m.current == token {
			return nil // moved by an earlier attempt of this Put, whose answer was lost
		}
		// AWSCURRENT moved away from base (or the secret went): lost. The
		// losing version is left without labels, which makes it deprecated.
		if _, err := s.api.UpdateSecretVersionStage(ctx, &secretsmanager.UpdateSecretVersionStageInput{
			SecretId: &w.Name, VersionStage: aws.String(pendingStage), RemoveFromVersionId: &token,
		}); err != nil {
			s.log.DebugContext(ctx, "could not take the pending label off a losing version; AWS deprecates it in time", "name", w.Name, "code", codeOf(err))
		}
		return lost
	}
	return s.fail(ctx, "put", w.Name, err)
}

// syncTags makes the secret's tags equal labels: TagResource for new and
// changed ones, UntagResource for removed ones.
func (s *store) syncTags(ctx context.Context, w write, old map[string]string) error {
	set := map[string]string{}
	for k, v := range w.Labels {
		if ov, ok := old[k]; !ok || ov != v {
			set[k] = v
		}
	}
	var remove []string
	for k := range old {
		if _, ok := w.Labels[k]; !ok {
			remove = append(remove, k)
		}
	}
	slices.Sort(remove)
	if len(set) > 0 {
		if _, err := s.api.TagResource(ctx, &secretsmanager.TagResourceInput{SecretId: &w.Name, Tags: toTags(set)}); err != nil {
			return s.fail(ctx, "put", w.Name, err)
		}
	}
	if len(remove) > 0 {
		if _, err := s.api.UntagResource(ctx, &secretsmanager.UntagResourceInput{SecretId: &w.Name, TagKeys: remove}); err != nil {
			return s.fail(ctx, "put", w.Name, err)
		}
	}
	return nil
}

// Delete implements driver.Store: DeleteSecret with the configured
// recovery window (or forced). A missing secret, or one already scheduled
// for deletion, is not an error.
func (s *store) Delete(ctx context.Context, name string) error {
	if err := checkPath(name); err != nil {
		return err
	}
	in := &secretsmanager.DeleteSecretInput{SecretId: &name}
	switch {
	case s.force:
		in.ForceDeleteWithoutRecovery = aws.Bool(true)
	case s.window > 0:
		in.RecoveryWindowInDays = aws.Int64(int64(s.window))
	}
	_, err := s.api.DeleteSecret(ctx, in)
	switch codeOf(err) {
	case "":
		if err != nil {
			return s.fail(ctx, "delete", name, err)
		}
		return nil
	case codeNotFound:
		return nil
	case codeInvalidRequest:
		// Refused: is it because the secret is already scheduled for deletion?
		m, derr := s.describe(ctx, name)
		if errors.Is(derr, edgesecrets.ErrNotFound) || (derr == nil && m.pending) {
			return nil
		}
	}
	return s.fail(ctx, "delete", name, err)
}

// List implements driver.Store with ListSecrets, filtered by name prefix
// server-side, following NextToken over every page. Secrets scheduled for
// deletion are not listed. AWS documents ListSecrets as eventually
// consistent: it may lag recent writes.
func (s *store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := checkAWSName(prefix); err != nil {
		return nil, invalid(err)
	}
	if len(prefix) > maxNameLength {
		return nil, nil // no AWS name is that long
	}
	var names []string
	err := s.list(ctx, prefix, s.pageSize, func(e types.SecretListEntry) bool {
		if e.DeletedDate == nil {
			names = append(names, aws.ToString(e.Name))
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// list runs ListSecrets filtered on the name prefix, page by page, giving
// each entry to keep until it returns false.
func (s *store) list(ctx context.Context, prefix string, pageSize int, keep func(types.SecretListEntry) bool) error {
	in := &secretsmanager.ListSecretsInput{MaxResults: aws.Int32(int32(pageSize))}
	if prefix != "" {
		in.Filters = []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{prefix}}}
	}
	pages := secretsmanager.NewListSecretsPaginator(s.api, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return s.fail(ctx, "list", prefix, err)
		}
		for _, e := range page.SecretList {
			if !keep(e) {
				return nil
			}
		}
	}
	return nil
}

// StatBatch implements driver.BatchStater with ListSecrets, a page per
// 100 secrets, filtered on the names' longest common prefix (the scope,
// at least): the watcher's metadata of thousands of secrets in tens of
// calls instead of one DescribeSecret each. Each entry's version is the
// VersionId its SecretVersionsToStages gives AWSCURRENT. Secrets scheduled
// for deletion, without a current version, or not listed yet (ListSecrets
// is eventually consistent) are left out, and the watcher asks about them
// one by one. Paging stops once every name has been seen.
func (s *store) StatBatch(ctx context.Context, names []string) (map[string]*driver.Secret, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		if checkPath(n) == nil {
			want[n] = true
		}
	}
	out := make(map[string]*driver.Secret, len(want))
	if len(want) == 0 {
		return out, nil
	}
	prefix := commonPrefix(slices.Collect(maps.Keys(want)))
	err := s.list(ctx, prefix, maxListPageSize, func(e types.SecretListEntry) bool {
		name := aws.ToString(e.Name)
		if !want[name] || e.DeletedDate != nil {
			return true
		}
		m := metadata{labels: fromTags(e.Tags), changed: changedAt(e.LastChangedDate, e.CreatedDate)}
		m.current = currentVersion(e.SecretVersionsToStages)
		if m.current != "" {
			out[name] = &driver.Secret{Version: m.current, UpdatedAt: m.changed, Labels: m.labels}
		}
		return len(out) < len(want)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// commonPrefix returns the longest prefix all names share.
func commonPrefix(names []string) string {
	if len(names) == 0 {
		return ""
	}
	p := names[0]
	for _, n := range names[1:] {
		i := 0
		for i < len(p) && i < len(n) && p[i] == n[i] {
			i++
		}
		p = p[:i]
	}
	return p
}

// CheckCredentials implements driver.CredentialChecker with one
// ListSecrets call that returns at most one entry, filtered on the scope's
// name prefix, reading no value.
//
// ListSecrets is the call because it asks about the caller and not about a
// secret. It is among the actions a reading agbot already holds (List
// needs it), so the check needs no extra grant; IAM cannot limit it to
// particular secrets, so a refusal is about the identity: credentials
// expired (ExpiredTokenException), unknown (UnrecognizedClientException,
// InvalidClientTokenId), badly signed, or the identity denied Secrets
// Manager altogether (AccessDeniedException, also from an SCP or a
// permission boundary). A policy or resource policy that denies one secret
// leaves it alone, so that secret reads Forbidden while the check passes.
// sts:GetCallerIdentity would need no grant at all, but it goes to another
// service and endpoint and cannot see a denial of Secrets Manager itself.
//
// Refusals are ErrPermission; throttling, 5xx, network failures and any
// other answer are ErrUnavailable. An identity without
// secretsmanager:ListSecrets always fails the check: grant it.
func (s *store) CheckCredentials(ctx context.Context) error {
	in := &secretsmanager.ListSecretsInput{MaxResults: aws.Int32(1)}
	if s.scope != "" {
		in.Filters = []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{s.scope + "/"}}}
	}
	if _, err := s.api.ListSecrets(ctx, in); err != nil {
		return s.fail(ctx, "check-credentials", "", err)
	}
	return nil
}

// GetBatch implements driver.BatchGetter: values come from
// BatchGetSecretValue, up to batchSize secrets per call, and labels from
// one DescribeSecret per secret found (run a few at a time), since
// BatchGetSecretValue returns no tags. Missing secrets and secrets
// scheduled for deletion are absent from the result.
func (s *store) GetBatch(ctx context.Context, names []string) (map[string]*driver.Secret, error) {
	for _, name := range names {
		if err := checkPath(name); err != nil {
			return nil, err
		}
	}
	out := make(map[string]*driver.Secret, len(names))
	for chunk := range slices.Chunk(names, batchSize) {
		if err := s.batchValues(ctx, chunk, out); err != nil {
			return nil, err
		}
	}
	if err := s.batchMetadata(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// batchValues reads one chunk of values into out, keyed by name.
func (s *store) batchValues(ctx context.Context, names []string, out map[string]*driver.Secret) error {
	in := &secretsmanager.BatchGetSecretValueInput{SecretIdList: names}
	for {
		res, err := s.api.BatchGetSecretValue(ctx, in)
		if err != nil {
			return s.fail(ctx, "get", names[0], err)
		}
		for _, e := range res.Errors {
			code := aws.ToString(e.ErrorCode)
			if code == codeNotFound || code == codeInvalidRequest {
				continue // missing, or scheduled for deletion
			}
			return &secretstore.Error{Kind: kindOfCode(code, 0), Err: &APIError{Operation: "BatchGetSecretValue", Code: code}}
		}
		for _, v := range res.SecretValues {
			name := aws.ToString(v.Name)
			if !slices.Contains(names, name) {
				continue
			}
			data, err := decodeValue(v.SecretString)
			if err != nil {
				return err
			}
			out[name] = &driver.Secret{Data: data, Version: aws.ToString(v.VersionId)}
		}
		if res.NextToken == nil {
			return nil
		}
		in.NextToken = res.NextToken
	}
}

// batchMetadata fills in labels and UpdatedAt with DescribeSecret, and
// drops secrets deleted since their values were read.
func (s *store) batchMetadata(ctx context.Context, out map[string]*driver.Secret) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, describeConcurrency)
	)
	for _, name := range slices.Sorted(maps.Keys(out)) {
		sec := out[name]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			m, err := s.describe(ctx, name)
			if err == nil {
				err = m.visible()
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, edgesecrets.ErrNotFound):
				delete(out, name)
			case err != nil:
				if firstErr == nil {
					firstErr = err
				}
			default:
				sec.Labels, sec.UpdatedAt = m.labels, m.changed
			}
		})
	}
	wg.Wait()
	return firstErr
}

// As implements Store.As: a **secretsmanager.Client gets the store's
// client, when it is one.
func (s *store) As(target any) bool {
	c, ok := s.api.(*secretsmanager.Client)
	t, isTarget := target.(**secretsmanager.Client)
	if ok && isTarget {
		*t = c
	}
	return ok && isTarget
}

// Close implements driver.Store: nothing to release.
// MaxValueBytes is AWS Secrets Manager's limit on a secret value, 65536
// bytes of SecretString (driver.ValueLimiter); the JSON encoding of the
// data counts too, and encodeData refuses what is over it once encoded.
func (s *store) MaxValueBytes() int { return maxSecretStringBytes }

func (s *store) Close() error { return nil }

// metadata is what DescribeSecret tells about a secret.
type metadata struct {
	pending bool   // scheduled for deletion
	current string // VersionId holding AWSCURRENT; "" if none
	labels  map[string]string
	changed time.Time
}

// visible returns a NotFound error for a secret the store's users cannot see.
func (m metadata) visible() error {
	switch {
	case m.pending:
		return &secretstore.Error{Kind: edgesecrets.ErrNotFound, Err: errors.New("secret is scheduled for deletion")}
	case m.current == "":
		return &secretstore.Error{Kind: edgesecrets.ErrNotFound, Err: errors.New("secret has no current version")}
	}
	return nil
}

func (s *store) describe(ctx context.Context, name string) (metadata, error) {
	out, err := s.api.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &name})
	if err != nil {
		return metadata{}, s.fail(ctx, "describe", name, err)
	}
	return metadata{
		pending: out.DeletedDate != nil,
		labels:  fromTags(out.Tags),
		current: currentVersion(out.VersionIdsToStages),
		changed: changedAt(out.LastChangedDate, out.CreatedDate),
	}, nil
}

// currentVersion returns the VersionId that holds AWSCURRENT, or "".
func currentVersion(stages map[string][]string) string {
	for id, st := range stages {
		if slices.Contains(st, "AWSCURRENT") {
			return id
		}
	}
	return ""
}

// changedAt is the secret's UpdatedAt: its last change, else its creation.
func changedAt(changed, created *time.Time) time.Time {
	switch {
	case changed != nil:
		return *changed
	case created != nil:
		return *created
	}
	return time.Time{}
}

// readValue reads and decodes one version's value.
func (s *store) readValue(ctx context.Context, name, versionID string) (map[string][]byte, error) {
	out, err := s.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &name, VersionId: &versionID})
	if code := codeOf(err); code == codeInvalidRequest || code == codeNotFound {
		// InvalidRequestException on a read means the secret was scheduled
		// for deletion since it was described.
		return nil, &secretstore.Error{Kind: edgesecrets.ErrNotFound, Err: errors.New("secret was deleted while being read")}
	}
	if err != nil {
		return nil, s.fail(ctx, "get", name, err)
	}
	return decodeValue(out.SecretString)
}

func decodeValue(secretString *string) (map[string][]byte, error) {
	if secretString == nil {
		return nil, invalid(errors.New("secret holds SecretBinary, not a JSON object in SecretString"))
	}
	data, err := decodeData(*secretString)
	if err != nil {
		return nil, invalid(err)
	}
	return data, nil
}

// checkPath reports a scoped name AWS cannot hold: characters beyond its
// set, or more than maxNameLength characters.
func checkPath(name string) error {
	if err := checkAWSName(name); err != nil {
		return invalid(err)
	}
	if len(name) > maxNameLength {
		return invalid(fmt.Errorf("AWS secret name would be %d characters, over AWS's %d", len(name), maxNameLength))
	}
	return nil
}
