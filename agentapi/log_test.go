package agentapi_test

import (
	"context"
	"encoding/base64"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
)

// TestNoValueReachesLogsOrErrors runs the whole node-side flow at debug
// level, including rejected messages, failed logins and crash leftovers, and
// checks that no secret value or token (nor its base64) appears in any log
// line or returned error.
func TestNoValueReachesLogsOrErrors(t *testing.T) {
	ctx := context.Background()
	canaries := []string{"CANARY-value-password", "CANARY-value-cert", "CANARY-value-rotated", "CANARY-token-a"}
	logger, logs := logtest.NewLogger()
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	root := filepath.Join(t.TempDir(), "secrets")
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root, Logger: logger, StatusFiles: true})
	require.NoError(t, err)
	p := agreement.Proposal{AgreementID: "ag-1", Services: []agreement.ServiceSecrets{{Service: refA, Secrets: map[string]agreement.SecretDetails{
		"password": jsonSecret("password", canaries[0]),
		"cert":     rawSecret([]byte(canaries[1])),
	}}}}
	_, err = s.ApplyProposal(ctx, p, agentapi.Instances{refA: {ID: "a"}})
	require.NoError(t, err)
	_, err = s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
		"password": jsonSecret("password", canaries[2])}}))
	require.NoError(t, err)
	// Rejections.
	_, err = s.ApplyUpdate(ctx, secretsUpdate(t, agreement.ServiceSecrets{Service: refA, Secrets: map[string]agreement.SecretDetails{
		"cert": {Format: agreement.FormatRaw, Data: edgesecrets.Data{"a": []byte(canaries[0]), "b": []byte(canaries[1])}},
		"nope": jsonSecret("x", canaries[2])}}))
	require.Error(t, err)
	keep(err)
	_, err = s.ApplyProposal(ctx, agreement.Proposal{AgreementID: "ag-2", Services: []agreement.ServiceSecrets{{Service: refA,
		Secrets: map[string]agreement.SecretDetails{"../x": jsonSecret("k", canaries[0])}}}}, agentapi.Instances{refA: {ID: "a"}})
	require.Error(t, err)
	keep(err)

	tokens := &agentapi.TokenTable{}
	require.NoError(t, tokens.Set("a", canaries[3]))
	h, err := agentapi.NewHandler(s, agentapi.HandlerOptions{Authenticate: tokens.Authenticate, Logger: logger})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	f := &apiFixture{store: s, server: srv}
	for _, r := range []struct{ method, path, user, token string }{
		{"GET", "/secrets", "a", canaries[3]},
		{"GET", "/secrets/password", "a", canaries[3]},
		{"GET", "/secrets/cert", "a", canaries[3]},
		{"GET", "/secrets/nope", "a", canaries[3]},
		{"POST", "/secrets/password?received=true", "a", canaries[3]},
		{"GET", "/secrets", "a", "wrong"},
		{"GET", "/secrets", canaries[3], "a"}, // id and token swapped
		{"PUT", "/secrets/cert", "a", canaries[3]},
	} {
		f.do(t, r.method, r.path, r.user, r.token, nil)
	}
	srv.Close() // waits for the handlers, and their log lines

	keep(s.ServiceRestarted(ctx, "a"))
	require.NoError(t, s.Close())
	// A crash leftover holding a value, wiped (and logged) by the next Open.
	require.NoError(t, os.WriteFile(filepath.Join(root, "instances", "a", "stray"), []byte(canaries[0]), 0o600))
	s, err = agentapi.Open(ctx, agentapi.Options{Root: root, Logger: logger, StatusFiles: true})
	require.NoError(t, err)
	keep(s.Remove(ctx, "a"))
	require.NoError(t, s.Close())

	out := logs.String()
	require.Contains(t, out, `"instance":"a"`, "the flow logged nothing useful")
	require.Contains(t, out, `"secret":"password"`)
	require.Contains(t, out, "wiping an entry no instance owns")
	var errText strings.Builder
	for _, err := range errs {
		errText.WriteString(err.Error())
	}
	for _, c := range canaries {
		for _, form := range []string{c, base64.StdEncoding.EncodeToString([]byte(c)), base64.StdEncoding.EncodeToString([]byte(`{"password":"` + c + `"}`))} {
			assert.NotContains(t, out, form, "a value reached the log")
			assert.NotContains(t, errText.String(), form, "a value reached an error")
		}
	}
}
