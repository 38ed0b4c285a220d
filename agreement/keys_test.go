package agreement

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hpke"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixedKeys derives a key set from fixed seeds, so its text forms are
// reproducible.
func fixedKeys(t testing.TB, suite Suite) *PrivateKeys { return derivedKeys(t, suite, 0x17) }

// derivedKeys derives a key set from seed.
func derivedKeys(t testing.TB, suite Suite, seed byte) *PrivateKeys {
	t.Helper()
	h, ok := suite.hpke()
	require.True(t, ok)
	enc, err := h.kem.DeriveKeyPair(bytes.Repeat([]byte{seed ^ 0x55}, 32))
	require.NoError(t, err)
	k, err := newPrivateKeys(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32)), enc)
	require.NoError(t, err)
	return k
}

func goldenName(suite Suite) string {
	return map[Suite]string{SuiteMLKEM768X25519: "mlkem768x25519", SuiteX25519: "x25519"}[suite]
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run %s -update to create it", t.Name())
	assert.Equal(t, string(want), string(got), "the text form changed: old files and peers would no longer parse it")
}

func TestKeyTextFormsAreStable(t *testing.T) {
	for _, suite := range suites() {
		t.Run(string(suite), func(t *testing.T) {
			k := fixedKeys(t, suite)
			pubText, err := k.Public().MarshalText()
			require.NoError(t, err)
			checkGolden(t, "public-"+goldenName(suite)+".pem", pubText)

			path := filepath.Join(t.TempDir(), "keys")
			require.NoError(t, k.WriteFile(path))
			privText, err := os.ReadFile(path)
			require.NoError(t, err)
			// A test key, published on purpose as a format vector.
			checkGolden(t, "private-"+goldenName(suite)+".pem", privText)

			p, err := parsePublicKeys(pubText)
			require.NoError(t, err)
			assert.True(t, samePublicKeys(p, k.Public()))
			assert.Equal(t, k.Public().signingID, p.signingID)
			assert.Equal(t, k.Public().EncryptionKeyID(), p.EncryptionKeyID())
			assert.Equal(t, suite, p.Suite())
		})
	}
}

func TestGenerateKeys(t *testing.T) {
	k, err := GenerateKeys("")
	require.NoError(t, err)
	assert.Equal(t, SuiteMLKEM768X25519, k.Public().Suite(), "the default is the post-quantum hybrid")

	for _, suite := range suites() {
		a, b := mustKeys(t, suite), mustKeys(t, suite)
		assert.Equal(t, suite, a.Public().Suite())
		assert.Equal(t, suite.kemID(), a.Public().EncryptionKey().KEM().ID())
		assert.True(t, a.Public().signingID.valid())
		assert.True(t, a.Public().EncryptionKeyID().valid())
		assert.NotEqual(t, a.Public().signingID, b.Public().signingID)
		assert.NotEqual(t, a.Public().EncryptionKeyID(), b.Public().EncryptionKeyID())
		assert.False(t, samePublicKeys(a.Public(), b.Public()))
	}

	_, err = GenerateKeys("DHKEM-P256/HKDF-SHA256/AES-128-GCM")
	requireKind(t, err, errUnknownSuite)
	assert.Zero(t, Suite("nope").kemID())
}

func TestPublicKeysFromStdlibTypes(t *testing.T) {
	for _, suite := range suites() {
		t.Run(string(suite), func(t *testing.T) {
			k := mustKeys(t, suite)
			// What an identity certificate carries: the Ed25519 key, and the
			// HPKE key as KEM id + bytes.
			signing := bytes.Clone(k.Public().signing)
			kemID, encBytes := k.Public().EncryptionKey().KEM().ID(), k.Public().EncryptionKey().Bytes()

			enc, err := parseEncryptionKey(kemID, encBytes)
			require.NoError(t, err)
			p, err := NewPublicKeys(signing, enc)
			require.NoError(t, err)
			assert.True(t, samePublicKeys(p, k.Public()))
			assert.Equal(t, k.Public().EncryptionKeyID(), encryptionKeyID(enc))
			assert.Equal(t, k.Public().signingID, signingKeyID(signing))

			// Sealing to the rebuilt keys reaches the original holder.
			sender := mustKeys(t, suite)
			env, err := Seal(sender, p, []byte("x"), Header{Type: TypeProposal, AgreementID: "a", Sequence: 1}, Options{})
			require.NoError(t, err)
			_, pt, err := Open[[]byte](context.Background(), k, sender.Public(), env, NewMemoryReplayGuard(), Options{})
			require.NoError(t, err)
			assert.Equal(t, "x", string(pt))

			signing[0] ^= 1
			assert.True(t, samePublicKeys(p, k.Public()), "NewPublicKeys keeps its own copy of the signing key")

			_, err = parseEncryptionKey(kemID, encBytes[1:])
			requireKind(t, err, errInvalidKey)
		})
	}

	k := mustKeys(t, SuiteX25519)
	_, err := NewPublicKeys(k.Public().signing[:31], k.Public().EncryptionKey())
	requireKind(t, err, errInvalidKey)
	_, err = NewPublicKeys(k.Public().signing, nil)
	requireKind(t, err, errInvalidKey)
	p256, err := hpke.DHKEM(ecdh.P256()).GenerateKey()
	require.NoError(t, err)
	_, err = NewPublicKeys(k.Public().signing, p256.PublicKey())
	requireKind(t, err, errUnknownSuite)
	_, err = parseEncryptionKey(p256.KEM().ID(), p256.PublicKey().Bytes())
	requireKind(t, err, errUnknownSuite)
	_, err = newPrivateKeys(k.signing, p256)
	requireKind(t, err, errUnknownSuite)
}

func TestPublicKeysJSON(t *testing.T) {
	k := mustKeys(t, SuiteMLKEM768X25519)
	type config struct {
		Agbot *PublicKeys `json:"agbot"`
	}
	b, err := json.Marshal(config{k.Public()})
	require.NoError(t, err)
	var got config
	require.NoError(t, json.Unmarshal(b, &got))
	assert.True(t, samePublicKeys(got.Agbot, k.Public()))
	assert.Equal(t, fmt.Sprintf("PublicKeys{Suite:%s SigningKeyID:%s EncryptionKeyID:%s}", k.Public().Suite(), k.Public().signingID, k.Public().EncryptionKeyID()), k.Public().String())
}

func TestParsePublicKeysRejects(t *testing.T) {
	k := fixedKeys(t, SuiteX25519)
	good, err := k.Public().MarshalText()
	require.NoError(t, err)
	pq, err := fixedKeys(t, SuiteMLKEM768X25519).Public().MarshalText()
	require.NoError(t, err)
	s := string(good)
	path := filepath.Join(t.TempDir(), "k")
	require.NoError(t, k.WriteFile(path))
	private, err := os.ReadFile(path)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		text string
		want error
	}{
		{"empty", "", errInvalidKey},
		{"not PEM", "hello", errInvalidKey},
		{"a private key block", string(private), errInvalidKey},
		{"two blocks", s + s, errInvalidKey},
		{"text after the block", s + "x", errInvalidKey},
		{"text before the block", "x" + s, errInvalidKey},
		{"unknown header", strings.Replace(s, "Version: 1", "Version: 1\nComment: hi", 1), errInvalidKey},
		{"version 2", strings.Replace(s, "Version: 1", "Version: 2", 1), errUnsupportedVersion},
		{"no version", strings.Replace(s, "Version: 1\n", "", 1), errUnsupportedVersion},
		{"unknown suite", strings.Replace(s, string(SuiteX25519), "DHKEM-X448/HKDF-SHA512/AES-256-GCM", 1), errUnknownSuite},
		{"suite header of another KEM", strings.Replace(string(pq), string(SuiteMLKEM768X25519), string(SuiteX25519), 1), errInvalidKey},
		{"signing key id does not match", strings.Replace(s, "Signing-Key-Id: "+string(k.Public().signingID), "Signing-Key-Id: 00000000000000000000000000000000", 1), errInvalidKey},
		{"encryption key id does not match", strings.Replace(s, "Encryption-Key-Id: "+string(k.Public().EncryptionKeyID()), "Encryption-Key-Id: 00000000000000000000000000000000", 1), errInvalidKey},
		{"body too short", "-----BEGIN EDGESECRETS PUBLIC KEYS-----\nSuite: " + string(SuiteX25519) + "\nVersion: 1\n\nAAAA\n-----END EDGESECRETS PUBLIC KEYS-----\n", errInvalidKey},
		{"over the size limit", strings.Repeat(" ", maxKeyText+1), errTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePublicKeys([]byte(tc.text))
			requireKind(t, err, tc.want)
		})
	}

	t.Run("surrounding white space and no id headers are fine", func(t *testing.T) {
		text := "\n  " + strings.Replace(strings.Replace(s, "Signing-Key-Id: "+string(k.Public().signingID)+"\n", "", 1), "Encryption-Key-Id: "+string(k.Public().EncryptionKeyID())+"\n", "", 1) + "\n\n"
		p, err := parsePublicKeys([]byte(text))
		require.NoError(t, err)
		assert.True(t, samePublicKeys(p, k.Public()))
	})
}

func TestPrivateKeysFile(t *testing.T) {
	for _, suite := range suites() {
		t.Run(string(suite), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "agent.keys")
			k := mustKeys(t, suite)
			require.NoError(t, k.WriteFile(path))
			assertMode(t, path, 0o600)

			loaded, err := ReadPrivateKeysFile(path)
			require.NoError(t, err)
			assert.True(t, samePublicKeys(loaded.Public(), k.Public()))

			// The loaded keys open what was sealed to the original, and sign
			// what the original's public key verifies.
			env, err := Seal(loaded, k.Public(), []byte("ok"), Header{Type: TypeReply, AgreementID: "a", Sequence: 1}, Options{})
			require.NoError(t, err)
			_, pt, err := Open[[]byte](context.Background(), loaded, k.Public(), env, NewMemoryReplayGuard(), Options{})
			require.NoError(t, err)
			assert.Equal(t, "ok", string(pt))

			// Replacing a file that others could read leaves a 0600 file.
			require.NoError(t, os.Chmod(path, 0o644))
			other := mustKeys(t, suite)
			require.NoError(t, other.WriteFile(path))
			assertMode(t, path, 0o600)
			loaded, err = ReadPrivateKeysFile(path)
			require.NoError(t, err)
			assert.True(t, samePublicKeys(loaded.Public(), other.Public()))

			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Len(t, entries, 1, "no temporary files left behind")

			if runtime.GOOS != "windows" {
				// Not through a symlink, whose target's mode would be copied.
				target := filepath.Join(dir, "target")
				require.NoError(t, os.WriteFile(target, nil, 0o644))
				link := filepath.Join(dir, "link")
				require.NoError(t, os.Symlink(target, link))
				requireKind(t, k.WriteFile(link), errInsecureKeyFile)
				content, err := os.ReadFile(target)
				require.NoError(t, err)
				assert.Empty(t, content)
			}
		})
	}
}

func TestReadPrivateKeysFileRejects(t *testing.T) {
	k := fixedKeys(t, SuiteX25519)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	require.NoError(t, k.WriteFile(good))
	text, err := os.ReadFile(good)
	require.NoError(t, err)
	write := func(name, content string, mode fs.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	pub, err := k.Public().MarshalText()
	require.NoError(t, err)

	t.Run("missing file", func(t *testing.T) {
		_, err := ReadPrivateKeysFile(filepath.Join(dir, "none"))
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	if runtime.GOOS != "windows" {
		t.Run("readable by others", func(t *testing.T) {
			_, err := ReadPrivateKeysFile(write("open", string(text), 0o644))
			requireKind(t, err, errInsecureKeyFile)
			_, err = ReadPrivateKeysFile(write("group", string(text), 0o640))
			requireKind(t, err, errInsecureKeyFile)
		})
	}
	for _, tc := range []struct {
		name, content string
		want          error
	}{
		{"a public key file", string(pub), errInvalidKey},
		{"key id header does not match", strings.Replace(string(text), "Signing-Key-Id: "+string(k.Public().signingID), "Signing-Key-Id: 0123456789abcdef0123456789abcdef", 1), errInvalidKey},
		{"short body", "-----BEGIN EDGESECRETS PRIVATE KEYS-----\nSuite: " + string(SuiteX25519) + "\nVersion: 1\n\nAAAA\n-----END EDGESECRETS PRIVATE KEYS-----\n", errInvalidKey},
		{"too large", strings.Repeat("A", maxKeyText+10), errTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadPrivateKeysFile(write(strings.ReplaceAll(tc.name, " ", "-"), tc.content, 0o600))
			requireKind(t, err, tc.want)
			assertNoLeak(t, err.Error(), keyForms(t, k))
		})
	}
}

func assertMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	if runtime.GOOS == "windows" {
		return
	}
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, want, fi.Mode().Perm())
}

func TestPrivateKeysNeverPrintKeyMaterial(t *testing.T) {
	k := mustKeys(t, SuiteMLKEM768X25519)
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		out = append(out, fmt.Sprintf(verb, k), fmt.Sprintf(verb, *k), fmt.Sprintf(verb, []any{k}), fmt.Sprintf(verb, struct{ K *PrivateKeys }{k}))
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("keys", "keys", k, "copy", *k)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("keys", "keys", k, "copy", *k)
	out = append(out, logs.String())
	_, err := json.Marshal(struct{ K *PrivateKeys }{k})
	require.Error(t, err, "private keys must not be JSON-encodable")
	assertNoLeak(t, err.Error(), keyForms(t, k))

	for _, s := range out {
		assert.Contains(t, s, string(k.Public().signingID), "printing shows which keys these are")
		assertNoLeak(t, s, keyForms(t, k))
	}
}

func TestNewPrivateKeys(t *testing.T) {
	_, signing, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	enc, err := hpke.MLKEM768X25519().GenerateKey()
	require.NoError(t, err)

	// A private key whose embedded public half is wrong is rebuilt from its
	// seed, so signatures still verify.
	broken := bytes.Clone(signing)
	broken[63] ^= 1
	k, err := newPrivateKeys(broken, enc)
	require.NoError(t, err)
	assert.Equal(t, signingKeyID(signing.Public().(ed25519.PublicKey)), k.Public().signingID)
	msg := []byte("certificate request")
	sig, err := k.Signer().Sign(nil, msg, crypto.Hash(0))
	require.NoError(t, err)
	assert.True(t, ed25519.Verify(k.Public().signing, msg, sig))
	assert.Same(t, enc, k.encryption)

	_, err = newPrivateKeys(signing[:32], enc)
	requireKind(t, err, errInvalidKey)
	_, err = newPrivateKeys(signing, nil)
	requireKind(t, err, errInvalidKey)
}
