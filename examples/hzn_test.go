package examples_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
)

// The service secrets of hznDeployment, each bound to the vault secret
// web/api-key: the example's api_key in its "raw" format, and the same
// secret in "value_only" and in the default JSON.
var hznFormats = map[string]string{"api_key": "raw", "api_value": "value_only", "api_json": ""}

// hznDeployment writes the example agbot's deployment.json with the
// service also declaring api_value and api_json (hznFormats), bound like
// api_key, and returns its path.
func hznDeployment(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("agbot", "deployment.json"))
	require.NoError(t, err)
	var dep map[string]any
	require.NoError(t, json.Unmarshal(b, &dep))
	svc := dep["services"].([]any)[0].(map[string]any)
	secrets := svc["secrets"].(map[string]any)
	require.Equal(t, "raw", secrets[serviceSecret].(map[string]any)["format"], "the example declares api_key raw")
	bindings := dep["deploymentPolicy"].(map[string]any)["secretBinding"].([]any)[0].(map[string]any)["bindings"].(map[string]any)
	for name, format := range hznFormats {
		decl := map[string]any{"type": "api-key"}
		if format != "" {
			decl["format"] = format
		}
		secrets[name] = decl
		bindings[name] = map[string]any{"vaultSecret": "web/api-key"}
	}
	out, err := json.Marshal(dep)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "deployment.json")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

// The README's hzn flow with the example programs: the administrator writes
// the secret through the agbot's secrets-manager API as `hzn secretsmanager
// secret add --secretKey apikey --secretDetail <value> web/api-key` sends it
// (PUT /org/myorg/secrets/web/api-key, body {"key":…,"value":…}, Basic
// "myorg/admin:<token>"; anax cli/secrets_manager/secrets_manager.go lines
// 222-226), and the node gets it in the example's "raw" format and in
// "value_only" as the value, in the default JSON as {"key","value"}; the
// service's GET /api/v1/secrets/{name} (Open Horizon profile) answers the
// key it was written with, whatever the format. Rewritten with several
// keys, which "raw" and "value_only" cannot render, the agbot logs it at
// WARN once and shows the reason in the agreement's status and its health,
// while the JSON secret is still updated.
func TestHznSecretReachesTheNodeInEveryFormat(t *testing.T) {
	dir := t.TempDir()
	agbotDir, agentDir := filepath.Join(dir, "agbot"), filepath.Join(dir, "agent")
	value := "hzn-" + rand.Text()

	agbot := start(t, "agbot", nil, "-listen", "127.0.0.1:0", "-addr-file", filepath.Join(dir, "agbot.url"), "-dir", agbotDir,
		"-deployment", hznDeployment(t), "-watch-interval", "1s", "-update-backoff", "1s", "-max-backoff", "2s", "-log-level", "debug")
	agbotURL := readURL(t, filepath.Join(dir, "agbot.url"))
	waitFor(t, "the agbot to listen", func() bool { return agbotURL() != "" }, agbot)
	adminToken, err := demo.ReadToken(filepath.Join(agbotDir, "admin-token"))
	require.NoError(t, err)

	hznAdd(t, agbotURL(), adminToken, "apikey", value, http.StatusCreated)

	agent := start(t, "agent", nil, "-agbot", agbotURL(), "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
		"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir,
		"-listen", "127.0.0.1:0", "-poll", "200ms", "-profile", "openhorizon", "-log-level", "debug")
	procs := []*proc{agbot, agent}
	envFile := filepath.Join(agentDir, "env", instance+".json")
	waitFor(t, "the agent to provide the service instance", func() bool { _, err := os.Stat(envFile); return err == nil }, procs...)
	env, err := demo.ReadEnv(envFile)
	require.NoError(t, err)
	file := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(env.Mount, name))
		return string(b)
	}
	assert.Equal(t, value, file("api_key"), "raw: the value")
	assert.Equal(t, value, file("api_value"), "value_only: the value")
	assert.JSONEq(t, `{"key":"apikey","value":"`+value+`"}`, file("api_json"), "json: the key and the value")
	for name := range hznFormats {
		status, body := essGet(t, agentDir, env, name)
		require.Equal(t, http.StatusOK, status, "%s: %s", name, body)
		assert.JSONEq(t, `{"key":"apikey","value":"`+value+`"}`, string(body), "GET %s answers the key it was written with", name)
	}
	assert.NotContains(t, agbot.stderr.String(), "level=WARN msg=deployment", "nothing to warn about at deployment")

	// Rewritten with two keys (the demo admin API writes any data): raw and
	// value_only cannot render it.
	rotated := "multi-" + rand.Text()
	require.NoError(t, (&adminDataAPI{url: agbotURL(), token: adminToken}).put(t, "myorg/web/api-key", map[string]string{"user": "alice", "password": rotated}))
	waitFor(t, "the JSON secret to be updated", func() bool { return strings.Contains(file("api_json"), rotated) }, procs...)
	waitFor(t, "the WARN line", func() bool { return strings.Contains(agbot.stderr.String(), "reason=FormatUnrenderable") }, procs...)
	var health delivery.Health
	adminGet(t, agbotURL(), adminToken, "/admin/health", &health)
	require.Len(t, health.Reasons, 1, "%+v", health)
	assert.Equal(t, delivery.ReasonFormatUnrenderable, health.Reasons[0].Code)
	var st struct{ Reason *delivery.Reason } // what of delivery.Status the check needs
	adminGet(t, agbotURL(), adminToken, "/admin/agreements/"+health.Reasons[0].Example, &st)
	require.NotNil(t, st.Reason, "%+v", st)
	assert.Equal(t, delivery.ReasonFormatUnrenderable, st.Reason.Code)
	for _, part := range []string{`secret "api_key"`, `secret "api_value"`, `store secret "myorg/web/api-key"`, `format "raw" needs exactly one key`, `format "value_only" needs a "value" key`} {
		assert.Contains(t, st.Reason.Message, part)
	}
	assert.Equal(t, value, file("api_key"), "the node keeps the last value it could be sent")
	assert.Equal(t, 1, strings.Count(agbot.stderr.String(), "reason=FormatUnrenderable"), "once per agreement and cause, not per retry")

	for _, p := range procs {
		assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
	}
	for _, p := range procs {
		out := p.stdout.String() + p.stderr.String()
		for _, never := range []string{value, rotated, adminToken, env.Token} {
			assert.NotContains(t, out, never, "%s printed a value or token", p.name)
		}
	}
}

// hznAdd writes web/api-key as `hzn secretsmanager secret add -u
// myorg/admin:<token> --secretKey <key> --secretDetail <value> web/api-key`
// sends it, and checks the status (201, created or replaced).
func hznAdd(t *testing.T, url, token, key, value string, want int) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"key": key, "value": value})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url+"/org/myorg/secrets/web/api-key", bytes.NewReader(body))
	require.NoError(t, err)
	req.SetBasicAuth("myorg/admin", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, want, resp.StatusCode)
}

// A secret whose keys the example's "raw" format cannot render is reported
// when the agreement is made (the deployment's secret_format_mismatch
// warning), then held back with its reason; written again the hzn way, it
// reaches the node.
func TestHznUnrenderableSecretIsReportedAtDeployment(t *testing.T) {
	dir := t.TempDir()
	agbotDir, agentDir := filepath.Join(dir, "agbot"), filepath.Join(dir, "agent")
	agbot := start(t, "agbot", nil, "-listen", "127.0.0.1:0", "-addr-file", filepath.Join(dir, "agbot.url"), "-dir", agbotDir,
		"-deployment", filepath.Join("agbot", "deployment.json"), "-watch-interval", "1s", "-update-backoff", "1s", "-max-backoff", "2s")
	agbotURL := readURL(t, filepath.Join(dir, "agbot.url"))
	waitFor(t, "the agbot to listen", func() bool { return agbotURL() != "" }, agbot)
	adminToken, err := demo.ReadToken(filepath.Join(agbotDir, "admin-token"))
	require.NoError(t, err)
	multi := "multi-" + rand.Text()
	require.NoError(t, (&adminDataAPI{url: agbotURL(), token: adminToken}).put(t, "myorg/web/api-key", map[string]string{"user": "alice", "password": multi}))

	agent := start(t, "agent", nil, "-agbot", agbotURL(), "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
		"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir, "-listen", "127.0.0.1:0", "-poll", "200ms")
	procs := []*proc{agbot, agent}
	waitFor(t, "the deployment warning", func() bool {
		return strings.Contains(agbot.stderr.String(), `problem="warning secret_format_mismatch`)
	}, procs...)
	waitFor(t, "the agreement's WARN line", func() bool { return strings.Contains(agbot.stderr.String(), "reason=FormatUnrenderable") }, procs...)
	var health delivery.Health
	adminGet(t, agbotURL(), adminToken, "/admin/health", &health)
	require.Len(t, health.Reasons, 1, "%+v", health)
	assert.Equal(t, delivery.ReasonFormatUnrenderable, health.Reasons[0].Code)
	assert.Contains(t, health.Reasons[0].Message, `format "raw" needs exactly one key`)

	value := "hzn-" + rand.Text()
	hznAdd(t, agbotURL(), adminToken, "apikey", value, http.StatusCreated)
	envFile := filepath.Join(agentDir, "env", instance+".json")
	waitFor(t, "the node to get the value", func() bool {
		env, err := demo.ReadEnv(envFile)
		if err != nil {
			return false
		}
		b, _ := os.ReadFile(filepath.Join(env.Mount, serviceSecret))
		return string(b) == value
	}, procs...)
	waitFor(t, "the reason to clear", func() bool {
		adminGet(t, agbotURL(), adminToken, "/admin/health", &health)
		return health.Reasons == nil
	}, procs...)
	for _, p := range procs {
		assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
		out := p.stdout.String() + p.stderr.String()
		for _, never := range []string{value, multi, adminToken} {
			assert.NotContains(t, out, never, "%s printed a value or token", p.name)
		}
	}
}

// essGet calls GET /api/v1/secrets/{name} over the agent's socket as the
// instance and returns the status and body.
func essGet(t *testing.T, agentDir string, env demo.Env, name string) (int, []byte) {
	t.Helper()
	client, err := demo.ESSClient(filepath.Join(agentDir, "ess", demo.ESSCertFile), filepath.Join(agentDir, "ess", demo.ESSSocketFile))
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://localhost/api/v1/secrets/"+name, nil)
	require.NoError(t, err)
	req.SetBasicAuth(env.Instance, env.Token)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// adminGet reads one of the agbot's status routes into v.
func adminGet(t *testing.T, url, token, path string, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, path)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// adminDataAPI writes any data through the agbot's demo admin API.
type adminDataAPI struct{ url, token string }

func (a *adminDataAPI) put(t *testing.T, name string, data map[string]string) error {
	t.Helper()
	body, err := json.Marshal(data)
	require.NoError(t, err)
	return (&adminAPI{url: a.url, token: a.token}).do(t.Context(), http.MethodPut, name, body, http.StatusOK)
}
