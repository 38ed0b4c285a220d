package agbotsecrets_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/open-horizon/anax/agreementbot/secrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/anax/agbotsecrets"
	"github.com/edgesecrets/edgesecrets/ohsecret"
	"github.com/edgesecrets/edgesecrets/secretstore"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/memory"
)

// kv writes {key, value} to name.
func kv(t testing.TB, st *secretstore.Store, name, value string) {
	t.Helper()
	putUnit(t, st, name, ohsecret.Details{Key: "k", Value: value}.Data())
}

func metadata(t testing.TB, p *agbotsecrets.Plugin, name string) secrets.SecretMetadata {
	t.Helper()
	md, err := p.GetSecretMetadata("org1", "", "", name)
	require.NoError(t, err)
	return md
}

// TestChangeClock runs in a synctest bubble, whose clock moves only when
// every goroutine waits: writes "in the same second" are exactly that.
func TestChangeClock(t *testing.T) {
	stores := map[string]func() *secretstore.Store{
		"versions":                         memory.New,
		"no versions or times, like KV v1": func() *secretstore.Store { return unversioned(t, memory.New()) },
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newStore()
				p := newUnitPlugin(t, st, "", filepath.Join(t.TempDir(), "changes.json"), nil)
				kv(t, st, "org1/s", "one")
				first := metadata(t, p, "s")
				assert.Equal(t, first, metadata(t, p, "s"), "the same content keeps its times")
				kv(t, st, "org1/s", "two") // the same second
				second := metadata(t, p, "s")
				assert.Greater(t, second.UpdateTime, first.UpdateTime, "a rotation in the same second moves the time")
				assert.Equal(t, first.CreationTime, second.CreationTime)
				kv(t, st, "org1/s", "three")
				third := metadata(t, p, "s")
				assert.Greater(t, third.UpdateTime, second.UpdateTime)

				time.Sleep(10 * time.Second)
				assert.Equal(t, third, metadata(t, p, "s"), "time passing is no change")
				kv(t, st, "org1/s", "four")
				assert.Greater(t, metadata(t, p, "s").UpdateTime, third.UpdateTime)
			})
		})
	}
}

// TestChangeClockRestart checks that a plugin started again on the same
// file reports the same times, and goes on from them.
func TestChangeClockRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := unversioned(t, memory.New())
		file := filepath.Join(t.TempDir(), "changes.json")
		p := newUnitPlugin(t, st, "", file, nil)
		kv(t, st, "org1/s", "one")
		metadata(t, p, "s")
		kv(t, st, "org1/s", "two")
		before := metadata(t, p, "s")
		p.Close()

		again := newUnitPlugin(t, st, "", file, nil)
		assert.Equal(t, before, metadata(t, again, "s"), "a restarted agbot reports the same times")
		kv(t, st, "org1/s", "three")
		assert.Greater(t, metadata(t, again, "s").UpdateTime, before.UpdateTime)

		fresh := newUnitPlugin(t, st, "", "", nil)
		kv(t, st, "org1/s", "four")
		assert.LessOrEqual(t, metadata(t, fresh, "s").UpdateTime, before.UpdateTime,
			"without the file the clock starts again (what the file is for)")
	})
}

// TestChangeClockDeleted checks that a secret written again after it was
// seen missing is new, even with the same content and version.
func TestChangeClockDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := unversioned(t, memory.New())
		p := newUnitPlugin(t, st, "", "", nil)
		kv(t, st, "org1/s", "same")
		before := metadata(t, p, "s")
		require.NoError(t, st.Delete(context.Background(), "org1/s"))
		_, err := p.GetSecretMetadata("org1", "", "", "s")
		assert.Equal(t, http.StatusNotFound, status(err))
		anaxNow := time.Now().Unix() + 1 // anax records its own time, perhaps the next second
		kv(t, st, "org1/s", "same")
		after := metadata(t, p, "s")
		assert.Greater(t, after.UpdateTime, before.UpdateTime)
		assert.Greater(t, after.UpdateTime, anaxNow, "after the time anax noted the secret missing")
	})
}

// TestChangeClockFile checks the file: mode 0600, no value and no
// checksum of a value in it, and a corrupt one refused, not reset.
func TestChangeClockFile(t *testing.T) {
	st := memory.New()
	file := filepath.Join(t.TempDir(), "changes.json")
	const value = "canary-cl0ck-value"
	p := newUnitPlugin(t, st, "", file, nil)
	kv(t, st, "org1/s", value)
	metadata(t, p, "s")
	info, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	content, err := os.ReadFile(file)
	require.NoError(t, err)
	s, err := st.Get(context.Background(), "org1/s")
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(value))
	for _, leak := range []string{value, hex.EncodeToString(sum[:]), s.ContentTag().Encode(),
		strings.TrimPrefix((&secretstore.Secret{Data: s.Data}).ContentTag().Encode(), "sha256:")} {
		assert.NotContains(t, string(content), leak)
	}

	for name, corrupt := range map[string]string{
		"not JSON":       "{",
		"wrong version":  `{"version": 2, "key": "", "secrets": {}}`,
		"short key":      `{"version": 1, "key": "AAAA", "secrets": {}}`,
		"bad tag":        `{"version": 1, "key": "` + strings.Repeat("A", 43) + `=", "secrets": {"org1/s": {"tag": "x", "updated": 1}}}`,
		"negative time":  `{"version": 1, "key": "` + strings.Repeat("A", 43) + `=", "secrets": {"org1/s": {"tag": "", "updated": -1}}}`,
		"unknown member": `{"version": 1, "key": "` + strings.Repeat("A", 43) + `=", "secrets": {}, "x": 1}`,
	} {
		t.Run(name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "changes.json")
			require.NoError(t, os.WriteFile(bad, []byte(corrupt), 0o600))
			q, err := agbotsecrets.New(agbotsecrets.Options{Store: st, ChangeFile: bad})
			require.NoError(t, err)
			err = q.Login()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "corrupt")
			assert.False(t, q.IsReady())
			got, err := os.ReadFile(bad)
			require.NoError(t, err)
			assert.Equal(t, corrupt, string(got), "a corrupt file is left as it is")
		})
	}
}

// TestChangeClockFitsAnax checks the times stay within anax's 32-bit
// column: past 2038 the plugin refuses to report rather than wrap.
func TestChangeClockFitsAnax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := unversioned(t, memory.New())
		p := newUnitPlugin(t, st, "", "", nil)
		kv(t, st, "org1/s", "one")
		assert.LessOrEqual(t, metadata(t, p, "s").UpdateTime, int64(math.MaxInt32))
		time.Sleep(time.Until(time.Unix(math.MaxInt32+1, 0)))
		kv(t, st, "org1/s", "two")
		_, err := p.GetSecretMetadata("org1", "", "", "s")
		var u *secrets.Unknown
		assert.ErrorAs(t, err, &u)
	})
}

// unversioned wraps a store into one that keeps neither versions nor times,
// as Vault's KV v1: the plugin must read the data to see a change.
func unversioned(t testing.TB, st *secretstore.Store) *secretstore.Store {
	t.Helper()
	out, err := secretstore.New(noVersions{st}, secretstore.Options{MaxAttempts: 1})
	require.NoError(t, err)
	return out
}

type noVersions struct{ st *secretstore.Store }

func (n noVersions) strip(s *secretstore.Secret) *driver.Secret {
	return &driver.Secret{Data: s.Data, Labels: s.Labels}
}

func (n noVersions) Get(ctx context.Context, name string) (*driver.Secret, error) {
	s, err := n.st.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return n.strip(s), nil
}

func (n noVersions) Stat(ctx context.Context, name string) (*driver.Secret, error) {
	md, err := n.st.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	return &driver.Secret{Labels: md.Labels}, nil
}

func (n noVersions) Put(ctx context.Context, w *driver.Write) error {
	_, err := n.st.Put(ctx, &secretstore.Secret{Name: w.Name, Data: edgesecrets.Data(w.Data), Labels: w.Labels}, secretstore.PutOptions{})
	return err
}

func (n noVersions) Delete(ctx context.Context, name string) error { return n.st.Delete(ctx, name) }

func (n noVersions) List(ctx context.Context, prefix string) ([]string, error) {
	return n.st.List(ctx, prefix)
}

func (n noVersions) Close() error { return nil }
