// Package awssm is the AWS Secrets Manager backend of secretstore, on the
// official aws-sdk-go-v2 client. Importing it registers the type "awssm";
// New builds a store from Go options (an aws.Config or a ready client).
//
// # Configuration
//
// The JSON config's "awssm" section:
//
//	{
//	  "type": "awssm",
//	  "defaultScope": "myorg",
//	  "awssm": {
//	    "region": "eu-west-1",          // default: AWS_REGION / profile
//	    "endpoint": "http://127.0.0.1:4566", // emulators, VPC endpoints
//	    "profile": "edge",              // shared-config profile
//	    "accessKeyId": "...", "secretAccessKey": "...", "sessionToken": "...",
//	                                    // static keys, for emulators and tests
//	    "recoveryWindowDays": 7,        // 7..30, default 30; or
//	    "forceDelete": false,           // delete without recovery
//	    "kmsKeyId": "alias/edge",       // key for new secrets
//	    "maxAttempts": 5,               // SDK attempts per call, default 3
//	    "maxBackoff": "2s"              // longest retry delay, default 20s
//	  }
//	}
//
// Without static keys the SDK's default credential chain applies
// (environment, shared files, web identity, ECS/EC2 roles). Validate reports
// every problem at once.
//
// # Names and scope
//
// The config's defaultScope (Options.Scope) is the name prefix: secret
// "db/password" in scope "myorg" is the AWS secret "myorg/db/password".
// There is no separate prefix setting. Names are checked with
// secretstore.ValidateName, so no name escapes its scope, and must also fit
// AWS: ASCII letters, digits and / _ + = . @ -, at most 512 characters with
// the scope. Other names fail with ErrInvalid before any call.
//
// # Values
//
// A secret's data is stored as a JSON object in SecretString, one member
// per key. Values that are valid UTF-8 are JSON strings, so such secrets
// read naturally in the console and in other tools. A value that is not
// valid UTF-8 is stored base64-encoded (standard alphabet) and its key is
// listed in the reserved member "edgesecrets:base64" (BinaryKeysField),
// which appears only when needed; Put rejects a data key of that name.
// Reading a secret written by another tool, string members are taken as
// they are and other JSON values (numbers, booleans, objects) as their
// compact JSON text. A SecretString that is not a JSON object, or a
// SecretBinary secret, fails with ErrInvalid (the message never quotes the
// content); Put overwrites such a secret.
//
// Labels are the secret's tags (at most 50; keys up to 128 and values up to
// 256 letters, digits, spaces and _ . : / = + - @; no "aws:" prefix). Tags
// AWS services set (keys starting with "aws:") are not labels; Put leaves
// them alone.
// Version is the VersionId that holds AWSCURRENT; UpdatedAt is the secret's
// LastChangedDate, which tag changes move too. A change of labels alone
// leaves the Version as it is: AWS versions values, not tags.
//
// # Calls
//
//   - Get: DescribeSecret (tags, current version, deletion state), then
//     GetSecretValue of that version.
//   - Stat: DescribeSecret only; no value is read.
//   - GetBatch (secretstore.BatchGetter): BatchGetSecretValue per 20 names,
//     plus one DescribeSecret per secret found for its tags.
//   - List: ListSecrets with a name-prefix filter, following NextToken.
//     AWS documents ListSecrets as eventually consistent.
//   - Put: DescribeSecret and GetSecretValue to compare; a Put that changes
//     nothing makes no write call. A new secret is one CreateSecret with its
//     tags; an existing one gets PutSecretValue when the data changed, then
//     TagResource/UntagResource when the labels did.
//   - Delete: DeleteSecret with the recovery window, or forced.
//
// Every CreateSecret and PutSecretValue carries a fresh client request
// token (which becomes the VersionId), so when the SDK retries a call whose
// response was lost, AWS recognises the repeat and creates no second
// version.
//
// # Deletion
//
// Delete schedules the secret for deletion after recoveryWindowDays (or
// deletes it at once with forceDelete). A secret scheduled for deletion is
// NotFound for Get, Stat and GetBatch, is not listed, and deleting it again
// succeeds. Put on such a secret restores it (RestoreSecret) and then writes
// the new data and labels, so a deleted name can be written again as with
// every other backend. If that write fails, the secret is scheduled for
// deletion again. A reader racing the Put may briefly see the restored old
// value. A compare-and-set Put on it fails with ErrConflict
// (the secret does not exist); a create-only Put succeeds.
//
// # Compare-and-set
//
// Secrets Manager has no conditional PutSecretValue, but moving a staging
// label is conditional: UpdateSecretVersionStage fails unless
// RemoveFromVersionId names the version that holds the label. A Put with
// IfVersion writes the new value as a version labelled PendingStage, then
// moves AWSCURRENT to it from IfVersion; if another writer moved AWSCURRENT
// first, the move fails, the Put returns ErrConflict and its version is
// left without labels (deprecated, removed by AWS in time). So racing
// compare-and-set writes of data are atomic: exactly one wins. A
// compare-and-set Put that changes only labels is checked against
// DescribeSecret and is not atomic.
//
// # Errors
//
// Errors are *secretstore.Error values whose cause is an *APIError naming
// the AWS operation, error code, HTTP status and attempts; the AWS message
// and request id are left out of the text (RequestID keeps the id for
// support). ResourceNotFoundException is ErrNotFound; AccessDeniedException
// and signature or token errors are ErrPermission; throttling, 5xx,
// KMS failures and network errors, after the SDK's retries, are
// ErrUnavailable; ResourceExistsException is ErrConflict;
// InvalidParameterException and ValidationException are ErrInvalid.
// InvalidRequestException on a secret scheduled for deletion is treated as
// NotFound.
//
// # Permissions
//
// The IAM actions used: secretsmanager:DescribeSecret, GetSecretValue,
// BatchGetSecretValue, ListSecrets, CreateSecret, PutSecretValue,
// TagResource, UntagResource, DeleteSecret, RestoreSecret and
// UpdateSecretVersionStage (compare-and-set only); kms:Decrypt and
// kms:GenerateDataKey for a customer-managed key. A read-only agbot needs
// the first four. The credential check (Store.CheckCredentials, which the
// watcher runs every cycle) is one ListSecrets call returning at most one
// entry, so it needs nothing more.
//
// # Testing
//
// Package github.com/edgesecrets/edgesecrets/mock/awssm is a wire-level
// Secrets Manager endpoint this backend's tests run against; embedders can
// use it the same way (see the Example).
package awssm
