package hzncheck_test

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/anax/internal/anaxhub"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

const (
	org        = "myorg"
	admin      = "admin"
	adminToken = "hzncheck-admin-token"
)

// startAPI serves secretsapi over a memory store on loopback, with
// maxBody as its body limit and one administrator, and returns its URL.
func startAPI(t *testing.T, maxBody int64) string {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	h, err := secretsapi.NewHandler(secretsapi.Options{
		Store:        store,
		MaxBodyBytes: maxBody,
		Authenticate: func(_ context.Context, c secretsapi.Credentials) (secretsapi.Caller, error) {
			if c.Org != org || c.User != admin || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(adminToken)) != 1 {
				return secretsapi.Caller{}, errors.New("unknown credentials")
			}
			return secretsapi.Caller{Org: org, ID: admin, Role: secretsapi.RoleAdmin}, nil
		},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestHznSeesTheAPIsRefusals runs hzn secretsmanager against the library's
// API for the refusals hzn used to garble: a value over the body limit
// (the connection closed before hzn read the answer: "EOF ... HTTP
// status: .") and a name with an escaped slash (the refusal's "%2F" went
// through hzn's printf as "%!F(MISSING)"). hzn must print the API's own
// sentence, naming the limit or the escape, and no printf debris.
func TestHznSeesTheAPIsRefusals(t *testing.T) {
	const limit = 64 << 10
	h := anaxhub.NewHzn(t)
	url := startAPI(t, limit)
	big := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("v", 4<<20)), 0o600))

	for _, c := range []struct {
		name string
		args []string
		want string // a phrase of the API's refusal hzn must print
	}{
		{"a value over the body limit", []string{"add", "--secretKey", "k", "--secretFile", big, "big"}, "larger than 65536 bytes"},
		{"a name with an escaped slash", []string{"read", "pct%2Fenc"}, "escaped slash"},
		{"a name with an escaped dot", []string{"read", "a/%2e%2e/b"}, "segment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"secretsmanager", "secret", c.args[0], "-o", org, "-u", admin + ":" + adminToken}, c.args[1:]...)
			res, err := h.Run(t.Context(), []string{"HZN_AGBOT_URL=" + url}, "", args...)
			require.NoError(t, err)
			out := res.Stdout + res.Stderr
			assert.NotZero(t, res.Code, "hzn succeeded: %s", out)
			assert.NotContains(t, out, "%!", "printf debris in hzn's output")
			assert.NotContains(t, out, "EOF", "hzn lost the answer")
			assert.NotContains(t, out, adminToken, "hzn printed the token")
			if c.want != "" {
				assert.Contains(t, out, c.want, "hzn did not print the API's refusal")
			}
		})
	}
}
