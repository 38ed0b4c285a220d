// Package awsmock is a wire-level AWS Secrets Manager endpoint for tests: an
// http.Handler speaking the AWS JSON 1.1 protocol (POST, X-Amz-Target
// "secretsmanager.<Operation>", Content-Type application/x-amz-json-1.1)
// that the real aws-sdk-go-v2 client, or any other SDK, talks to unchanged.
// Serve it with httptest.NewServer and set the client's BaseEndpoint to
// the server's URL. Neither Docker nor network access is needed.
//
// It serves CreateSecret, GetSecretValue, BatchGetSecretValue,
// PutSecretValue, DescribeSecret, ListSecrets, DeleteSecret, RestoreSecret,
// TagResource, UntagResource and UpdateSecretVersionStage, with the
// behaviour AWS documents:
//
//   - AWS error shapes ({"__type": code, "message": ...}, X-Amzn-ErrorType)
//     and status codes: 400 for client errors and throttling, 500 for
//     InternalServiceError; every answer carries an X-Amzn-RequestId.
//   - Versions: ClientRequestToken becomes the VersionId; repeating a
//     request with the same token and value is ignored, with a different
//     value it is ResourceExistsException. AWSCURRENT and AWSPREVIOUS move
//     as in AWS; custom staging labels; versions without labels are
//     deprecated and trimmed beyond 100.
//   - UpdateSecretVersionStage refuses to move a label unless
//     RemoveFromVersionId names the version that holds it.
//   - Deletion: RecoveryWindowInDays 7..30 (default 30) or
//     ForceDeleteWithoutRecovery, mutually exclusive; a secret pending
//     deletion answers InvalidRequestException to reads and writes, still
//     shows in DescribeSecret with DeletedDate, is hidden from ListSecrets
//     unless IncludePlannedDeletion, and is purged when the window ends
//     (inject a clock with Options.Now to get there).
//   - ListSecrets and filtered BatchGetSecretValue page with MaxResults and
//     stable NextTokens, sort (SortBy, SortOrder) and filter (name,
//     description, tag-key, tag-value, all; "!" negates).
//   - Validation of names, tags, value sizes and request shapes.
//
// Every request must carry a SigV4 Authorization header scoped to the
// service "secretsmanager"; with Options.Credentials set the signature is
// verified too, so a client with wrong keys gets InvalidSignatureException
// or UnrecognizedClientException as from AWS.
//
// For tests of error handling it counts requests per operation (Calls,
// Writes), can throttle every request (SetThrottling) and injects faults
// (InjectFault), including faults after the operation took effect, which
// look like a lost response and exercise idempotent retries. Secret and
// Names show the stored state without values.
//
// Not modelled: rotation, replication, resource policies, KMS, IAM policy
// evaluation and eventual consistency (every answer reflects all earlier
// writes).
package awsmock
