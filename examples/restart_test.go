package examples_test

import (
	"crypto/rand"
	"encoding/json"
	"io/fs"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery/state/statetest"
	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/awssm" // registers "awssm" for the administrator's store
)

// secretsManager serves a wire-level AWS Secrets Manager endpoint in the
// test process: a store that outlives the agbot, which reaches it through
// the -store file this returns. The administrator writes to the same
// endpoint with a client of its own.
func secretsManager(t *testing.T) (configPath string, adm storeAdmin) {
	t.Helper()
	configPath, adm, _ = secretsManagerEndpoint(t)
	return configPath, adm
}

// secretsManagerEndpoint is secretsManager that also returns the endpoint,
// to inject faults into.
func secretsManagerEndpoint(t *testing.T) (configPath string, adm storeAdmin, endpoint *smmock.Server) {
	t.Helper()
	endpoint = smmock.New(smmock.Options{Credentials: map[string]string{"AKIDEXAMPLES": "examples-secret-key"}})
	srv := httptest.NewServer(endpoint)
	t.Cleanup(srv.Close)
	cfg, err := json.Marshal(map[string]any{"type": "awssm", "defaultScope": "openhorizon", "awssm": map[string]any{
		"region": "eu-west-1", "endpoint": srv.URL, "forceDelete": true,
		"accessKeyId": "AKIDEXAMPLES", "secretAccessKey": "examples-secret-key",
	}})
	require.NoError(t, err)
	configPath = filepath.Join(t.TempDir(), "store.json")
	require.NoError(t, os.WriteFile(configPath, cfg, 0o600))
	parsed, err := secretstore.ParseConfig(strings.NewReader(string(cfg)))
	require.NoError(t, err)
	store, err := secretstore.Open(t.Context(), parsed, secretstore.OpenOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return configPath, storeAdmin{store}, endpoint
}

// freeLoopbackAddr returns a loopback address with a port free now, for a
// program that must listen on the same address after a restart (the
// agents keep its URL).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// assertNoValueInDir fails t if a file under dir holds one of values in
// any encoding a careless encoder would use.
func assertNoValueInDir(t *testing.T, dir string, values ...string) {
	t.Helper()
	scanned := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned++
		for _, v := range values {
			if !statetest.AssertNoCanary(t, b, []byte(v)) {
				t.Errorf("%s holds a secret value", path)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, scanned, "files scanned under %s", dir)
}

// sentCount counts the envelopes the agbot posted to the relay, from its
// debug log.
func sentCount(p *proc) int { return strings.Count(p.stderr.String(), `msg=sent `) }

// watchesSomething reports whether the agbot's last watcher cycle, in its
// debug log, polled at least one store secret.
func watchesSomething(p *proc) bool {
	out := p.stderr.String()
	i := strings.LastIndex(out, "cycle.watched=")
	if i < 0 {
		return false
	}
	rest := out[i+len("cycle.watched="):]
	n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ' ')])
	return err == nil && n > 0
}

// The first failure, against the example programs: the agbot is
// killed with SIGKILL while an update is unacknowledged (the agent is
// paused), and restarted with the same -state file. The agent, not
// restarted, publishes its certificate on the new agbot's relay and gets
// the update; the agbot made no second agreement. Afterwards no file of the
// agbot's (its state file included, after a run at debug level) holds a
// secret value.
func TestAgbotKilledMidRotation(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	agbotDir, agentDir := filepath.Join(dir, "agbot"), filepath.Join(dir, "agent")
	storeConfig, adm := secretsManager(t)
	first, second := "first-"+rand.Text(), "second-"+rand.Text()
	require.NoError(t, adm.put(ctx, storeName, first))

	addr := freeLoopbackAddr(t)
	agbotArgs := []string{"-listen", addr, "-dir", agbotDir, "-store", storeConfig,
		"-deployment", filepath.Join("agbot", "deployment.json"), "-watch-interval", "1s", "-update-backoff", "200ms",
		"-max-backoff", "1s", "-reply-timeout", "2s", "-log-level", "debug"}
	agbot := start(t, "agbot", nil, agbotArgs...)
	agbotURL := "http://" + addr
	waitFor(t, "the agbot to serve", func() bool { return strings.Contains(agbot.stderr.String(), "agbot serving") }, agbot)
	agent := start(t, "agent", nil, "-agbot", agbotURL, "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
		"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir,
		"-listen", "127.0.0.1:0", "-poll", "200ms", "-log-level", "debug")
	secretFile := filepath.Join(agentDir, "secrets", "instances", instance, serviceSecret)
	holds := func(value string) func() bool {
		return func() bool { b, err := os.ReadFile(secretFile); return err == nil && string(b) == value }
	}
	waitFor(t, "the agent to hold the first value", holds(first), agbot, agent)

	// The agent pauses; the rotation's update is sent and not answered.
	require.NoError(t, agent.cmd.Process.Signal(syscall.SIGSTOP))
	paused := true
	t.Cleanup(func() {
		if paused {
			_ = agent.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	sent := sentCount(agbot)
	require.NoError(t, adm.put(ctx, storeName, second))
	waitFor(t, "the agbot to send the update", func() bool { return sentCount(agbot) > sent }, agbot)
	require.NoError(t, agbot.cmd.Process.Kill()) // SIGKILL: no clean-up of any kind
	<-agbot.done
	assert.True(t, holds(first)(), "the paused agent did not apply the update")
	assert.FileExists(t, filepath.Join(agbotDir, "agbot-state.db"))

	// Restarted with the same state, on the same address.
	agbot2 := start(t, "agbot", nil, agbotArgs...)
	waitFor(t, "the restarted agbot to serve", func() bool { return strings.Contains(agbot2.stderr.String(), "agbot serving") }, agbot2)
	assert.Contains(t, agbot2.stderr.String(), "agreements=1", "it knows the agreement from its state")
	require.NoError(t, agent.cmd.Process.Signal(syscall.SIGCONT))
	paused = false
	waitFor(t, "the running agent to get the update", holds(second), agbot2, agent)
	assert.Contains(t, agent.stderr.String(), "publishing it again", "the agent published its certificate on the new relay")
	assert.NotContains(t, agbot2.stderr.String(), `msg="agreement registered"`, "no second agreement")

	for _, p := range []*proc{agent, agbot2} {
		assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
	}
	assertNoValueInDir(t, agbotDir, first, second)
	for _, p := range []*proc{agbot, agbot2, agent} {
		out := p.stdout.String() + p.stderr.String()
		for _, v := range []string{first, second} {
			assert.NotContains(t, out, v, "%s printed a secret value", p.name)
		}
	}
	t.Logf("agbot killed after %s envelopes; restarted agbot sent %d", strconv.Itoa(sent+1), sentCount(agbot2))
}

// Two example agbots share one real PostgreSQL (-state postgres://…, the
// same agreement keys and hub CA in one -dir, each its own -member), and
// the agent takes messages from both. The agbot that delivered the
// proposal is killed with SIGKILL; the other takes over its agreement
// within a lease period, and the next rotation reaches the agent through
// it. Nothing in the database holds a value.
func TestTwoAgbotsSharePostgres(t *testing.T) {
	ctx := t.Context()
	pg := pgtest.Start(t, pgtest.Options{})
	dir := t.TempDir()
	agbotDir, agentDir := filepath.Join(dir, "agbot"), filepath.Join(dir, "agent")
	storeConfig, adm := secretsManager(t)
	first, second := "first-"+rand.Text(), "second-"+rand.Text()
	require.NoError(t, adm.put(ctx, storeName, first))

	startAgbot := func(member string) (*proc, string) {
		addr := freeLoopbackAddr(t)
		p := start(t, "agbot", nil, "-listen", addr, "-dir", agbotDir, "-store", storeConfig, "-state", pg.URL,
			"-member", member, "-lease-period", "3s", "-deployment", filepath.Join("agbot", "deployment.json"),
			"-watch-interval", "1s", "-update-backoff", "200ms", "-max-backoff", "1s", "-reply-timeout", "2s", "-log-level", "debug")
		p.name = "agbot " + member
		waitFor(t, member+" to serve", func() bool { return strings.Contains(p.stderr.String(), "agbot serving") }, p)
		return p, "http://" + addr
	}
	agbotA, urlA := startAgbot("agbot-a") // makes the keys and the hub CA in the shared -dir
	agbotB, urlB := startAgbot("agbot-b")
	agent := start(t, "agent", nil, "-agbot", urlA+","+urlB, "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
		"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir,
		"-listen", "127.0.0.1:0", "-poll", "200ms", "-log-level", "debug")
	secretFile := filepath.Join(agentDir, "secrets", "instances", instance, serviceSecret)
	holds := func(value string) func() bool {
		return func() bool { b, err := os.ReadFile(secretFile); return err == nil && string(b) == value }
	}
	waitFor(t, "the agent to hold the first value", holds(first), agbotA, agbotB, agent)

	// The bound secret is polled by one of the two (the names are shared
	// out among the live agbots): kill that one, so that the other must
	// take the name over to see the rotation.
	var owner, survivor *proc
	waitFor(t, "one agbot to poll the secret", func() bool {
		switch {
		case watchesSomething(agbotA) && !watchesSomething(agbotB):
			owner, survivor = agbotA, agbotB
		case watchesSomething(agbotB) && !watchesSomething(agbotA):
			owner, survivor = agbotB, agbotA
		}
		return owner != nil
	}, agbotA, agbotB, agent)
	require.NoError(t, owner.cmd.Process.Kill())
	<-owner.done
	killed := time.Now()
	sent := sentCount(survivor)
	require.NoError(t, adm.put(ctx, storeName, second))
	waitFor(t, "the agent to get the rotation through the other agbot", holds(second), survivor, agent)
	t.Logf("%s (polling the secret) killed; the rotation reached the agent through %s %s later", owner.name, survivor.name, time.Since(killed).Round(100*time.Millisecond))
	assert.True(t, watchesSomething(survivor), "the survivor polls the secret now")
	assert.Greater(t, sentCount(survivor), sent, "the survivor sent the update")
	assert.Equal(t, 1, strings.Count(agbotA.stderr.String()+agbotB.stderr.String(), `msg="agreement registered"`),
		"one agreement for the node, though both agbots deployed it")

	for _, p := range []*proc{agent, survivor} {
		assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
	}
	dump := pg.Dump(t)
	require.Contains(t, dump, storeName, "the dump holds the agreement's store name")
	for _, v := range []string{first, second} {
		statetest.AssertNoCanary(t, []byte(dump), []byte(v))
	}
	assertNoValueInDir(t, agbotDir, first, second)
}
