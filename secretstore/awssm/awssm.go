package awssm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	smithyrand "github.com/aws/smithy-go/rand"

	"github.com/edgesecrets/edgesecrets/secretstore"
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
	// MaxNameLength is AWS's limit on a secret name, scope included.
	MaxNameLength = 512
	// BatchSize is the most secrets one BatchGetSecretValue call reads.
	BatchSize = 20
	// MaxListPageSize is the largest ListSecrets page.
	MaxListPageSize = 100
)

// PendingStage is the staging label a compare-and-set Put attaches to the
// version it writes before moving AWSCURRENT to it. A version that lost the
// race has it removed again; the winning version keeps it until the next
// compare-and-set write moves it.
const PendingStage = "EDGESECRETS_PENDING"

// describeConcurrency bounds the DescribeSecret calls GetBatch runs at once.
const describeConcurrency = 8

// Options configure New. The zero value uses the default AWS configuration
// (environment, shared files, instance role) with no scope.
type Options struct {
	// Client is the Secrets Manager client. When nil, one is made from
	// AWSConfig.
	Client API
	// AWSConfig configures the client New makes: region, credentials,
	// BaseEndpoint (for an emulator), Retryer. When nil as well,
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
	// Logger receives diagnostics (operation, name, AWS error code, request
	// id; never values). Nil discards them.
	Logger *slog.Logger
}

// Store is a secretstore.Store over AWS Secrets Manager. It also implements
// secretstore.BatchGetter and secretstore.CredentialChecker. It is safe for concurrent use.
type Store struct {
	api      API
	scope    secretstore.Scope
	window   int
	force    bool
	kmsKeyID string
	pageSize int
	log      *slog.Logger
	tokens   *smithyrand.UUID
	closed   atomic.Bool
}

var (
	_ secretstore.BatchGetter       = (*Store)(nil)
	_ secretstore.CredentialChecker = (*Store)(nil)
)

// New returns a store. Bad options are reported together in a
// *secretstore.ConfigError, which matches secretstore.ErrInvalid.
func New(ctx context.Context, opts Options) (*Store, error) {
	scope, problems := checkOptions(opts)
	if problems != nil {
		return nil, &secretstore.ConfigError{Problems: problems}
	}
	s := &Store{
		api: opts.Client, scope: scope, window: opts.RecoveryWindowDays, force: opts.ForceDelete,
		kmsKeyID: opts.KMSKeyID, pageSize: opts.ListPageSize, log: opts.Logger,
		tokens: smithyrand.NewUUID(rand.Reader),
	}
	if s.pageSize == 0 {
		s.pageSize = MaxListPageSize
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.api == nil {
		var cfg aws.Config
		if opts.AWSConfig != nil {
			cfg = opts.AWSConfig.Copy()
		} else {
			loaded, err := config.LoadDefaultConfig(ctx)
			if err != nil {
				return nil, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid, loadError(err))
			}
			cfg = loaded
		}
		if cfg.Region == "" {
			return nil, secretstore.NewError(secretstore.OpOpen, "", secretstore.ErrInvalid,
				errors.New("no AWS region: set the awssm region, AWS_REGION or a profile's region"))
		}
		s.api = secretsmanager.NewFromConfig(cfg)
	}
	return s, nil
}

// checkOptions returns the validated scope and every problem with opts.
func checkOptions(opts Options) (secretstore.Scope, []string) {
	var problems []string
	scope, err := secretstore.NewScope(opts.Scope)
	if err != nil {
		problems = append(problems, err.Error())
	} else if err := checkAWSName(string(scope)); err != nil {
		problems = append(problems, fmt.Sprintf("scope %q: %v", opts.Scope, err))
	}
	problems = append(problems, deleteProblems(opts.RecoveryWindowDays, opts.ForceDelete)...)
	if opts.ListPageSize < 0 || opts.ListPageSize > MaxListPageSize {
		problems = append(problems, fmt.Sprintf("list page size %d is outside 1..%d", opts.ListPageSize, MaxListPageSize))
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

// Get implements secretstore.Store: DescribeSecret (labels, current
// version, pending deletion) then GetSecretValue of that version.
func (s *Store) Get(ctx context.Context, name string) (*secretstore.Secret, error) {
	path, err := s.path(ctx, secretstore.OpGet, name)
	if err != nil {
		return nil, err
	}
	m, err := s.describe(ctx, secretstore.OpGet, name, path)
	if err != nil {
		return nil, err
	}
	if err := m.visible(secretstore.OpGet, name); err != nil {
		return nil, err
	}
	data, err := s.readValue(ctx, secretstore.OpGet, name, path, m.current)
	if err != nil {
		return nil, err
	}
	return &secretstore.Secret{Name: name, Data: data, Labels: m.labels, Version: m.current, UpdatedAt: m.changed}, nil
}

// Stat implements secretstore.Store with one DescribeSecret call; no value
// is read. Version is the VersionId holding AWSCURRENT.
func (s *Store) Stat(ctx context.Context, name string) (secretstore.Metadata, error) {
	path, err := s.path(ctx, secretstore.OpStat, name)
	if err != nil {
		return secretstore.Metadata{}, err
	}
	m, err := s.describe(ctx, secretstore.OpStat, name, path)
	if err != nil {
		return secretstore.Metadata{}, err
	}
	if err := m.visible(secretstore.OpStat, name); err != nil {
		return secretstore.Metadata{}, err
	}
	return secretstore.Metadata{Name: name, Version: m.current, UpdatedAt: m.changed, Labels: m.labels}, nil
}

// Put implements secretstore.Store. See the package documentation for how
// unchanged writes, secrets pending deletion, compare-and-set and retries
// are handled.
func (s *Store) Put(ctx context.Context, in *secretstore.Secret, opts secretstore.PutOptions) (bool, error) {
	if err := secretstore.CheckSecret(in); err != nil {
		return false, err
	}
	path, err := s.path(ctx, secretstore.OpPut, in.Name)
	if err != nil {
		return false, err
	}
	if err := checkLabels(in.Labels); err != nil {
		return false, secretstore.NewError(secretstore.OpPut, in.Name, secretstore.ErrInvalid, err)
	}
	value, err := encodeData(in.Data)
	if err != nil {
		return false, secretstore.NewError(secretstore.OpPut, in.Name, secretstore.ErrInvalid, err)
	}
	w := write{name: in.Name, path: path, value: value, data: in.Data, labels: in.Labels, opts: opts}
	// A write races with others between reading and writing; when it loses
	// in a way that a fresh read settles (the secret appeared, vanished or
	// was scheduled for deletion meanwhile), it starts over.
	var lastErr error
	for range 3 {
		changed, again, err := s.putOnce(ctx, w)
		if !again {
			return changed, err
		}
		lastErr = err
	}
	return false, lastErr
}

// write is one Put's input, validated and encoded.
type write struct {
	name, path, value string
	data              secretstore.Data
	labels            map[string]string
	opts              secretstore.PutOptions
}

// putOnce tries a Put once. again reports a lost race worth retrying, with
// err describing it should it be the last try.
func (s *Store) putOnce(ctx context.Context, w write) (changed, again bool, err error) {
	conflict := func(why string) error {
		return secretstore.NewError(secretstore.OpPut, w.name, secretstore.ErrConflict, errors.New(why))
	}
	m, err := s.describe(ctx, secretstore.OpPut, w.name, w.path)
	if errors.Is(err, secretstore.ErrNotFound) {
		if w.opts.IfVersion != "" {
			return false, false, conflict("secret does not exist, so its version cannot match")
		}
		return s.create(ctx, w)
	}
	if err != nil {
		return false, false, err
	}
	restored := false
	switch {
	case m.pending && w.opts.IfVersion != "":
		return false, false, conflict("secret is scheduled for deletion, so its version cannot match")
	case m.pending:
		// A secret scheduled for deletion does not exist as far as the
		// store's users can tell, so Put brings it back with the new
		// content: restore, then write as usual.
		if _, err := s.api.RestoreSecret(ctx, &secretsmanager.RestoreSecretInput{SecretId: &w.path}); err != nil {
			return false, false, s.fail(ctx, secretstore.OpPut, w.name, err)
		}
		restored = true
		s.log.DebugContext(ctx, "restored secret scheduled for deletion before writing it", "name", w.name)
	case w.opts.CreateOnly:
		return false, false, conflict("secret exists and the write is create-only")
	case w.opts.IfVersion != "" && w.opts.IfVersion != m.current:
		return false, false, conflict("current version does not match the expected version")
	}
	changed, again, err = s.update(ctx, w, m, restored)
	if err != nil && !again && restored && !errors.Is(err, secretstore.ErrConflict) {
		s.undoRestore(ctx, w)
	}
	return changed, again, err
}

// update writes what differs between the secret described by m and w: the
// value, the tags, or both. restored says the secret was just brought back
// from pending deletion, which counts as a change.
func (s *Store) update(ctx context.Context, w write, m metadata, restored bool) (changed, again bool, err error) {
	dataChanged := true
	if m.current != "" {
		cur, err := s.readValue(ctx, secretstore.OpPut, w.name, w.path, m.current)
		switch {
		case errors.Is(err, secretstore.ErrNotFound):
			return false, true, err
		case errors.Is(err, secretstore.ErrInvalid):
			// Not a JSON object (written by another tool): replaced.
		case err != nil:
			return false, false, err
		default:
			dataChanged = !cur.Equal(w.data)
		}
	}
	labelsChanged := !secretstore.LabelsEqual(m.labels, w.labels)
	if !dataChanged && !labelsChanged && !restored {
		return false, false, nil
	}
	if dataChanged {
		var err error
		if w.opts.IfVersion != "" || (restored && w.opts.CreateOnly) {
			err = s.swapValue(ctx, w, m.current)
		} else {
			err = s.putValue(ctx, w)
		}
		if err != nil {
			return false, errors.Is(err, secretstore.ErrNotFound), err
		}
	}
	if labelsChanged {
		if err := s.syncTags(ctx, w, m.labels); err != nil {
			return true, false, err
		}
	}
	return true, false, nil
}

// undoTimeout bounds the DeleteSecret that undoes a restore after a failed Put.
const undoTimeout = 10 * time.Second

// undoRestore schedules a secret restored by a failed Put for deletion again,
// so the failure does not bring back its old value. It runs even when the
// Put's context was cancelled.
func (s *Store) undoRestore(ctx context.Context, w write) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	if err := s.Delete(ctx, w.name); err != nil {
		s.log.WarnContext(ctx, "a failed Put restored a secret scheduled for deletion and could not delete it again", "name", w.name, "error", err)
	}
}

// create makes a new secret with its tags in one CreateSecret call.
func (s *Store) create(ctx context.Context, w write) (changed, again bool, err error) {
	token, err := s.token(w.name)
	if err != nil {
		return false, false, err
	}
	in := &secretsmanager.CreateSecretInput{Name: &w.path, SecretString: &w.value, ClientRequestToken: &token}
	if len(w.labels) > 0 {
		in.Tags = toTags(w.labels)
	}
	if s.kmsKeyID != "" {
		in.KmsKeyId = &s.kmsKeyID
	}
	_, err = s.api.CreateSecret(ctx, in)
	switch code := codeOf(err); {
	case err == nil:
		return true, false, nil
	case code == codeExists && w.opts.CreateOnly:
		return false, false, secretstore.NewError(secretstore.OpPut, w.name, secretstore.ErrConflict, errors.New("secret exists and the write is create-only"))
	case code == codeExists:
		return false, true, s.fail(ctx, secretstore.OpPut, w.name, err) // created meanwhile: update it instead
	case code == codeInvalidRequest:
		// The name is still being deleted (scheduled meanwhile, or a forced
		// deletion AWS has not finished): a fresh look decides.
		return false, true, secretstore.NewError(secretstore.OpPut, w.name, secretstore.ErrUnavailable, errors.New("the name is still being deleted by AWS; retry later"))
	}
	return false, false, s.fail(ctx, secretstore.OpPut, w.name, err)
}

// putValue writes a new AWSCURRENT version. The client request token makes
// the SDK's retries of this call idempotent: a retry after a lost response
// meets the version it already created and changes nothing.
func (s *Store) putValue(ctx context.Context, w write) error {
	token, err := s.token(w.name)
	if err != nil {
		return err
	}
	_, err = s.api.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: &w.path, SecretString: &w.value, ClientRequestToken: &token})
	if code := codeOf(err); code == codeInvalidRequest || code == codeNotFound {
		// Scheduled for deletion or deleted meanwhile.
		return secretstore.NewError(secretstore.OpPut, w.name, secretstore.ErrNotFound, errors.New("secret was deleted during the write"))
	}
	if err != nil {
		return s.fail(ctx, secretstore.OpPut, w.name, err)
	}
	return nil
}

// swapValue is a server-side compare-and-set: it writes the value as a
// version labelled PendingStage, then moves AWSCURRENT to it from base.
// Secrets Manager refuses the move unless AWSCURRENT is still on base, so of
// racing writers exactly one wins.
func (s *Store) swapValue(ctx context.Context, w write, base string) error {
	token, err := s.token(w.name)
	if err != nil {
		return err
	}
	conflict := secretstore.NewError(secretstore.OpPut, w.name, secretstore.ErrConflict, errors.New("current version does not match the expected version"))
	_, err = s.api.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
		SecretId: &w.path, SecretString: &w.value, ClientRequestToken: &token, VersionStages: []string{PendingStage},
	})
	if code := codeOf(err); code == codeInvalidRequest || code == codeNotFound {
		return conflict
	}
	if err != nil {
		return s.fail(ctx, secretstore.OpPut, w.name, err)
	}
	move := &secretsmanager.UpdateSecretVersionStageInput{SecretId: &w.path, VersionStage: aws.String("AWSCURRENT"), MoveToVersionId: &token}
	if base != "" {
		move.RemoveFromVersionId = &base
	}
	_, err = s.api.UpdateSecretVersionStage(ctx, move)
	switch codeOf(err) {
	case "":
		if err != nil {
			return s.fail(ctx, secretstore.OpPut, w.name, err)
		}
		return nil
	case codeInvalidParameter, codeInvalidRequest, codeNotFound:
		// AWSCURRENT moved away from base (or the secret went): lost. The
		// losing version is left without labels, which makes it deprecated.
		_, _ = s.api.UpdateSecretVersionStage(ctx, &secretsmanager.UpdateSecretVersionStageInput{
			SecretId: &w.path, VersionStage: aws.String(PendingStage), RemoveFromVersionId: &token,
		})
		return conflict
	}
	return s.fail(ctx, secretstore.OpPut, w.name, err)
}

// syncTags makes the secret's tags equal labels: TagResource for new and
// changed ones, UntagResource for removed ones.
func (s *Store) syncTags(ctx context.Context, w write, old map[string]string) error {
	set := map[string]string{}
	for k, v := range w.labels {
		if ov, ok := old[k]; !ok || ov != v {
			set[k] = v
		}
	}
	var remove []string
	for k := range old {
		if _, ok := w.labels[k]; !ok {
			remove = append(remove, k)
		}
	}
	slices.Sort(remove)
	if len(set) > 0 {
		if _, err := s.api.TagResource(ctx, &secretsmanager.TagResourceInput{SecretId: &w.path, Tags: toTags(set)}); err != nil {
			return s.fail(ctx, secretstore.OpPut, w.name, err)
		}
	}
	if len(remove) > 0 {
		if _, err := s.api.UntagResource(ctx, &secretsmanager.UntagResourceInput{SecretId: &w.path, TagKeys: remove}); err != nil {
			return s.fail(ctx, secretstore.OpPut, w.name, err)
		}
	}
	return nil
}

// Delete implements secretstore.Store: DeleteSecret with the configured
// recovery window (or forced). A missing secret, or one already scheduled
// for deletion, is not an error.
func (s *Store) Delete(ctx context.Context, name string) error {
	path, err := s.path(ctx, secretstore.OpDelete, name)
	if err != nil {
		return err
	}
	in := &secretsmanager.DeleteSecretInput{SecretId: &path}
	switch {
	case s.force:
		in.ForceDeleteWithoutRecovery = aws.Bool(true)
	case s.window > 0:
		in.RecoveryWindowInDays = aws.Int64(int64(s.window))
	}
	_, err = s.api.DeleteSecret(ctx, in)
	switch codeOf(err) {
	case "":
		if err != nil {
			return s.fail(ctx, secretstore.OpDelete, name, err)
		}
		return nil
	case codeNotFound:
		return nil
	case codeInvalidRequest:
		// Refused: is it because the secret is already scheduled for deletion?
		m, derr := s.describe(ctx, secretstore.OpDelete, name, path)
		if errors.Is(derr, secretstore.ErrNotFound) || (derr == nil && m.pending) {
			return nil
		}
	}
	return s.fail(ctx, secretstore.OpDelete, name, err)
}

// List implements secretstore.Store with ListSecrets, filtered by name
// prefix server-side and again here, following NextToken over every page.
// Secrets scheduled for deletion are not listed. AWS documents ListSecrets
// as eventually consistent: it may lag recent writes.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := secretstore.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	if err := checkAWSName(prefix); err != nil {
		return nil, secretstore.NewError(secretstore.OpList, prefix, secretstore.ErrInvalid, err)
	}
	if err := s.live(ctx, secretstore.OpList, prefix); err != nil {
		return nil, err
	}
	full := prefix
	if s.scope != "" {
		full = string(s.scope) + "/" + prefix
	}
	if len(full) > MaxNameLength {
		return []string{}, nil // no AWS name is that long
	}
	in := &secretsmanager.ListSecretsInput{MaxResults: aws.Int32(int32(s.pageSize))}
	if full != "" {
		in.Filters = []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{full}}}
	}
	names := []string{}
	pages := secretsmanager.NewListSecretsPaginator(s.api, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.fail(ctx, secretstore.OpList, prefix, err)
		}
		for _, e := range page.SecretList {
			if e.DeletedDate != nil {
				continue
			}
			if name, ok := s.scope.Rel(aws.ToString(e.Name)); ok && strings.HasPrefix(name, prefix) && secretstore.ValidateName(name) == nil {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// CheckCredentials implements secretstore.CredentialChecker with one
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
// other answer are ErrUnavailable, after the SDK's retries. An identity
// without secretsmanager:ListSecrets always fails the check: grant it.
func (s *Store) CheckCredentials(ctx context.Context) error {
	const op = secretstore.OpCheckCredentials
	if err := s.live(ctx, op, ""); err != nil {
		return err
	}
	in := &secretsmanager.ListSecretsInput{MaxResults: aws.Int32(1)}
	if s.scope != "" {
		in.Filters = []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{string(s.scope) + "/"}}}
	}
	if _, err := s.api.ListSecrets(ctx, in); err != nil {
		return secretstore.CredentialCheckError(s.fail(ctx, op, "", err))
	}
	return nil
}

// GetBatch implements secretstore.BatchGetter: values come from
// BatchGetSecretValue, up to BatchSize secrets per call, and labels from
// one DescribeSecret per secret found (run a few at a time), since
// BatchGetSecretValue returns no tags. Missing secrets and secrets
// scheduled for deletion are absent from the result.
func (s *Store) GetBatch(ctx context.Context, names []string) (map[string]*secretstore.Secret, error) {
	byPath := map[string]string{}
	var paths []string
	for _, name := range names {
		path, err := s.path(ctx, secretstore.OpGet, name)
		if err != nil {
			return nil, err
		}
		if _, dup := byPath[path]; !dup {
			byPath[path] = name
			paths = append(paths, path)
		}
	}
	out := make(map[string]*secretstore.Secret, len(paths))
	for chunk := range slices.Chunk(paths, BatchSize) {
		if err := s.batchValues(ctx, chunk, byPath, out); err != nil {
			return nil, err
		}
	}
	if err := s.batchMetadata(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// batchValues reads one chunk of values into out, keyed by name.
func (s *Store) batchValues(ctx context.Context, paths []string, byPath map[string]string, out map[string]*secretstore.Secret) error {
	in := &secretsmanager.BatchGetSecretValueInput{SecretIdList: paths}
	for {
		res, err := s.api.BatchGetSecretValue(ctx, in)
		if err != nil {
			return s.fail(ctx, secretstore.OpGet, byPath[paths[0]], err)
		}
		for _, e := range res.Errors {
			code := aws.ToString(e.ErrorCode)
			if code == codeNotFound || code == codeInvalidRequest {
				continue // missing, or scheduled for deletion
			}
			name := byPath[aws.ToString(e.SecretId)]
			return secretstore.NewError(secretstore.OpGet, name, kindOfCode(code, 0), &APIError{Operation: "BatchGetSecretValue", Code: code})
		}
		for _, v := range res.SecretValues {
			name, ok := byPath[aws.ToString(v.Name)]
			if !ok {
				continue
			}
			data, err := decodeValue(secretstore.OpGet, name, v.SecretString)
			if err != nil {
				return err
			}
			out[name] = &secretstore.Secret{Name: name, Data: data, Version: aws.ToString(v.VersionId)}
		}
		if res.NextToken == nil {
			return nil
		}
		in.NextToken = res.NextToken
	}
}

// batchMetadata fills in labels and UpdatedAt with DescribeSecret, and
// drops secrets deleted since their values were read.
func (s *Store) batchMetadata(ctx context.Context, out map[string]*secretstore.Secret) error {
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
			m, err := s.describe(ctx, secretstore.OpGet, name, s.scope.Path(name))
			if err == nil {
				err = m.visible(secretstore.OpGet, name)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, secretstore.ErrNotFound):
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

// Close implements secretstore.Store. Later calls fail with ErrUnavailable.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// metadata is what DescribeSecret tells about a secret.
type metadata struct {
	pending bool   // scheduled for deletion
	current string // VersionId holding AWSCURRENT; "" if none
	labels  map[string]string
	changed time.Time
}

// visible returns a NotFound error for a secret the store's users cannot see.
func (m metadata) visible(op, name string) error {
	switch {
	case m.pending:
		return secretstore.NewError(op, name, secretstore.ErrNotFound, errors.New("secret is scheduled for deletion"))
	case m.current == "":
		return secretstore.NewError(op, name, secretstore.ErrNotFound, errors.New("secret has no current version"))
	}
	return nil
}

func (s *Store) describe(ctx context.Context, op, name, path string) (metadata, error) {
	out, err := s.api.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &path})
	if err != nil {
		return metadata{}, s.fail(ctx, op, name, err)
	}
	m := metadata{pending: out.DeletedDate != nil, labels: fromTags(out.Tags)}
	for id, stages := range out.VersionIdsToStages {
		if slices.Contains(stages, "AWSCURRENT") {
			m.current = id
		}
	}
	switch {
	case out.LastChangedDate != nil:
		m.changed = *out.LastChangedDate
	case out.CreatedDate != nil:
		m.changed = *out.CreatedDate
	}
	return m, nil
}

// readValue reads and decodes one version's value.
func (s *Store) readValue(ctx context.Context, op, name, path, versionID string) (secretstore.Data, error) {
	out, err := s.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &path, VersionId: &versionID})
	if code := codeOf(err); code == codeInvalidRequest || code == codeNotFound {
		// InvalidRequestException on a read means the secret was scheduled
		// for deletion since it was described.
		return nil, secretstore.NewError(op, name, secretstore.ErrNotFound, errors.New("secret was deleted while being read"))
	}
	if err != nil {
		return nil, s.fail(ctx, op, name, err)
	}
	return decodeValue(op, name, out.SecretString)
}

func decodeValue(op, name string, secretString *string) (secretstore.Data, error) {
	if secretString == nil {
		return nil, secretstore.NewError(op, name, secretstore.ErrInvalid, errors.New("secret holds SecretBinary, not a JSON object in SecretString"))
	}
	data, err := decodeData(*secretString)
	if err != nil {
		return nil, secretstore.NewError(op, name, secretstore.ErrInvalid, err)
	}
	return data, nil
}

// path validates name for op and returns its AWS secret name.
func (s *Store) path(ctx context.Context, op, name string) (string, error) {
	if err := secretstore.CheckName(op, name); err != nil {
		return "", err
	}
	if err := checkAWSName(name); err != nil {
		return "", secretstore.NewError(op, name, secretstore.ErrInvalid, err)
	}
	p := s.scope.Path(name)
	if len(p) > MaxNameLength {
		return "", secretstore.NewError(op, name, secretstore.ErrInvalid, fmt.Errorf("AWS secret name would be %d characters, over AWS's %d", len(p), MaxNameLength))
	}
	return p, s.live(ctx, op, name)
}

func (s *Store) live(ctx context.Context, op, name string) error {
	if err := ctx.Err(); err != nil {
		return secretstore.NewError(op, name, nil, err)
	}
	if s.closed.Load() {
		return secretstore.NewError(op, name, secretstore.ErrUnavailable, errors.New("store is closed"))
	}
	return nil
}

// token returns a new client request token for a Put of name (a UUID, which
// becomes the new version's VersionId).
func (s *Store) token(name string) (string, error) {
	t, err := s.tokens.GetUUID()
	if err != nil {
		return "", secretstore.NewError(secretstore.OpPut, name, secretstore.ErrUnavailable, errors.New("no randomness for a client request token"))
	}
	return t, nil
}
