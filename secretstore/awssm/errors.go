package awssm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// APIError is the cause inside a *secretstore.Error when a Secrets Manager
// call failed. Its message holds the operation, the AWS error code, the
// HTTP status and the number of attempts only: never the response message
// (AWS validation messages may quote request members) nor the request id,
// which is kept in RequestID for support cases.
type APIError struct {
	// Operation is the Secrets Manager operation, e.g. "GetSecretValue".
	Operation string
	// Code is the AWS error code, e.g. "ThrottlingException"; empty when no
	// answer was received.
	Code string
	// StatusCode is the HTTP status, 0 when no answer was received.
	StatusCode int
	// Attempts is how many attempts the SDK made when it gave up after
	// retrying; 0 when it did not retry to exhaustion.
	Attempts int
	// RequestID is AWS's id of the failed request, for support cases.
	RequestID string
	// Transport describes a failure to reach the endpoint (network error,
	// undecodable answer), when Code is empty.
	Transport string
}

// Error returns "secretsmanager <Operation>: <Code> (HTTP <status>) after <n> attempts".
func (e *APIError) Error() string {
	s := "secretsmanager " + e.Operation + ": "
	if e.Code != "" {
		s += e.Code
	} else {
		s += e.Transport
	}
	if e.StatusCode != 0 {
		s += " (HTTP " + strconv.Itoa(e.StatusCode) + ")"
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	return s
}

// AWS error codes the backend acts on.
const (
	codeNotFound         = "ResourceNotFoundException"
	codeExists           = "ResourceExistsException"
	codeInvalidRequest   = "InvalidRequestException"
	codeInvalidParameter = "InvalidParameterException"
)

// kindOfCode maps an AWS error code (and, for unknown codes, the HTTP
// status) to a secretstore error kind. Unknown failures count as
// ErrUnavailable: a watcher treats that as transient rather than revoking
// access.
func kindOfCode(code string, status int) error {
	switch code {
	case codeNotFound:
		return edgesecrets.ErrNotFound
	case "AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidSignatureException",
		"IncompleteSignatureException", "MissingAuthenticationTokenException", "InvalidClientTokenId",
		"ExpiredTokenException", "ExpiredToken", "NotAuthorized":
		return edgesecrets.ErrPermission
	case codeExists, "PreconditionNotMetException":
		return edgesecrets.ErrConflict
	case codeInvalidParameter, codeInvalidRequest, "ValidationException", "SerializationException",
		"InvalidNextTokenException", "MalformedPolicyDocumentException", "PublicPolicyException":
		return edgesecrets.ErrInvalid
	case "ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded",
		"LimitExceededException", "InternalServiceError", "InternalFailure", "ServiceUnavailable",
		"ServiceUnavailableException", "RequestTimeout", "DecryptionFailure", "EncryptionFailure":
		return edgesecrets.ErrUnavailable
	}
	switch status {
	case 403:
		return edgesecrets.ErrPermission
	case 404:
		return edgesecrets.ErrNotFound
	}
	return edgesecrets.ErrUnavailable
}

// classify turns an SDK error into an APIError and its kind.
func classify(err error) (*APIError, error) {
	ae := &APIError{}
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		ae.Operation = oe.OperationName
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		ae.RequestID = re.ServiceRequestID()
	}
	var he *smithyhttp.ResponseError
	if errors.As(err, &he) {
		ae.StatusCode = he.HTTPStatusCode()
	}
	var me *retry.MaxAttemptsError
	if errors.As(err, &me) {
		ae.Attempts = me.Attempt
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		ae.Code = api.ErrorCode()
		return ae, kindOfCode(ae.Code, ae.StatusCode)
	}
	var ne *net.OpError
	var de *smithy.DeserializationError
	switch {
	case errors.As(err, &ne):
		ae.Transport = "network error: " + ne.Error()
	case errors.As(err, &de):
		ae.Transport = "answer could not be decoded"
	case ae.StatusCode >= 500:
		ae.Transport = "server error"
	default:
		ae.Transport = "request failed"
	}
	return ae, edgesecrets.ErrUnavailable
}

// codeOf returns the AWS error code of err, or "".
func codeOf(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// fail converts an SDK error of the call for op on name into a
// *secretstore.Error: context errors stay context errors; everything else gets
// a kind and an APIError cause without request ids or bodies.
func (s *store) fail(ctx context.Context, op, name string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	for _, ce := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ce) {
			return &secretstore.Error{Kind: edgesecrets.ErrUnavailable, Err: errors.New("secrets manager did not answer in time")}
		}
	}
	cause, kind := classify(err)
	s.log.DebugContext(ctx, "secrets manager call failed",
		"op", op, "name", name, "awsOperation", cause.Operation, "code", cause.Code,
		"status", cause.StatusCode, "attempts", cause.Attempts, "requestId", cause.RequestID)
	return &secretstore.Error{Kind: kind, Err: cause}
}
