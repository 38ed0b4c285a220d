package secretsapi_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// helloFile reads a helloSecretWorld file (testdata/hellosecretworld,
// see SOURCE.md there) with hzn's placeholders filled in, and the
// binding's vault secret replaced when vaultSecret is not empty.
// DeployCheckPath is the deploycheck route.
const DeployCheckPath = "/deploycheck/secretbindingcompatible"

func helloFile(t *testing.T, file, vaultSecret string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/hellosecretworld/" + file)
	require.NoError(t, err)
	s := strings.NewReplacer("$HZN_ORG_ID", "myorg", "$SERVICE_NAME", "ibm.hello-secret", "$SERVICE_VERSION", "1.0.0",
		"$ARCH", "amd64", "${DOCKER_IMAGE_BASE}", "openhorizon/ibm.hello-secret").Replace(string(b))
	if vaultSecret != "" {
		s = strings.Replace(s, `"hw-secret-name"`, `"`+vaultSecret+`"`, 1)
	}
	require.True(t, json.Valid([]byte(s)), file)
	return json.RawMessage(s)
}

type deployCheckAnswer struct {
	Compatible bool              `json:"compatible"`
	Reason     map[string]string `json:"reason"`
	Problems   []binding.Problem `json:"problems"`
}

// GET /deploycheck/secretbindingcompatible (agreementbot/secure_api.go
// lines 574-672; the body is anax's compcheck.SecretBindingCheck,
// compcheck/secretbinding_check.go lines 20-32; the answer its
// CompCheckOutput, compcheck/comp_check.go lines 147-151).
func TestDeployCheck(t *testing.T) {
	service := helloFile(t, "service.definition.toplevel.json", "")
	const helloID = "myorg/ibm.hello-secret_1.0.0_amd64"
	request := func(fields map[string]any) string {
		b, err := json.Marshal(fields)
		require.NoError(t, err)
		return string(b)
	}
	tests := []struct {
		name       string
		as, body   string
		status     int
		compatible bool
		reason     string // part of the service's reason
		codes      []binding.Code
		message    string // part of an error's sentence
	}{
		{name: "deployment policy, the secret exists", as: "myorg/alice", status: 200, compatible: true, reason: "Compatible",
			body: request(map[string]any{"node_arch": "amd64", "business_policy": helloFile(t, "deployment.policy.json", ""), "service": []any{service}})},
		{name: "pattern, the secret exists", as: "myorg/alice", status: 200, compatible: true, reason: "Compatible",
			body: request(map[string]any{"node_org": "myorg", "pattern": helloFile(t, "pattern.json", ""), "service": []any{service}})},
		{name: "the secret is missing", as: "myorg/alice", status: 200, compatible: false, reason: "Secret Binding Incompatible: ", codes: []binding.Code{binding.CodeVaultSecretMissing},
			body: request(map[string]any{"business_policy": helloFile(t, "deployment.policy.json", "missing"), "service": []any{service}})},
		{name: "bound to the caller's own secret", as: "myorg/alice", status: 200, compatible: true, reason: "Compatible",
			body: request(map[string]any{"business_policy": helloFile(t, "deployment.policy.json", "user/alice/token"), "service": []any{service}})},
		{name: "bound to another user's existing secret: forbidden", as: "myorg/alice", status: 200, compatible: false, codes: []binding.Code{binding.CodeStoreForbidden},
			body: request(map[string]any{"business_policy": helloFile(t, "deployment.policy.json", "user/bob/token"), "service": []any{service}})},
		{name: "bound to another user's missing secret: the same", as: "myorg/alice", status: 200, compatible: false, codes: []binding.Code{binding.CodeStoreForbidden},
			body: request(map[string]any{"business_policy": helloFile(t, "deployment.policy.json", "user/bob/nothing"), "service": []any{service}})},
		{name: "a service definition missing", as: "myorg/alice", status: 200, compatible: false, codes: []binding.Code{binding.CodeServiceUnresolved},
			body: request(map[string]any{"business_policy": helloFile(t, "deployment.policy.json", "")})},
		{name: "policy and pattern (secretbinding_check.go line 164)", as: "myorg/alice", status: 400, message: "mutually exclusive",
			body: request(map[string]any{"business_policy": helloFile(t, "deployment.policy.json", ""), "pattern": helloFile(t, "pattern.json", "")})},
		{name: "neither (secretbinding_check.go line 168)", as: "myorg/alice", status: 400, message: "Neither deployment policy nor pattern", body: request(map[string]any{"node_arch": "amd64"})},
		{name: "by id only", as: "myorg/alice", status: 400, message: "does not read them from the exchange", body: request(map[string]any{"business_policy_id": "myorg/p"})},
		{name: "no input (secure_api.go line 629)", as: "myorg/alice", status: 400, message: "No input found."},
		{name: "not JSON", as: "myorg/alice", status: 400, message: "couldn't be deserialized", body: `{"business_policy":`},
		{name: "another architecture", as: "myorg/alice", status: 400, message: "architecture arm64",
			body: request(map[string]any{"node_arch": "arm64", "pattern": helloFile(t, "pattern.json", ""), "service": []any{service}})},
		{name: "another organisation's node", as: "myorg/alice", status: 403, message: "cannot check secrets in organization \"otherorg\"",
			body: request(map[string]any{"node_id": "otherorg/n1", "business_policy": helloFile(t, "deployment.policy.json", ""), "service": []any{service}})},
		{name: "no credentials", status: 401, body: request(map[string]any{"business_policy": helloFile(t, "deployment.policy.json", "")})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, secretsapi.Options{})
			r := f.do(t, "GET", DeployCheckPath, tt.as, tt.body)
			require.Equal(t, tt.status, r.status, r.body)
			if tt.status != 200 {
				var msg string
				require.NoError(t, json.Unmarshal([]byte(r.body), &msg))
				assert.Contains(t, msg, tt.message)
				return
			}
			var a deployCheckAnswer
			require.NoError(t, json.Unmarshal([]byte(r.body), &a))
			assert.Equal(t, tt.compatible, a.Compatible, r.body)
			var codes []binding.Code
			for _, p := range a.Problems {
				if p.Severity == "error" {
					codes = append(codes, p.Code)
				}
			}
			assert.Equal(t, tt.codes, codes)
			if tt.reason != "" {
				assert.Contains(t, a.Reason[helloID], tt.reason, r.body)
			}
			assert.NotContains(t, r.body, "alice-value")
			assert.NotContains(t, r.body, "bob-value")
		})
	}
	f := newFixture(t, secretsapi.Options{})
	assert.Equal(t, 405, f.do(t, "POST", DeployCheckPath, "myorg/alice", "").status)
	assert.Equal(t, 200, f.do(t, "OPTIONS", DeployCheckPath, "", "").status)
}
