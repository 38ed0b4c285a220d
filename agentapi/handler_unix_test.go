//go:build unix

package agentapi_test

import (
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
)

// A secret's file replaced by something that is not a regular file (a FIFO
// would read as empty, a device as anything) is never served.
func TestGetRefusesNonRegularFiles(t *testing.T) {
	tests := []struct {
		name    string
		replace func(t *testing.T, path string)
	}{
		{"fifo", func(t *testing.T, path string) { require.NoError(t, syscall.Mkfifo(path, 0o600)) }},
		{"directory", func(t *testing.T, path string) { require.NoError(t, os.Mkdir(path, 0o700)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newAPIFixture(t, agentapi.HandlerOptions{})
			cert := mountFile(t, f.store, "a", "cert")
			require.NoError(t, os.Remove(cert))
			tt.replace(t, cert)
			r := f.do(t, "GET", "/secrets/cert", "a", "token-a", nil)
			assert.Equal(t, http.StatusInternalServerError, r.status)
			assert.JSONEq(t, `{"error":"the agent could not read its secret storage"}`, string(r.body))
		})
	}
}
