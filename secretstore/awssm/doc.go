// Package awssm is the AWS Secrets Manager backend of secretstore, on the
// official aws-sdk-go-v2 client. Importing it registers the type "awssm";
// New builds a *secretstore.Store from Go options (an aws.Config or a ready
// client, which Store.As gives back as a **secretsmanager.Client).
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
//	    "maxAttempts": 5,               // attempts per call, default 3
//	    "maxBackoff": "2s"              // longest pause between them, default 2s
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
// listed in the reserved member "edgesecrets:base64",
// which appears only when needed; Put rejects a data key of that name,
// and data whose encoding exceeds AWS's SecretString limit of 65536 bytes.
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
//   - GetBatch: BatchGetSecretValue per 20 names, plus one DescribeSecret
//     per secret found for its tags.
//   - StatBatch: ListSecrets filtered on the names' common prefix, a page
//     per 100 secrets, each entry's AWSCURRENT version from its
//     SecretVersionsToStages. A cycle of the delivery engine's watcher
//     calls it for the watched names, then DescribeSecret only for names
//     the listing leaves out (deleted, or not listed yet) and for three
//     names per cycle in turn, since a listing shows a secret whose
//     permission was taken away as present. 1,000 watched secrets cost 14
//     calls a cycle, credential check included, instead of 1,001.
//   - List: ListSecrets with a name-prefix filter, following NextToken.
//     AWS documents ListSecrets as eventually consistent.
//   - Put: DescribeSecret and GetSecretValue to compare; a Put that changes
//     nothing makes no write call. A new secret is one CreateSecret with its
//     tags; an existing one gets PutSecretValue when the data changed, then
//     TagResource/UntagResource when the labels did.
//   - Delete: DeleteSecret with the recovery window, or forced.
//
// The client the store makes does not retry: secretstore.Store does, up
// to maxAttempts in all, within the caller's deadline. Every CreateSecret
// and PutSecretValue carries the Put's client request token (which becomes
// the VersionId), the same for each attempt, so a write whose answer was
// lost is recognised when it is sent again and creates no second version.
// A client given in Options.Client is used with its own retryer.
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
// IfVersion writes the new value as a version labelled EDGESECRETS_PENDING, then
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
// KMS failures and network errors are ErrUnavailable (after the store's
// retries); ResourceExistsException is ErrConflict;
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
// This backend's tests, and the Example, run against a wire-level Secrets
// Manager endpoint internal to the module (internal/testkit/awsmock), with the
// client's BaseEndpoint set to its URL.
package awssm
