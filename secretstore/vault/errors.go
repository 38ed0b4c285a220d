package vault

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/hashicorp/vault/api"
)

// statusError is the cause of an error built from a Vault error response:
// the HTTP status and a fixed description chosen from Vault's error codes.
// Vault's own error text is matched but never copied, so no part of a
// request or response body reaches an error message.
type statusError struct {
	// StatusCode is the HTTP status Vault answered with.
	StatusCode int
	// Reason is a fixed description, such as "vault is sealed".
	Reason string
}

// Error returns "<reason> (HTTP <status>)".
func (e *statusError) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Reason, e.StatusCode)
}

// Phrases Vault puts in its "errors" array that change the error kind.
const (
	phraseSealed      = "vault is sealed"
	phraseCASMismatch = "check-and-set parameter did not match"
	phraseCASRequired = "check-and-set parameter required"
	phraseNotActive   = "not active"
	phraseStandby     = "standby"
)

// classify turns an error from vault/api into a kind and a cause that is
// safe to print. addr is the configured server address.
func classify(err error, addr string) (kind, cause error) {
	var re *api.ResponseError
	if errors.As(err, &re) {
		return classifyResponse(re.StatusCode, re.Errors)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return edgesecrets.ErrUnavailable, fmt.Errorf("vault at %s did not answer in time", addr)
	}
	if tlsErr := tlsVerifyError(err); tlsErr != nil {
		return edgesecrets.ErrUnavailable, fmt.Errorf("cannot verify the TLS certificate of vault at %s (set caBundle or caFile to the CA that signed it, or tlsServerName to the name it carries): %w", addr, tlsErr)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// The URL holds the address and path only; drop it anyway and keep
		// the network cause (connection refused, reset, DNS).
		return edgesecrets.ErrUnavailable, fmt.Errorf("cannot reach vault at %s: %w", addr, ue.Err)
	}
	// Anything else (an unparsable response, a client-side failure) is
	// reported by type only: its text may quote response bytes.
	return edgesecrets.ErrUnavailable, fmt.Errorf("unexpected failure talking to vault at %s (%T)", addr, err)
}

// classifyResponse maps a Vault HTTP status and its error strings to a kind
// and a statusError.
func classifyResponse(status int, vaultErrors []string) (kind, cause error) {
	has := func(phrase string) bool {
		for _, e := range vaultErrors {
			if strings.Contains(strings.ToLower(e), phrase) {
				return true
			}
		}
		return false
	}
	se := &statusError{StatusCode: status}
	switch {
	case status == http.StatusBadRequest && has(phraseCASMismatch):
		se.Reason = "the secret's version changed (check-and-set)"
		return edgesecrets.ErrConflict, se
	case status == http.StatusBadRequest && has(phraseCASRequired):
		se.Reason = "the mount or secret requires check-and-set writes (cas_required); use PutOptions.IfVersion or CreateOnly"
		return edgesecrets.ErrInvalid, se
	case status == http.StatusBadRequest:
		se.Reason = "vault rejected the request"
		return edgesecrets.ErrInvalid, se
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		se.Reason = "the token's policies do not allow this request"
		return edgesecrets.ErrPermission, se
	case status == http.StatusNotFound:
		se.Reason = "no such path"
		return edgesecrets.ErrNotFound, se
	case status == http.StatusPreconditionFailed:
		se.Reason = "vault node has not caught up with the cluster"
		return edgesecrets.ErrUnavailable, se
	case status == http.StatusTooManyRequests:
		se.Reason = "vault is throttling requests"
		return edgesecrets.ErrUnavailable, se
	case status == http.StatusServiceUnavailable && has(phraseSealed):
		se.Reason = phraseSealed
		return edgesecrets.ErrUnavailable, se
	case status == http.StatusServiceUnavailable && (has(phraseStandby) || has(phraseNotActive)):
		se.Reason = "vault node is a standby and cannot serve or forward the request"
		return edgesecrets.ErrUnavailable, se
	case status >= 500:
		se.Reason = "vault server error"
		return edgesecrets.ErrUnavailable, se
	case status >= 300 && status < 400:
		se.Reason = "vault redirected the request more than once"
		return edgesecrets.ErrUnavailable, se
	default:
		se.Reason = "vault refused the request"
		return edgesecrets.ErrInvalid, se
	}
}

// tlsVerifyError returns the certificate verification failure inside err,
// or nil.
func tlsVerifyError(err error) error {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.As(err, &cv):
		return cv.Err
	case errors.As(err, &ua):
		return ua
	case errors.As(err, &he):
		return he
	case errors.As(err, &ci):
		return ci
	}
	return nil
}

// isForbidden reports whether err is a 403 (or 401) from Vault.
func isForbidden(err error) bool {
	var re *api.ResponseError
	return errors.As(err, &re) && (re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized)
}
