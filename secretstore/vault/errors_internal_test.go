package vault

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
)

func TestClassifyResponse(t *testing.T) {
	for _, tc := range []struct {
		status int
		errs   []string
		kind   error
		reason string
	}{
		{400, []string{"check-and-set parameter did not match the current version"}, edgesecrets.ErrConflict, "check-and-set"},
		{400, []string{"check-and-set parameter required for this call"}, edgesecrets.ErrInvalid, "cas_required"},
		{400, []string{"missing data fields"}, edgesecrets.ErrInvalid, "vault rejected the request"},
		{403, []string{"permission denied"}, edgesecrets.ErrPermission, "policies do not allow"},
		{401, nil, edgesecrets.ErrPermission, "policies do not allow"},
		{404, nil, edgesecrets.ErrNotFound, "no such path"},
		{412, nil, edgesecrets.ErrUnavailable, "caught up"},
		{429, []string{"request path \"x\": rate limit quota exceeded"}, edgesecrets.ErrUnavailable, "throttling"},
		{503, []string{"Vault is sealed"}, edgesecrets.ErrUnavailable, "vault is sealed"},
		{503, []string{"node not active but active cluster node not found"}, edgesecrets.ErrUnavailable, "standby"},
		{500, []string{"internal error"}, edgesecrets.ErrUnavailable, "vault server error"},
		{502, nil, edgesecrets.ErrUnavailable, "vault server error"},
		{307, nil, edgesecrets.ErrUnavailable, "redirected"},
		{405, nil, edgesecrets.ErrInvalid, "refused"},
	} {
		t.Run(fmt.Sprint(tc.status, tc.errs), func(t *testing.T) {
			body := append([]string{"SECRET-VALUE-ECHO"}, tc.errs...)
			kind, cause := classify(&api.ResponseError{StatusCode: tc.status, Errors: body, URL: "http://h/v1/secret/data/x"}, "http://h")
			assert.Same(t, tc.kind, kind)
			assert.Contains(t, cause.Error(), tc.reason)
			assert.Contains(t, cause.Error(), fmt.Sprintf("HTTP %d", tc.status))
			assert.NotContains(t, cause.Error(), "SECRET-VALUE-ECHO", "vault's error text is never copied")
			var se *statusError
			assert.ErrorAs(t, cause, &se)
		})
	}
}

func TestClassifyTransportErrors(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "http://127.0.0.1:1/v1/secret/data/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	kind, cause := classify(refused, "http://127.0.0.1:1")
	assert.Same(t, edgesecrets.ErrUnavailable, kind)
	assert.Contains(t, cause.Error(), "cannot reach vault at http://127.0.0.1:1")
	assert.Contains(t, cause.Error(), "connection refused")

	kind, cause = classify(fmt.Errorf("wrapped: %w", context.DeadlineExceeded), "http://h")
	assert.Same(t, edgesecrets.ErrUnavailable, kind)
	assert.Contains(t, cause.Error(), "did not answer in time")

	unknownCA := &url.Error{Op: "Get", URL: "https://h", Err: x509.UnknownAuthorityError{}}
	kind, cause = classify(unknownCA, "https://h")
	assert.Same(t, edgesecrets.ErrUnavailable, kind)
	assert.Contains(t, cause.Error(), "cannot verify the TLS certificate")
	assert.Contains(t, cause.Error(), "caBundle or caFile")

	kind, cause = classify(errors.New(`invalid character 'S' looking for beginning of value "SECRET"`), "http://h")
	assert.Same(t, edgesecrets.ErrUnavailable, kind)
	assert.NotContains(t, cause.Error(), "SECRET", "unknown errors are reported by type only")
}
