package awsmock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The JSON shapes of the AWS JSON 1.1 protocol for the operations the
// endpoint serves. Member names are AWS's; blobs are standard base64 strings
// (encoding/json's []byte form) and timestamps are epoch seconds.

type tagJSON struct {
	Key   *string `json:"Key,omitempty"`
	Value *string `json:"Value,omitempty"`
}

type filterJSON struct {
	Key    string   `json:"Key,omitempty"`
	Values []string `json:"Values,omitempty"`
}

// epochTime marshals as fractional epoch seconds, the JSON protocol's
// default timestamp format.
type epochTime time.Time

func (t epochTime) MarshalJSON() ([]byte, error) {
	ms := time.Time(t).UnixMilli()
	return []byte(strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)), nil
}

func stamp(t time.Time) *epochTime {
	if t.IsZero() {
		return nil
	}
	e := epochTime(t)
	return &e
}

type createSecretInput struct {
	Name                        *string
	ClientRequestToken          *string
	Description                 *string
	KmsKeyId                    *string
	SecretBinary                []byte
	SecretString                *string
	Tags                        []tagJSON
	AddReplicaRegions           json.RawMessage
	ForceOverwriteReplicaSecret bool
	Type                        *string
}

type createSecretOutput struct {
	ARN       string
	Name      string
	VersionId *string `json:",omitempty"`
}

type getSecretValueInput struct {
	SecretId     *string
	VersionId    *string
	VersionStage *string
}

type secretValue struct {
	ARN           string
	Name          string
	VersionId     string
	SecretString  *string `json:",omitempty"`
	SecretBinary  []byte  `json:",omitempty"`
	VersionStages []string
	CreatedDate   *epochTime `json:",omitempty"`
}

type batchGetSecretValueInput struct {
	SecretIdList []string
	Filters      []filterJSON
	MaxResults   *int64
	NextToken    *string
}

type batchError struct {
	ErrorCode string
	Message   string
	SecretId  string
}

type batchGetSecretValueOutput struct {
	SecretValues []secretValue
	Errors       []batchError `json:",omitempty"`
	NextToken    *string      `json:",omitempty"`
}

type putSecretValueInput struct {
	SecretId           *string
	ClientRequestToken *string
	SecretBinary       []byte
	SecretString       *string
	VersionStages      []string
	RotationToken      *string
}

type putSecretValueOutput struct {
	ARN           string
	Name          string
	VersionId     string
	VersionStages []string
}

type secretIDInput struct {
	SecretId *string
}

type describeSecretOutput struct {
	secretMetadata
	VersionIdsToStages map[string][]string `json:",omitempty"`
}

type listSecretsInput struct {
	Filters                []filterJSON
	IncludePlannedDeletion *bool
	MaxResults             *int64
	NextToken              *string
	SortBy                 *string
	SortOrder              *string
}

// secretMetadata is what DescribeSecret and ListSecrets tell of a secret
// besides its versions.
type secretMetadata struct {
	ARN              string
	Name             string
	Description      *string    `json:",omitempty"`
	KmsKeyId         *string    `json:",omitempty"`
	CreatedDate      *epochTime `json:",omitempty"`
	LastChangedDate  *epochTime `json:",omitempty"`
	LastAccessedDate *epochTime `json:",omitempty"`
	DeletedDate      *epochTime `json:",omitempty"`
	Tags             []tagJSON  `json:",omitempty"`
}

type secretListEntry struct {
	secretMetadata
	SecretVersionsToStages map[string][]string `json:",omitempty"`
}

type listSecretsOutput struct {
	SecretList []secretListEntry
	NextToken  *string `json:",omitempty"`
}

type deleteSecretInput struct {
	SecretId                   *string
	ForceDeleteWithoutRecovery *bool
	RecoveryWindowInDays       *int64
}

type deleteSecretOutput struct {
	ARN          string
	Name         string
	DeletionDate *epochTime `json:",omitempty"`
}

type nameOutput struct {
	ARN  string
	Name string
}

type tagResourceInput struct {
	SecretId *string
	Tags     []tagJSON
}

type untagResourceInput struct {
	SecretId *string
	TagKeys  []string
}

type updateSecretVersionStageInput struct {
	SecretId            *string
	VersionStage        *string
	MoveToVersionId     *string
	RemoveFromVersionId *string
}

type emptyOutput struct{}

// errorBody is AWS's JSON 1.1 error shape.
type errorBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// decodeInput decodes a request body into dst, a pointer to one of the input
// structs. An empty body counts as {}. Anything that is not a single JSON
// object of the right member types is a SerializationException, as AWS
// answers; unknown members are ignored so newer SDKs keep working.
func decodeInput(body []byte, dst any) *apiError {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] != '{' {
		return errSerialization("request body is not a JSON object")
	}
	if err := json.Unmarshal(trimmed, dst); err != nil {
		return errSerialization(describeJSONError(err))
	}
	return nil
}

// describeJSONError names where decoding failed without quoting the input,
// which may hold a secret value.
func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var be base64.CorruptInputError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	case errors.As(err, &be):
		return "a blob member is not valid base64"
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("member %s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("expected %s, got JSON %s", te.Type, te.Value)
	}
	return "request body could not be decoded"
}
