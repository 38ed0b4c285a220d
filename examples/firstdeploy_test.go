package examples_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
)

// A new node publishes its certificate while the agbot's own store trouble
// stops the deployment's check: the store down, or refusing the agbot every
// call. The deployment is neither refused nor forgotten: once the store is
// back, the agbot deploys the node (within two intervals, which the
// engine's own tests bound exactly; here, as soon as the programs can).
func TestFirstDeployThroughTheAgbotsOwnTrouble(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault smmock.Fault
	}{
		{"store unavailable", smmock.Fault{Code: "ServiceUnavailable", Status: 503}},
		{"agbot refused every call", smmock.Fault{Code: "AccessDeniedException"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			agbotDir, agentDir := filepath.Join(dir, "agbot"), filepath.Join(dir, "agent")
			storeConfig, adm, endpoint := secretsManagerEndpoint(t)
			value := "first-" + rand.Text()
			require.NoError(t, adm.put(ctx, storeName, value))

			addr := freeLoopbackAddr(t)
			agbot := start(t, "agbot", nil, "-listen", addr, "-dir", agbotDir, "-store", storeConfig,
				"-deployment", filepath.Join("agbot", "deployment.json"), "-watch-interval", "1s", "-update-backoff", "200ms",
				"-max-backoff", "1s", "-reply-timeout", "2s", "-log-level", "debug")
			waitFor(t, "the agbot to serve", func() bool { return strings.Contains(agbot.stderr.String(), "agbot serving") }, agbot)

			endpoint.InjectFault(tc.fault)
			agent := start(t, "agent", nil, "-agbot", "http://"+addr, "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
				"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir,
				"-listen", "127.0.0.1:0", "-poll", "200ms", "-log-level", "debug")
			waitFor(t, "the agbot to put the deployment off", func() bool {
				return strings.Contains(agbot.stderr.String(), "deployment not decided")
			}, agbot, agent)
			time.Sleep(3 * time.Second) // three intervals of trouble
			out := agbot.stderr.String()
			assert.NotContains(t, out, "deployment refused")
			assert.NotContains(t, out, `msg="agreement registered"`)
			secretFile := filepath.Join(agentDir, "secrets", "instances", instance, serviceSecret)
			assert.NoFileExists(t, secretFile)

			endpoint.ClearFaults()
			back := time.Now()
			waitFor(t, "the node to be deployed", func() bool {
				b, err := os.ReadFile(secretFile)
				return err == nil && string(b) == value
			}, agbot, agent)
			t.Logf("deployed %s after the store came back", time.Since(back).Round(100*time.Millisecond))
			assert.Contains(t, agbot.stderr.String(), "deployment registered after waiting")
			assert.NotContains(t, agbot.stderr.String(), "deployment refused")
			for _, p := range []*proc{agent, agbot} {
				assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
				assert.NotContains(t, p.stdout.String()+p.stderr.String(), value, "%s printed a secret value", p.name)
			}
		})
	}
}
