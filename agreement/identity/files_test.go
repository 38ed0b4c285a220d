package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testFiles(t *testing.T) *files {
	dir := t.TempDir()
	return &files{keyPath: filepath.Join(dir, "agent.key"), certPath: filepath.Join(dir, "agent.crt")}
}

func TestFilesKeyRoundTripMode0600(t *testing.T) {
	f := testFiles(t)
	k := newAgentKeys(t)
	require.NoError(t, writeKeyFile(f.keyPath, k.sign))
	info, err := os.Stat(f.keyPath)
	require.NoError(t, err)
	assert.Equal(t, keyFileMode, info.Mode().Perm())
	got, err := readKeyFile(f.keyPath)
	require.NoError(t, err)
	assert.True(t, got.Equal(k.sign))
}

func TestFilesKeyModeTightenedOverExistingFile(t *testing.T) {
	f := testFiles(t)
	require.NoError(t, os.WriteFile(f.keyPath, []byte("old"), 0o644))
	require.NoError(t, os.Chmod(f.keyPath, 0o644)) // past the umask
	k := newAgentKeys(t)
	require.NoError(t, writeKeyFile(f.keyPath, k.sign))
	info, err := os.Stat(f.keyPath)
	require.NoError(t, err)
	assert.Equal(t, keyFileMode, info.Mode().Perm(), "the atomic write would keep 0644 if the mode were not tightened first")
}

func TestFilesReadKeyRefusesLooseMode(t *testing.T) {
	f := testFiles(t)
	k := newAgentKeys(t)
	require.NoError(t, writeKeyFile(f.keyPath, k.sign))
	require.NoError(t, os.Chmod(f.keyPath, 0o640))
	_, err := readKeyFile(f.keyPath)
	assert.ErrorIs(t, err, edgesecrets.ErrInvalid)
	assert.ErrorContains(t, err, "must not be readable by group or others")
}

func TestFilesReadKeyErrors(t *testing.T) {
	f := testFiles(t)
	_, err := readKeyFile(f.keyPath)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	require.NoError(t, os.WriteFile(f.keyPath, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600))
	_, err = readKeyFile(f.keyPath)
	assert.ErrorContains(t, err, "is not a PKCS #8 key")
	assert.NotContains(t, err.Error(), "AAAA")
}

func TestFilesCertificateInstalledOnlyIfItMatchesTheKey(t *testing.T) {
	h := newHub(t)
	f := testFiles(t)
	k := newAgentKeys(t)
	require.NoError(t, writeKeyFile(f.keyPath, k.sign))
	mine := h.register(t, k, testID)
	chain := append([]*x509.Certificate{leafOf(t, mine)}, h.trust.chain...)
	require.NoError(t, f.writeCertificate(chain))
	before, err := os.ReadFile(f.certPath)
	require.NoError(t, err)
	got, err := f.readCertificate()
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, mine.Serial, serialString(got[0]))

	other := testID
	other.InstanceID = "i-other"
	theirs := h.register(t, newAgentKeys(t), other)
	err = f.writeCertificate([]*x509.Certificate{leafOf(t, theirs)})
	require.ErrorIs(t, err, ErrForbidden)
	assert.ErrorContains(t, err, "not installed")
	after, err := os.ReadFile(f.certPath)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the installed certificate is untouched")

	entries, err := os.ReadDir(filepath.Dir(f.certPath))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary files left behind")
}

func TestFilesWriteKeyRefusesBadKey(t *testing.T) {
	f := testFiles(t)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	assert.ErrorIs(t, writeKeyFile(f.keyPath, priv[:10]), edgesecrets.ErrInvalid)
	_, err = os.Stat(f.keyPath)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}
