package awsmock

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
)

type tag struct{ key, value string }

type version struct {
	id      string
	str     *string
	bin     []byte
	stages  []string
	created time.Time
}

type secret struct {
	seq                   int64
	name, arn             string
	description, kmsKeyID string
	created, changed      time.Time
	accessed              time.Time // a date: AWS keeps the day only
	deleted, deletionDate time.Time // zero unless pending deletion
	tags                  []tag     // in the order first set
	versions              []*version
}

func (sec *secret) pending() bool { return !sec.deleted.IsZero() }

func (sec *secret) version(id string) *version {
	for _, v := range sec.versions {
		if v.id == id {
			return v
		}
	}
	return nil
}

// stageOwner returns the version the staging label is attached to, or nil.
func (sec *secret) stageOwner(label string) *version {
	for _, v := range sec.versions {
		if slices.Contains(v.stages, label) {
			return v
		}
	}
	return nil
}

// attach moves label to v. Moving AWSCURRENT also moves AWSPREVIOUS to the
// version AWSCURRENT leaves, as Secrets Manager does.
func (sec *secret) attach(v *version, label string) {
	if label == StageCurrent {
		old := sec.stageOwner(StageCurrent)
		if old == v {
			return
		}
		if old != nil {
			for _, o := range sec.versions {
				o.stages = slices.DeleteFunc(o.stages, func(s string) bool { return s == StagePrevious })
			}
			old.stages = slices.DeleteFunc(old.stages, func(s string) bool { return s == StageCurrent })
			old.stages = append(old.stages, StagePrevious)
		}
		v.stages = append(v.stages, StageCurrent)
		return
	}
	for _, o := range sec.versions {
		if o != v {
			o.stages = slices.DeleteFunc(o.stages, func(s string) bool { return s == label })
		}
	}
	if !slices.Contains(v.stages, label) {
		v.stages = append(v.stages, label)
	}
}

// trimVersions drops the oldest deprecated (unlabelled) versions beyond MaxVersions.
func (sec *secret) trimVersions() {
	for len(sec.versions) > MaxVersions {
		i := slices.IndexFunc(sec.versions, func(v *version) bool { return len(v.stages) == 0 })
		if i < 0 {
			return
		}
		sec.versions = slices.Delete(sec.versions, i, i+1)
	}
}

func (sec *secret) stagesMap() map[string][]string {
	m := map[string][]string{}
	for _, v := range sec.versions {
		if len(v.stages) > 0 {
			m[v.id] = slices.Clone(v.stages)
		}
	}
	return m
}

func (sec *secret) tagsJSON() []tagJSON {
	out := make([]tagJSON, 0, len(sec.tags))
	for _, t := range sec.tags {
		out = append(out, tagJSON{Key: ptr(t.key), Value: ptr(t.value)})
	}
	return out
}

func (sec *secret) value(v *version) secretValue {
	return secretValue{
		ARN: sec.arn, Name: sec.name, VersionId: v.id,
		SecretString: v.str, SecretBinary: bytes.Clone(v.bin),
		VersionStages: slices.Clone(v.stages), CreatedDate: stamp(v.created),
	}
}

func (sec *secret) metadata() secretMetadata {
	return secretMetadata{
		ARN: sec.arn, Name: sec.name, Description: optional(sec.description), KmsKeyId: optional(sec.kmsKeyID),
		CreatedDate: stamp(sec.created), LastChangedDate: stamp(sec.changed), LastAccessedDate: stamp(sec.accessed),
		DeletedDate: stamp(sec.deleted), Tags: sec.tagsJSON(),
	}
}

func ptr[T any](v T) *T { return &v }

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// find returns the secret named or ARN'd by id, or nil. s.mu must be held.
func (s *Server) find(id string) *secret {
	if sec, ok := s.secrets[id]; ok {
		return sec
	}
	if strings.HasPrefix(id, "arn:") {
		for _, sec := range s.secrets {
			if sec.arn == id {
				return sec
			}
		}
	}
	return nil
}

// live finds the secret and refuses one pending deletion, as every
// operation but DescribeSecret, DeleteSecret and RestoreSecret does.
func (s *Server) live(id *string) (*secret, *apiError) {
	if err := checkSecretID(id); err != nil {
		return nil, err
	}
	sec := s.find(*id)
	if sec == nil {
		return nil, errNotFound()
	}
	if sec.pending() {
		return nil, errMarkedForDeletion()
	}
	return sec, nil
}

// purge removes secrets whose recovery window has ended. s.mu must be held.
func (s *Server) purge() {
	now := s.now()
	for name, sec := range s.secrets {
		if sec.pending() && !now.Before(sec.deletionDate) {
			delete(s.secrets, name)
		}
	}
}

func (s *Server) createSecret(in *createSecretInput) (createSecretOutput, *apiError) {
	if in.Name == nil {
		return createSecretOutput{}, errValidation("Name is required.")
	}
	name := *in.Name
	if err := checkName(name); err != nil {
		return createSecretOutput{}, err
	}
	if r := bytes.TrimSpace(in.AddReplicaRegions); len(r) > 0 && string(r) != "null" && string(r) != "[]" {
		return createSecretOutput{}, errInvalidParameter("AddReplicaRegions is not supported by this endpoint.")
	}
	hasValue, err := checkValue(in.SecretString, in.SecretBinary, false)
	if err != nil {
		return createSecretOutput{}, err
	}
	token, err := requestToken(in.ClientRequestToken)
	if err != nil {
		return createSecretOutput{}, err
	}
	tags, err := checkTags(in.Tags)
	if err != nil {
		return createSecretOutput{}, err
	}
	if len(tags) > MaxTags {
		return createSecretOutput{}, errValidation("A secret can have at most %d tags.", MaxTags)
	}
	if in.Description != nil && len(*in.Description) > 2048 {
		return createSecretOutput{}, errValidation("Description must be at most 2048 characters.")
	}
	if existing := s.secrets[name]; existing != nil {
		if existing.pending() {
			return createSecretOutput{}, clientError("InvalidRequestException", "You can't create this secret because a secret with this name is already scheduled for deletion.")
		}
		if v := existing.version(token); hasValue && v != nil && sameValue(v, in.SecretString, in.SecretBinary) {
			return createSecretOutput{ARN: existing.arn, Name: existing.name, VersionId: &v.id}, nil // a retry of this very request
		}
		return createSecretOutput{}, clientError("ResourceExistsException", "The operation failed because the secret %s already exists.", name)
	}
	now := s.now()
	s.seq++
	sec := &secret{
		seq: s.seq, name: name, arn: fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-%s", s.region, s.account, name, arnSuffix()),
		created: now, changed: now, tags: tags,
	}
	if in.Description != nil {
		sec.description = *in.Description
	}
	if in.KmsKeyId != nil {
		sec.kmsKeyID = *in.KmsKeyId
	}
	out := createSecretOutput{ARN: sec.arn, Name: sec.name}
	if hasValue {
		v := &version{id: token, str: in.SecretString, bin: bytes.Clone(in.SecretBinary), created: now}
		sec.versions = append(sec.versions, v)
		sec.attach(v, StageCurrent)
		out.VersionId = &v.id
	}
	s.secrets[name] = sec
	return out, nil
}

func (s *Server) getSecretValue(in *getSecretValueInput) (secretValue, *apiError) {
	sec, err := s.live(in.SecretId)
	if err != nil {
		return secretValue{}, err
	}
	var v *version
	switch {
	case in.VersionId != nil:
		if v = sec.version(*in.VersionId); v == nil {
			return secretValue{}, clientError("ResourceNotFoundException", "Secrets Manager can't find the specified secret value for VersionId: %s", *in.VersionId)
		}
		if in.VersionStage != nil && !slices.Contains(v.stages, *in.VersionStage) {
			return secretValue{}, errInvalidParameter("You provided a VersionStage that is not associated to the provided VersionId.")
		}
	default:
		stage := StageCurrent
		if in.VersionStage != nil {
			stage = *in.VersionStage
		}
		if v = sec.stageOwner(stage); v == nil {
			return secretValue{}, clientError("ResourceNotFoundException", "Secrets Manager can't find the specified secret value for staging label: %s", stage)
		}
	}
	sec.accessed = day(s.now())
	return sec.value(v), nil
}

func (s *Server) batchGetSecretValue(in *batchGetSecretValueInput) (batchGetSecretValueOutput, *apiError) {
	if (len(in.SecretIdList) > 0) == (len(in.Filters) > 0) {
		return batchGetSecretValueOutput{}, errInvalidParameter("Either 'SecretIdList' or 'Filters' must be provided, but not both.")
	}
	out := batchGetSecretValueOutput{SecretValues: []secretValue{}}
	now := day(s.now())
	if len(in.SecretIdList) > 0 {
		if in.MaxResults != nil {
			return out, errInvalidParameter("'Filters' not specified. 'Filters' must also be specified when 'MaxResults' is provided.")
		}
		if len(in.SecretIdList) > MaxBatchSecrets {
			return out, errValidation("SecretIdList must have at most %d members.", MaxBatchSecrets)
		}
		seen := map[string]bool{}
		for _, id := range in.SecretIdList {
			if seen[id] {
				continue
			}
			seen[id] = true
			if err := checkSecretID(&id); err != nil {
				return out, err
			}
			sec := s.find(id)
			var cur *version
			if sec != nil {
				cur = sec.stageOwner(StageCurrent)
			}
			switch {
			case sec == nil || cur == nil:
				out.Errors = append(out.Errors, batchError{ErrorCode: "ResourceNotFoundException", Message: "Secrets Manager can't find the specified secret.", SecretId: id})
			case sec.pending():
				out.Errors = append(out.Errors, batchError{ErrorCode: "InvalidRequestException", Message: "You can't perform this operation on the secret because it was marked for deletion.", SecretId: id})
			default:
				sec.accessed = now
				out.SecretValues = append(out.SecretValues, sec.value(cur))
			}
		}
		return out, nil
	}
	if err := checkFilters(in.Filters); err != nil {
		return out, err
	}
	limit := min(s.pageSize, MaxBatchSecrets)
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > MaxBatchSecrets {
			return out, errValidation("MaxResults must be between 1 and %d.", MaxBatchSecrets)
		}
		limit = int(*in.MaxResults)
	}
	var matching []*secret
	for _, sec := range s.secrets {
		if !sec.pending() && sec.stageOwner(StageCurrent) != nil && matchesAll(sec, in.Filters) {
			matching = append(matching, sec)
		}
	}
	page, next, err := paginate(matching, "created-date", "desc", limit, in.NextToken)
	if err != nil {
		return out, err
	}
	for _, sec := range page {
		sec.accessed = now
		out.SecretValues = append(out.SecretValues, sec.value(sec.stageOwner(StageCurrent)))
	}
	out.NextToken = next
	return out, nil
}

func (s *Server) putSecretValue(in *putSecretValueInput) (putSecretValueOutput, *apiError) {
	sec, err := s.live(in.SecretId)
	if err != nil {
		return putSecretValueOutput{}, err
	}
	if _, err := checkValue(in.SecretString, in.SecretBinary, true); err != nil {
		return putSecretValueOutput{}, err
	}
	token, err := requestToken(in.ClientRequestToken)
	if err != nil {
		return putSecretValueOutput{}, err
	}
	stages := in.VersionStages
	if stages == nil {
		stages = []string{StageCurrent}
	}
	if err := checkStages(stages); err != nil {
		return putSecretValueOutput{}, err
	}
	if v := sec.version(token); v != nil {
		if !sameValue(v, in.SecretString, in.SecretBinary) {
			return putSecretValueOutput{}, clientError("ResourceExistsException", "You can't modify an existing version, you can only create new versions.")
		}
		// The same request again (a retry): ignored, as AWS documents.
		return putSecretValueOutput{ARN: sec.arn, Name: sec.name, VersionId: v.id, VersionStages: slices.Clone(v.stages)}, nil
	}
	now := s.now()
	v := &version{id: token, str: in.SecretString, bin: bytes.Clone(in.SecretBinary), created: now}
	sec.versions = append(sec.versions, v)
	for _, st := range stages {
		sec.attach(v, st)
	}
	sec.changed = now
	sec.trimVersions()
	return putSecretValueOutput{ARN: sec.arn, Name: sec.name, VersionId: v.id, VersionStages: slices.Clone(v.stages)}, nil
}

func (s *Server) describeSecret(in *secretIDInput) (describeSecretOutput, *apiError) {
	if err := checkSecretID(in.SecretId); err != nil {
		return describeSecretOutput{}, err
	}
	sec := s.find(*in.SecretId)
	if sec == nil {
		return describeSecretOutput{}, errNotFound()
	}
	return describeSecretOutput{secretMetadata: sec.metadata(), VersionIdsToStages: sec.stagesMap()}, nil
}

func (s *Server) listSecrets(in *listSecretsInput) (listSecretsOutput, *apiError) {
	limit := s.pageSize
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > MaxListResults {
			return listSecretsOutput{}, errValidation("MaxResults must be between 1 and %d.", MaxListResults)
		}
		limit = int(*in.MaxResults)
	}
	if err := checkFilters(in.Filters); err != nil {
		return listSecretsOutput{}, err
	}
	by, order := "created-date", "desc"
	if in.SortBy != nil {
		by = *in.SortBy
	}
	if in.SortOrder != nil {
		order = *in.SortOrder
	}
	if !slices.Contains([]string{"created-date", "last-accessed-date", "last-changed-date", "name"}, by) {
		return listSecretsOutput{}, errValidation("SortBy must be one of created-date, last-accessed-date, last-changed-date, name.")
	}
	if order != "asc" && order != "desc" {
		return listSecretsOutput{}, errValidation("SortOrder must be asc or desc.")
	}
	includeDeleted := in.IncludePlannedDeletion != nil && *in.IncludePlannedDeletion
	var matching []*secret
	for _, sec := range s.secrets {
		if (includeDeleted || !sec.pending()) && matchesAll(sec, in.Filters) {
			matching = append(matching, sec)
		}
	}
	page, next, err := paginate(matching, by, order, limit, in.NextToken)
	if err != nil {
		return listSecretsOutput{}, err
	}
	out := listSecretsOutput{SecretList: make([]secretListEntry, 0, len(page)), NextToken: next}
	for _, sec := range page {
		out.SecretList = append(out.SecretList, secretListEntry{secretMetadata: sec.metadata(), SecretVersionsToStages: sec.stagesMap()})
	}
	return out, nil
}

func (s *Server) deleteSecret(in *deleteSecretInput) (deleteSecretOutput, *apiError) {
	if err := checkSecretID(in.SecretId); err != nil {
		return deleteSecretOutput{}, err
	}
	force := in.ForceDeleteWithoutRecovery != nil && *in.ForceDeleteWithoutRecovery
	if force && in.RecoveryWindowInDays != nil {
		return deleteSecretOutput{}, errInvalidParameter("You can't use ForceDeleteWithoutRecovery in conjunction with RecoveryWindowInDays.")
	}
	days := int64(30)
	if in.RecoveryWindowInDays != nil {
		if days = *in.RecoveryWindowInDays; days < 7 || days > 30 {
			return deleteSecretOutput{}, errInvalidParameter("The RecoveryWindowInDays value must be between 7 and 30 days (inclusive).")
		}
	}
	now := s.now()
	sec := s.find(*in.SecretId)
	switch {
	case sec == nil && force:
		// AWS documents that forcing the deletion of a missing secret succeeds.
		return deleteSecretOutput{Name: *in.SecretId, DeletionDate: stamp(now)}, nil
	case sec == nil:
		return deleteSecretOutput{}, errNotFound()
	case force:
		delete(s.secrets, sec.name)
		return deleteSecretOutput{ARN: sec.arn, Name: sec.name, DeletionDate: stamp(now)}, nil
	case sec.pending():
		return deleteSecretOutput{}, clientError("InvalidRequestException", "You can't perform this operation on the secret because it was already scheduled for deletion.")
	}
	sec.deleted, sec.deletionDate, sec.changed = now, now.Add(time.Duration(days)*24*time.Hour), now
	return deleteSecretOutput{ARN: sec.arn, Name: sec.name, DeletionDate: stamp(sec.deletionDate)}, nil
}

func (s *Server) restoreSecret(in *secretIDInput) (nameOutput, *apiError) {
	if err := checkSecretID(in.SecretId); err != nil {
		return nameOutput{}, err
	}
	sec := s.find(*in.SecretId)
	if sec == nil {
		return nameOutput{}, errNotFound()
	}
	if sec.pending() {
		sec.deleted, sec.deletionDate, sec.changed = time.Time{}, time.Time{}, s.now()
	}
	return nameOutput{ARN: sec.arn, Name: sec.name}, nil
}

func (s *Server) tagResource(in *tagResourceInput) (emptyOutput, *apiError) {
	sec, err := s.live(in.SecretId)
	if err != nil {
		return emptyOutput{}, err
	}
	tags, err := checkTags(in.Tags)
	if err != nil {
		return emptyOutput{}, err
	}
	merged := slices.Clone(sec.tags)
	for _, t := range tags {
		if i := slices.IndexFunc(merged, func(m tag) bool { return m.key == t.key }); i >= 0 {
			merged[i].value = t.value
		} else {
			merged = append(merged, t)
		}
	}
	if len(merged) > MaxTags {
		return emptyOutput{}, errValidation("A secret can have at most %d tags.", MaxTags)
	}
	sec.tags, sec.changed = merged, s.now()
	return emptyOutput{}, nil
}

func (s *Server) untagResource(in *untagResourceInput) (emptyOutput, *apiError) {
	sec, err := s.live(in.SecretId)
	if err != nil {
		return emptyOutput{}, err
	}
	if len(in.TagKeys) == 0 {
		return emptyOutput{}, errValidation("TagKeys is required.")
	}
	for _, k := range in.TagKeys {
		if k == "" || len([]rune(k)) > 128 {
			return emptyOutput{}, errValidation("Tag keys must be 1 to 128 characters.")
		}
	}
	sec.tags = slices.DeleteFunc(slices.Clone(sec.tags), func(t tag) bool { return slices.Contains(in.TagKeys, t.key) })
	sec.changed = s.now()
	return emptyOutput{}, nil
}

func (s *Server) updateSecretVersionStage(in *updateSecretVersionStageInput) (nameOutput, *apiError) {
	sec, err := s.live(in.SecretId)
	if err != nil {
		return nameOutput{}, err
	}
	if in.VersionStage == nil {
		return nameOutput{}, errValidation("VersionStage is required.")
	}
	stage := *in.VersionStage
	if err := checkStages([]string{stage}); err != nil {
		return nameOutput{}, err
	}
	owner := sec.stageOwner(stage)
	var from *version
	if in.RemoveFromVersionId != nil {
		if from = sec.version(*in.RemoveFromVersionId); from == nil {
			return nameOutput{}, errInvalidParameter("The version %s doesn't exist.", *in.RemoveFromVersionId)
		}
		if owner != from {
			return nameOutput{}, errInvalidParameter("When you move staging label %s, if you specify RemoveFromVersionId, it must be set to the version that currently has the staging label %s.", stage, stage)
		}
	}
	switch {
	case in.MoveToVersionId != nil:
		to := sec.version(*in.MoveToVersionId)
		if to == nil {
			return nameOutput{}, clientError("ResourceNotFoundException", "Secrets Manager can't find the specified secret value for VersionId: %s", *in.MoveToVersionId)
		}
		if owner != nil && owner != to && from == nil {
			return nameOutput{}, errInvalidParameter("The parameter RemoveFromVersionId can't be empty. Staging label %s is currently attached to version %s, so you must explicitly reference that version in RemoveFromVersionId.", stage, owner.id)
		}
		sec.attach(to, stage)
	case from == nil:
		return nameOutput{}, errInvalidParameter("You must specify MoveToVersionId or RemoveFromVersionId.")
	case stage == StageCurrent:
		return nameOutput{}, errInvalidParameter("You can't remove the staging label AWSCURRENT; move it to another version instead.")
	default:
		from.stages = slices.DeleteFunc(from.stages, func(s string) bool { return s == stage })
	}
	sec.changed = s.now()
	return nameOutput{ARN: sec.arn, Name: sec.name}, nil
}

// Validation, with AWS's error codes: model constraints (lengths, ranges,
// enums) are ValidationException, semantic ones InvalidParameterException.

func checkSecretID(id *string) *apiError {
	if id == nil || *id == "" {
		return errValidation("SecretId is required.")
	}
	if len(*id) > 2048 {
		return errValidation("SecretId must be at most 2048 characters.")
	}
	return nil
}

func checkName(name string) *apiError {
	if name == "" || len(name) > MaxNameLength {
		return errValidation("Name must be 1 to %d characters.", MaxNameLength)
	}
	for _, r := range name {
		if r >= unicode.MaxASCII || (!unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("/_+=.@-", r)) {
			return errInvalidParameter("Invalid name. Must be a valid name containing alphanumeric characters, or any of the following: -/_+=.@!")
		}
	}
	return nil
}

// checkValue checks SecretString/SecretBinary and reports whether a value was given.
func checkValue(str *string, bin []byte, required bool) (bool, *apiError) {
	switch {
	case str != nil && bin != nil:
		return false, errInvalidParameter("You can't specify both a binary secret value and a string secret value in the same secret.")
	case str == nil && bin == nil && required:
		return false, errInvalidParameter("You must provide either SecretString or SecretBinary.")
	case str != nil && len(*str) > MaxSecretStringBytes, len(bin) > MaxSecretStringBytes:
		return false, errValidation("The secret value must be at most %d bytes.", MaxSecretStringBytes)
	}
	return str != nil || bin != nil, nil
}

func sameValue(v *version, str *string, bin []byte) bool {
	if (v.str == nil) != (str == nil) {
		return false
	}
	if str != nil {
		return *v.str == *str
	}
	return bytes.Equal(v.bin, bin)
}

// requestToken returns the client request token, or a new one when none was
// sent (raw HTTP callers must send one; SDKs always do).
func requestToken(t *string) (string, *apiError) {
	if t == nil {
		return newID(), nil
	}
	if n := len(*t); n < 32 || n > 64 {
		return "", errValidation("ClientRequestToken must be 32 to 64 characters.")
	}
	return *t, nil
}

func checkStages(stages []string) *apiError {
	if len(stages) < 1 || len(stages) > 20 {
		return errValidation("VersionStages must have 1 to 20 members.")
	}
	for _, st := range stages {
		if st == "" || len(st) > 256 {
			return errValidation("A staging label must be 1 to 256 characters.")
		}
	}
	return nil
}

func checkTags(in []tagJSON) ([]tag, *apiError) {
	var out []tag
	for _, t := range in {
		if t.Key == nil || *t.Key == "" || len([]rune(*t.Key)) > 128 {
			return nil, errValidation("Tag keys must be 1 to 128 characters.")
		}
		val := ""
		if t.Value != nil {
			val = *t.Value
		}
		if len([]rune(val)) > 256 {
			return nil, errValidation("Tag values must be at most 256 characters.")
		}
		if !tagText(*t.Key) || !tagText(val) {
			return nil, errValidation("Tags may contain only letters, numbers, spaces and _ . : / = + - @.")
		}
		if strings.HasPrefix(strings.ToLower(*t.Key), "aws:") {
			return nil, errInvalidParameter("Tag keys beginning with aws: are reserved.")
		}
		if slices.ContainsFunc(out, func(o tag) bool { return o.key == *t.Key }) {
			return nil, errInvalidParameter("Duplicate tag key %s.", *t.Key)
		}
		out = append(out, tag{key: *t.Key, value: val})
	}
	return out, nil
}

// tagText reports whether s uses only the characters AWS allows in tags.
func tagText(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.Is(unicode.Zs, r) && !strings.ContainsRune("_.:/=+-@", r) {
			return false
		}
	}
	return true
}

func filterKeys() []string {
	return []string{"description", "name", "tag-key", "tag-value", "primary-region", "owning-service", "all"}
}

func checkFilters(fs []filterJSON) *apiError {
	if len(fs) > 10 {
		return errValidation("Filters must have at most 10 members.")
	}
	for _, f := range fs {
		if !slices.Contains(filterKeys(), f.Key) {
			return errValidation("Filter Key must be one of %s.", strings.Join(filterKeys(), ", "))
		}
		if len(f.Values) < 1 || len(f.Values) > 10 {
			return errValidation("Filter Values must have 1 to 10 members.")
		}
		for _, v := range f.Values {
			if v == "" || len(v) > 512 {
				return errValidation("A filter value must be 1 to 512 characters.")
			}
		}
	}
	return nil
}

// matchesAll reports whether sec passes every filter. Within a filter, a
// secret matches when any plain value matches and no "!"-negated value does.
func matchesAll(sec *secret, fs []filterJSON) bool {
	for _, f := range fs {
		var fields []string
		fold := false
		switch f.Key {
		case "name":
			fields = []string{sec.name}
		case "description":
			fields, fold = []string{sec.description}, true
		case "tag-key":
			for _, t := range sec.tags {
				fields = append(fields, t.key)
			}
		case "tag-value":
			for _, t := range sec.tags {
				fields = append(fields, t.value)
			}
		case "all":
			fold = true
			texts := []string{sec.name, sec.description}
			for _, t := range sec.tags {
				texts = append(texts, t.key, t.value)
			}
			for _, t := range texts {
				fields = append(fields, t)
				fields = append(fields, strings.FieldsFunc(t, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })...)
			}
		}
		matched, positives := false, 0
		for _, v := range f.Values {
			neg, isNeg := strings.CutPrefix(v, "!")
			hit := slices.ContainsFunc(fields, func(field string) bool {
				if fold {
					return strings.HasPrefix(strings.ToLower(field), strings.ToLower(neg))
				}
				return strings.HasPrefix(field, neg)
			})
			if isNeg {
				if hit {
					return false
				}
				continue
			}
			positives++
			matched = matched || hit
		}
		if positives > 0 && !matched {
			return false
		}
	}
	return true
}

// pageToken is the decoded form of a NextToken: the sort and the position
// of the last secret returned, so paging is stable while secrets change.
type pageToken struct {
	By    string `json:"b"`
	Order string `json:"o"`
	Key   string `json:"k"`
	Seq   int64  `json:"s"`
}

func sortKey(sec *secret, by string) string {
	t := sec.created
	switch by {
	case "name":
		return sec.name
	case "last-changed-date":
		t = sec.changed
	case "last-accessed-date":
		t = sec.accessed
	}
	if t.IsZero() {
		return fmt.Sprintf("%020d", 0)
	}
	return fmt.Sprintf("%020d", max(t.UnixNano(), 0))
}

func paginate(secs []*secret, by, order string, limit int, token *string) ([]*secret, *string, *apiError) {
	cmpSec := func(a, b *secret) int {
		return cmp.Or(strings.Compare(sortKey(a, by), sortKey(b, by)), cmp.Compare(a.seq, b.seq))
	}
	slices.SortFunc(secs, cmpSec)
	if order == "desc" {
		slices.Reverse(secs)
	}
	start := 0
	if token != nil {
		raw, err := base64.RawURLEncoding.DecodeString(*token)
		var pt pageToken
		if err != nil || json.Unmarshal(raw, &pt) != nil || pt.By != by || pt.Order != order {
			return nil, nil, clientError("InvalidNextTokenException", "The NextToken value is invalid.")
		}
		start = len(secs)
		for i, sec := range secs {
			c := cmp.Or(strings.Compare(sortKey(sec, by), pt.Key), cmp.Compare(sec.seq, pt.Seq))
			if (order == "asc" && c > 0) || (order == "desc" && c < 0) {
				start = i
				break
			}
		}
	}
	end := min(start+limit, len(secs))
	page := secs[start:end]
	if end == len(secs) {
		return page, nil, nil
	}
	last := secs[end-1]
	raw, _ := json.Marshal(pageToken{By: by, Order: order, Key: sortKey(last, by), Seq: last.seq})
	next := base64.RawURLEncoding.EncodeToString(raw)
	return page, &next, nil
}

func day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
