package examples_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
)

// A changed secretBinding in the agbot's deployment file, applied with
// SIGHUP, reaches the running service in place: its secret file goes
// from the old store secret's content straight to the new one's, the
// service gets it as an update of the same instance (the same token, no
// removal), and rotations of the old store secret no longer reach it.
func TestAgbotAppliesAChangedBindingOnSIGHUP(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	agbotDir, agentDir := filepath.Join(dir, "agbot"), filepath.Join(dir, "agent")
	first, second, third, fourth := "first-"+rand.Text(), "second-"+rand.Text(), "third-"+rand.Text(), "fourth-"+rand.Text()
	const newStoreName = "myorg/web/api-key-2" // vault secret web/api-key-2 of org myorg

	sample, err := os.ReadFile(filepath.Join("agbot", "deployment.json"))
	require.NoError(t, err)
	deploymentFile := filepath.Join(dir, "deployment.json")
	require.NoError(t, os.WriteFile(deploymentFile, sample, 0o600))

	agbot := start(t, "agbot", nil, "-listen", "127.0.0.1:0", "-addr-file", filepath.Join(dir, "agbot.url"), "-dir", agbotDir,
		"-deployment", deploymentFile, "-watch-interval", "1s", "-update-backoff", "1s",
		"-reply-timeout", "20s", "-max-backoff", "2s", "-grace", "0s", "-log-level", "debug")
	agbotURL := readURL(t, filepath.Join(dir, "agbot.url"))
	waitFor(t, "the agbot to listen", func() bool { return agbotURL() != "" }, agbot)
	adminToken, err := demo.ReadToken(filepath.Join(agbotDir, "admin-token"))
	require.NoError(t, err)
	agent := start(t, "agent", nil, "-agbot", agbotURL(), "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
		"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir,
		"-listen", "127.0.0.1:0", "-poll", "200ms", "-log-level", "debug")
	envFile := filepath.Join(agentDir, "env", instance+".json")
	service := start(t, "service", nil, "-env", envFile, "-poll", "200ms", "-log-level", "debug")
	procs := []*proc{agbot, agent, service}
	serviceSaw := func(line string) func() bool {
		return func() bool { return slices.Contains(strings.Split(service.stdout.String(), "\n"), line) }
	}
	adm := &adminAPI{url: agbotURL(), token: adminToken}

	require.NoError(t, adm.put(ctx, storeName, first))
	waitFor(t, "the service to read the secret from its mount", serviceSaw("mount "+serviceSecret+" "+shortHash(first)), procs...)
	env, err := demo.ReadEnv(envFile)
	require.NoError(t, err)

	// A file that does not decode changes nothing, and the agbot runs on.
	require.NoError(t, os.WriteFile(deploymentFile, []byte(`{"org": "myorg", "services": [`), 0o600))
	require.NoError(t, agbot.cmd.Process.Signal(syscall.SIGHUP))
	waitFor(t, "the agbot to refuse the broken file", func() bool {
		return strings.Contains(agbot.stderr.String(), "deployment file not reloaded")
	}, procs...)

	// The binding changes to another vault secret.
	require.NoError(t, adm.put(ctx, newStoreName, second))
	changed := strings.Replace(string(sample), `"vaultSecret": "web/api-key"`, `"vaultSecret": "web/api-key-2"`, 1)
	require.NotEqual(t, string(sample), changed, "the sample's binding was found")
	require.NoError(t, os.WriteFile(deploymentFile, []byte(changed), 0o600))
	require.NoError(t, agbot.cmd.Process.Signal(syscall.SIGHUP))
	waitFor(t, "the service to fetch the new store secret's content", serviceSaw("update "+serviceSecret+" "+shortHash(second)), procs...)
	waitFor(t, "the service to acknowledge it", serviceSaw("ack "+serviceSecret), procs...)
	assert.Contains(t, agbot.stderr.String(), "agreement rebound")
	assert.NotContains(t, service.stdout.String(), "removed "+serviceSecret, "the service never lost its secret")
	after, err := demo.ReadEnv(envFile)
	require.NoError(t, err)
	assert.Equal(t, env.Token, after.Token, "the same instance: not restarted, not given a new token")
	mounts := 0
	for _, l := range strings.Split(service.stdout.String(), "\n") {
		if strings.HasPrefix(l, "mount "+serviceSecret+" ") {
			mounts++
			assert.Contains(t, []string{"mount " + serviceSecret + " " + shortHash(first), "mount " + serviceSecret + " " + shortHash(second)}, l,
				"the mount held the old content, then the new one, nothing else")
		}
	}
	assert.GreaterOrEqual(t, mounts, 2, "the service read its mount before and after the change")

	// Only the new store secret is delivered from now on.
	require.NoError(t, adm.put(ctx, storeName, third))
	require.NoError(t, adm.put(ctx, newStoreName, fourth))
	waitFor(t, "the service to get the new store secret's rotation", serviceSaw("update "+serviceSecret+" "+shortHash(fourth)), procs...)
	assert.False(t, serviceSaw("update "+serviceSecret+" "+shortHash(third))(), "the old store secret's rotation did not reach the service")
	assert.NotContains(t, service.stdout.String(), shortHash(third))

	// Another format is another service definition: the agbot ends the
	// agreement and makes it again, as Open Horizon does.
	reformatted := strings.Replace(changed, `"format": "raw"`, `"format": "json"`, 1)
	require.NotEqual(t, changed, reformatted, "the sample's format was found")
	require.NoError(t, os.WriteFile(deploymentFile, []byte(reformatted), 0o600))
	require.NoError(t, agbot.cmd.Process.Signal(syscall.SIGHUP))
	waitFor(t, "the agbot to end the agreement", func() bool {
		return strings.Contains(agbot.stderr.String(), "the deployment's services changed; ending the node's agreement to make it again")
	}, procs...)
	waitFor(t, "the service to see its secret removed", serviceSaw("removed "+serviceSecret), procs...)
	waitFor(t, "the agent to hold the secret of the new agreement in its new format", func() bool {
		b, err := os.ReadFile(filepath.Join(agentDir, "secrets", "instances", instance, serviceSecret))
		return err == nil && strings.HasPrefix(string(b), "{") && strings.Contains(string(b), fourth)
	}, procs...)

	for _, p := range []*proc{service, agent, agbot} {
		assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
	}
	for _, p := range procs {
		out := p.stdout.String() + p.stderr.String()
		for _, v := range []string{first, second, third, fourth, adminToken} {
			assert.NotContains(t, out, v, "%s printed a secret value or token", p.name)
		}
	}
}
