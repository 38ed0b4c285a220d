package agentapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
)

// tmpfs is a tmpfs the test mounted, and can "reboot" (empty).
type tmpfs struct {
	t   *testing.T
	dir string
}

// mountTmpfs mounts a fresh tmpfs. Where that is impossible (not root, no
// CAP_SYS_ADMIN) the test skips, saying why, except under CI=true where it
// fails: CI runs as root.
func mountTmpfs(t *testing.T) *tmpfs {
	t.Helper()
	m := &tmpfs{t: t, dir: filepath.Join(t.TempDir(), "mem")}
	require.NoError(t, os.Mkdir(m.dir, 0o700))
	if err := m.mount(); err != nil {
		testkit.Unavailable(t, fmt.Sprintf("tmpfs cannot be mounted here (%v): run the tests as root or with CAP_SYS_ADMIN to test the memory-backed mode", err))
	}
	t.Cleanup(func() { _ = unix.Unmount(m.dir, unix.MNT_DETACH) })
	return m
}

func (m *tmpfs) mount() error {
	return unix.Mount("tmpfs", m.dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=32m,mode=0700")
}

// reboot empties the memory: unmount and mount a fresh tmpfs.
func (m *tmpfs) reboot() {
	m.t.Helper()
	require.NoError(m.t, unix.Unmount(m.dir, 0))
	require.NoError(m.t, m.mount())
	entries, err := os.ReadDir(m.dir)
	require.NoError(m.t, err)
	require.Empty(m.t, entries)
}

// valueForms are the forms a value would show in if it leaked into a file:
// as is, hex, and the inner part of its base64 at each alignment.
func valueForms(v string) [][]byte {
	forms := [][]byte{[]byte(v), []byte(hex.EncodeToString([]byte(v)))}
	for shift := range 3 {
		s := base64.StdEncoding.EncodeToString(append(make([]byte, shift), v...))
		forms = append(forms, []byte(s[4:len(s)-4]))
	}
	return forms
}

// filesHolding returns the files under dir that hold any of values in any
// form, and how many files it looked at.
func filesHolding(t *testing.T, dir string, values []string) (leaks []string, scanned int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		scanned++
		for _, v := range values {
			for _, form := range valueForms(v) {
				if bytes.Contains(b, form) {
					leaks = append(leaks, p)
					return nil
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return leaks, scanned
}

// The memory-backed mode: after a full flow (proposal, update,
// acknowledgement, a cancelled agreement) no value is in any file under the
// persistent root; the files live on the tmpfs, and after a node reboot
// (the tmpfs emptied) Open restores them from the copy sealed to the
// agent's own keys.
func TestMemoryModeKeepsPlaintextOffDisk(t *testing.T) {
	ctx := context.Background()
	mem := mountTmpfs(t)
	f := newReceiverFixture(t)
	require.NoError(t, f.store.Close())
	f.root = filepath.Join(t.TempDir(), "persistent")
	logger, logs := logtest.NewLogger()
	f.opts = agentapi.Options{Root: f.root, MemoryDir: mem.dir, SealKeys: f.agent, StatusFiles: true, Logger: logger}
	f.open()

	values := []string{"canary" + rand.Text(), "canary" + rand.Text(), "canary" + rand.Text(), "canary" + rand.Text()}
	_, reply := f.receive(f.proposal(1, values[0]))
	require.True(t, reply.Accepted, reply.Reason)
	_, reply = f.receive(f.secrets(2, values[1]))
	require.True(t, reply.Accepted, reply.Reason)
	other := agreement.Proposal{AgreementID: "ag-2", Services: []agreement.ServiceSecrets{{Service: refB,
		Secrets: map[string]agreement.SecretDetails{"token": jsonSecret("token", values[2])}}}}
	env, err := agreement.Seal(f.agbot, f.agent.Public(), other, agreement.Header{Sequence: 1}, agreement.Options{})
	require.NoError(t, err)
	_, reply = f.receive(env)
	require.True(t, reply.Accepted, reply.Reason)
	cancel, err := agreement.Seal(f.agbot, f.agent.Public(), agreement.Update{AgreementID: "ag-2", Kind: agreement.UpdateKindCancel, Payload: json.RawMessage(`{}`)}, agreement.Header{Sequence: 2}, agreement.Options{})
	require.NoError(t, err)
	_, reply = f.receive(cancel)
	require.True(t, reply.Accepted, reply.Reason)
	_, reply = f.receive(f.secrets(3, values[3]))
	require.True(t, reply.Accepted, reply.Reason)
	require.NoError(t, f.store.Acknowledge(ctx, "svc-a", "cert"))

	mount := instanceInfo(t, f.store, "svc-a").MountSource
	assert.Equal(t, filepath.Join(mem.dir, "instances", "svc-a"), mount)
	assert.Equal(t, values[3], string(mustRead(t, filepath.Join(mount, "cert"))))
	check := func(when, current string) {
		t.Helper()
		leaks, scanned := filesHolding(t, f.root, values)
		assert.Empty(t, leaks, "%s: a value is in a file under the persistent root", when)
		assert.GreaterOrEqual(t, scanned, 2, "%s: metadata and replay state were scanned", when)
		memLeaks, _ := filesHolding(t, mem.dir, []string{current})
		assert.NotEmpty(t, memLeaks, "%s: the scan finds values where they are", when)
	}
	check("after the flow", values[3])
	info, _ := f.store.Instance("svc-a")

	// A node reboot: the memory is empty; Open restores the files.
	require.NoError(t, f.store.Close())
	mem.reboot()
	f.open()
	assert.Equal(t, values[3], f.content())
	assert.Equal(t, values[3], string(mustRead(t, filepath.Join(mount, "cert"))), "the mount source holds the file again")
	restored, _ := f.store.Instance("svc-a")
	assert.Equal(t, info, restored)
	status := instanceInfo(t, f.store, "svc-a").StatusDir
	assert.FileExists(t, filepath.Join(status, "SECRETS_PROVIDED"))
	fi, err := os.Stat(filepath.Join(mount, "cert"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o400), fi.Mode().Perm())
	assert.Equal(t, []string{"svc-a"}, f.store.InstanceIDs(), "the cancelled agreement stays gone")

	// An agent restart without a reboot keeps the files as they are, and
	// the store goes on: an update after the restart is applied and sealed.
	f.restart()
	_, reply = f.receive(f.secrets(4, values[0]))
	require.True(t, reply.Accepted, reply.Reason)
	require.NoError(t, f.store.Close())
	mem.reboot()
	f.open()
	assert.Equal(t, values[0], f.content())
	check("after the restarts", values[0])
	assert.NotContains(t, logs.String(), "could not restore")
}

// A removal in memory mode is final: after a reboot the sealed copy does
// not bring the instance back.
func TestMemoryModeRemovalIsFinal(t *testing.T) {
	mem := mountTmpfs(t)
	f := newReceiverFixture(t)
	require.NoError(t, f.store.Close())
	f.opts = agentapi.Options{Root: filepath.Join(t.TempDir(), "persistent"), MemoryDir: mem.dir, SealKeys: f.agent}
	f.open()
	f.receive(f.proposal(1, "v1"))
	require.NoError(t, f.store.Remove(context.Background(), "svc-a"))
	require.NoError(t, f.store.Close())
	mem.reboot()
	f.open()
	assert.Empty(t, f.store.InstanceIDs())
}

// The memory directory must be memory-backed, and a store is opened in
// the mode it was written in.
func TestMemoryModeChecks(t *testing.T) {
	ctx := context.Background()
	keys, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)

	disk := t.TempDir()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(disk, &st))
	if st.Type != unix.TMPFS_MAGIC && st.Type != unix.RAMFS_MAGIC {
		_, err = agentapi.Open(ctx, agentapi.Options{Root: filepath.Join(disk, "root"), MemoryDir: filepath.Join(disk, "mem"), SealKeys: keys})
		assert.ErrorContains(t, err, "is not on a memory-backed filesystem")
	}
	_, err = agentapi.Open(ctx, agentapi.Options{Root: filepath.Join(disk, "root2"), MemoryDir: filepath.Join(disk, "mem2")})
	assert.ErrorContains(t, err, "MemoryDir and Options.SealKeys go together")

	mem := mountTmpfs(t)
	root := filepath.Join(t.TempDir(), "root")
	s, err := agentapi.Open(ctx, agentapi.Options{Root: root, MemoryDir: mem.dir, SealKeys: keys})
	require.NoError(t, err)
	applyTwoServices(t, s)
	require.NoError(t, s.Close())
	_, err = agentapi.Open(ctx, agentapi.Options{Root: root})
	assert.ErrorContains(t, err, "was stored with Options.MemoryDir")

	plain := filepath.Join(t.TempDir(), "plain")
	s, err = agentapi.Open(ctx, agentapi.Options{Root: plain})
	require.NoError(t, err)
	applyTwoServices(t, s)
	require.NoError(t, s.Close())
	_, err = agentapi.Open(ctx, agentapi.Options{Root: plain, MemoryDir: mem.dir, SealKeys: keys})
	assert.ErrorContains(t, err, "was stored without Options.MemoryDir")

	// Another agent's keys cannot restore the sealed copy: the instance
	// stays, its files missing, and the reason is logged.
	mem.reboot()
	stranger, err := agreement.GenerateKeys(agreement.SuiteX25519)
	require.NoError(t, err)
	logger, logs := logtest.NewLogger()
	s, err = agentapi.Open(ctx, agentapi.Options{Root: root, MemoryDir: mem.dir, SealKeys: stranger, Logger: logger})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, []string{"a", "b"}, s.InstanceIDs())
	_, err = s.ReadSecret(ctx, "a", "cert")
	assert.Error(t, err)
	assert.Contains(t, logs.String(), "could not restore an instance's files from their sealed copy")
}
