package examples_test

import (
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// deleteIdentityRecord deletes an agent's identity record from a stopped
// agbot's state file, as a lost or restored-from-backup state would lack
// it. It knows boltstate's layout: bucket "identities", key the
// provider's length (uvarint), the provider, the instance id.
func deleteIdentityRecord(t *testing.T, stateFile, provider, instanceID string) {
	t.Helper()
	db, err := bolt.Open(stateFile, 0o600, &bolt.Options{Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	key := append(binary.AppendUvarint(nil, uint64(len(provider))), provider...)
	key = append(key, instanceID...)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("identities"))
		require.NotNil(t, b, "the state file has identity records")
		require.NotNil(t, b.Get(key), "the agent's record is in the state file")
		return b.Delete(key)
	}))
}

// Issue 28: an agbot whose state lost an agent's identity record refused
// the agent's certificate for ever, and the agent retried publishing it.
// Now the restarted agbot's relay answers that it does not know the
// identity, the running agent registers again at its first attempt (one
// WARN, no failed attempt: within one backoff), publishes the new
// certificate, and gets the next rotation on its existing agreement.
func TestAgentRegistersAgainWhenTheAgbotLostItsRecord(t *testing.T) {
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
	waitFor(t, "the agbot to serve", func() bool { return strings.Contains(agbot.stderr.String(), "agbot serving") }, agbot)
	agent := start(t, "agent", nil, "-agbot", "http://"+addr, "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
		"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir,
		"-listen", "127.0.0.1:0", "-poll", "200ms", "-log-level", "debug")
	secretFile := filepath.Join(agentDir, "secrets", "instances", instance, serviceSecret)
	holds := func(value string) func() bool {
		return func() bool { b, err := os.ReadFile(secretFile); return err == nil && string(b) == value }
	}
	waitFor(t, "the agent to hold the first value", holds(first), agbot, agent)

	// The agbot stops; its state loses the agent's identity record (not
	// its agreement); it starts again on the same address.
	require.NoError(t, agbot.stop())
	deleteIdentityRecord(t, filepath.Join(agbotDir, "agbot-state.db"), "demo", "node-1")
	agbot2 := start(t, "agbot", nil, agbotArgs...)
	waitFor(t, "the restarted agbot to serve", func() bool { return strings.Contains(agbot2.stderr.String(), "agbot serving") }, agbot2)
	assert.Contains(t, agbot2.stderr.String(), "agreements=1", "it kept the agreement")

	lost := `level=WARN msg="identity: the identity is lost (no record, revoked or expired); registering again"`
	waitFor(t, "the agent to register again", func() bool {
		return strings.Contains(agent.stderr.String(), `msg="identity: registered" again=true`)
	}, agbot2, agent)
	require.NoError(t, adm.put(ctx, storeName, second))
	waitFor(t, "the agent to get the rotation", holds(second), agbot2, agent)

	agentLog := agent.stderr.String()
	assert.Equal(t, 1, strings.Count(agentLog, lost), "one WARN for the lost identity")
	assert.Regexp(t, `msg="identity: registered" again=true notAfter=\S+ failures=0\n`, agentLog, "registered again at the first attempt")
	assert.NotContains(t, agentLog, "identity: registering failed", "no failed attempt")
	assert.NotContains(t, agentLog, "publishing the certificate failed", "the refusal is not retried as a failure")
	agbotLog := agbot2.stderr.String()
	assert.Equal(t, 1, strings.Count(agbotLog, `msg="certificate refused"`), "the agent published the refused certificate once")
	assert.Contains(t, agbotLog, "reason=unknown")
	assert.NotContains(t, agbotLog, `msg="agreement registered"`, "no second agreement")
	for _, p := range []*proc{agent, agbot2} {
		assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
	}
}
