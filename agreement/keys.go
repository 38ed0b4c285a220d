package agreement

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"strconv"

	"github.com/natefinch/atomic"
)

// Suite names an HPKE ciphersuite (RFC 9180): KEM, KDF and AEAD. Only the
// suites declared here are supported; the KEM is fixed by the recipient's
// encryption key, so a key set has exactly one suite.
type Suite string

// Supported suites.
const (
	// SuiteMLKEM768X25519 is the post-quantum hybrid ML-KEM-768 + X25519
	// (X-Wing, draft-ietf-hpke-pq) with HKDF-SHA256 and AES-256-GCM.
	SuiteMLKEM768X25519 Suite = "MLKEM768-X25519/HKDF-SHA256/AES-256-GCM"
	// SuiteX25519 is the classic DHKEM(X25519, HKDF-SHA256) with
	// HKDF-SHA256 and AES-256-GCM.
	SuiteX25519 Suite = "DHKEM-X25519/HKDF-SHA256/AES-256-GCM"
	// DefaultSuite is the suite GenerateKeys uses when asked for none:
	// the post-quantum hybrid.
	DefaultSuite = SuiteMLKEM768X25519
)

// HPKE KEM identifiers of the supported suites.
const (
	kemX25519         uint16 = 0x0020
	kemMLKEM768X25519 uint16 = 0x647a
)

// hpkeSuite is the crypto/hpke instantiation of a Suite.
type hpkeSuite struct {
	kem  hpke.KEM
	kdf  hpke.KDF
	aead hpke.AEAD
}

func (s Suite) hpke() (hpkeSuite, bool) {
	switch s {
	case SuiteMLKEM768X25519:
		return hpkeSuite{hpke.MLKEM768X25519(), hpke.HKDFSHA256(), hpke.AES256GCM()}, true
	case SuiteX25519:
		return hpkeSuite{hpke.DHKEM(ecdh.X25519()), hpke.HKDFSHA256(), hpke.AES256GCM()}, true
	}
	return hpkeSuite{}, false
}

// validate returns an error wrapping errUnknownSuite if s is not a
// supported suite.
func (s Suite) validate() error {
	if _, ok := s.hpke(); !ok {
		return fmt.Errorf("agreement: %w: unknown suite %.64q", errUnknownSuite, string(s))
	}
	return nil
}

// kemID returns the HPKE KEM identifier of s, or 0 if s is not supported.
func (s Suite) kemID() uint16 {
	if h, ok := s.hpke(); ok {
		return h.kem.ID()
	}
	return 0
}

// suiteForKEM returns the supported suite whose KEM is kemID: the form an
// encryption key travels in (a KEM id and the key bytes, as in a CSR) names
// its suite this way.
func suiteForKEM(kemID uint16) (Suite, error) {
	switch kemID {
	case kemMLKEM768X25519:
		return SuiteMLKEM768X25519, nil
	case kemX25519:
		return SuiteX25519, nil
	}
	return "", fmt.Errorf("agreement: %w: unsupported HPKE KEM 0x%04x", errUnknownSuite, kemID)
}

// KeyID identifies a public key: 32 lowercase hex digits, the first 128
// bits of a SHA-256 over the key's algorithm and bytes. Envelopes name their
// sender and recipient keys by KeyID; it is a name, not a proof: Open
// verifies the keys themselves.
type KeyID string

// signingKeyID returns the KeyID of an Ed25519 public key.
func signingKeyID(pub ed25519.PublicKey) KeyID { return keyID("ed25519", pub) }

// encryptionKeyID returns the KeyID of an HPKE public key. The KEM id is
// part of the hash, so the same bytes under two KEMs have two ids.
func encryptionKeyID(pub hpke.PublicKey) KeyID {
	return keyID("hpke-kem-"+strconv.FormatUint(uint64(pub.KEM().ID()), 16), pub.Bytes())
}

func keyID(alg string, key []byte) KeyID {
	h := sha256.New()
	h.Write([]byte("edgesecrets key id v1\x00" + alg + "\x00")) // a hash.Hash never fails to write
	h.Write(key)
	var sum [sha256.Size]byte
	return KeyID(hex.EncodeToString(h.Sum(sum[:0])[:16]))
}

// valid reports whether id has the form KeyID's functions produce.
func (id KeyID) valid() bool {
	if len(id) != 32 {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// PublicKeys are the public halves of a key set: an Ed25519 key that
// verifies the holder's envelopes and an HPKE key that others seal to. Its
// text form (MarshalText, UnmarshalText) is a PEM block:
//
//	-----BEGIN EDGESECRETS PUBLIC KEYS-----
//	Encryption-Key-Id: <KeyID>
//	Signing-Key-Id: <KeyID>
//	Suite: MLKEM768-X25519/HKDF-SHA256/AES-256-GCM
//	Version: 1
//
//	<base64 of the 32-byte Ed25519 key followed by the HPKE key bytes>
//	-----END EDGESECRETS PUBLIC KEYS-----
//
// A PublicKeys is immutable and safe for concurrent use.
type PublicKeys struct {
	signing      ed25519.PublicKey
	encryption   hpke.PublicKey
	suite        Suite
	signingID    KeyID
	encryptionID KeyID
}

// NewPublicKeys returns the key set of an Ed25519 signing key and an HPKE
// encryption key of a supported suite, for example as carried in an identity
// certificate.
func NewPublicKeys(signing ed25519.PublicKey, encryption hpke.PublicKey) (*PublicKeys, error) {
	if len(signing) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("agreement: %w: signing key is %d bytes, want %d", errInvalidKey, len(signing), ed25519.PublicKeySize)
	}
	if encryption == nil {
		return nil, fmt.Errorf("agreement: %w: encryption key is nil", errInvalidKey)
	}
	suite, err := suiteForKEM(encryption.KEM().ID())
	if err != nil {
		return nil, err
	}
	signing = bytes.Clone(signing)
	return &PublicKeys{
		signing:      signing,
		encryption:   encryption,
		suite:        suite,
		signingID:    signingKeyID(signing),
		encryptionID: encryptionKeyID(encryption),
	}, nil
}

// parseEncryptionKey decodes an HPKE public key from its KEM id and bytes
// (RFC 9180 SerializePublicKey), the form a CSR or certificate carries.
func parseEncryptionKey(kemID uint16, key []byte) (hpke.PublicKey, error) {
	suite, err := suiteForKEM(kemID)
	if err != nil {
		return nil, err
	}
	h, _ := suite.hpke()
	pub, err := h.kem.NewPublicKey(key)
	if err != nil {
		return nil, fmt.Errorf("agreement: %w: %d bytes are not a %s public key", errInvalidKey, len(key), suite)
	}
	return pub, nil
}

// EncryptionKey returns the HPKE public key. Its KEM().ID() and Bytes() are
// the form to carry in a CSR.
func (p *PublicKeys) EncryptionKey() hpke.PublicKey { return p.encryption }

// Suite returns the suite of the encryption key.
func (p *PublicKeys) Suite() Suite { return p.suite }

// SigningKeyID returns the id of the signing key: the SenderKeyID of the
// envelopes these keys' owner seals.
func (p *PublicKeys) SigningKeyID() KeyID { return p.signingID }

// EncryptionKeyID returns the KeyID of the encryption key.
func (p *PublicKeys) EncryptionKeyID() KeyID { return p.encryptionID }

// String returns the suite and the two key ids. The key ids identify the
// keys: two PublicKeys with the same String hold the same keys.
func (p *PublicKeys) String() string {
	return fmt.Sprintf("PublicKeys{Suite:%s SigningKeyID:%s EncryptionKeyID:%s}", p.suite, p.signingID, p.encryptionID)
}

// PEM block types and headers of the text forms.
const (
	pemPublicType      = "EDGESECRETS PUBLIC KEYS"
	pemPrivateType     = "EDGESECRETS PRIVATE KEYS"
	pemVersion         = "Version"
	pemSuite           = "Suite"
	pemSigningKeyID    = "Signing-Key-Id"
	pemEncryptionKeyID = "Encryption-Key-Id"
	keyTextVersion     = "1"
	// maxKeyText bounds the text forms (an ML-KEM-768 + X25519 public key
	// set is about 1.8 KB of PEM).
	maxKeyText = 16 << 10
)

// MarshalText returns the PEM text form (see the type comment).
func (p *PublicKeys) MarshalText() ([]byte, error) {
	return pem.EncodeToMemory(&pem.Block{
		Type:    pemPublicType,
		Headers: p.pemHeaders(),
		Bytes:   append(bytes.Clone(p.signing), p.encryption.Bytes()...),
	}), nil
}

func (p *PublicKeys) pemHeaders() map[string]string {
	return map[string]string{
		pemVersion:         keyTextVersion,
		pemSuite:           string(p.suite),
		pemSigningKeyID:    string(p.signingID),
		pemEncryptionKeyID: string(p.encryptionID),
	}
}

// UnmarshalText parses the text form MarshalText writes. Surrounding white
// space is allowed, anything else is not; the key id headers, when present,
// must match the keys.
func (p *PublicKeys) UnmarshalText(text []byte) error {
	q, err := parsePublicKeys(text)
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

// parsePublicKeys is UnmarshalText.
func parsePublicKeys(text []byte) (*PublicKeys, error) {
	block, suite, err := decodeKeyPEM(text, pemPublicType)
	if err != nil {
		return nil, err
	}
	if len(block.Bytes) < ed25519.PublicKeySize {
		return nil, fmt.Errorf("agreement: public keys: %w: body is %d bytes", errInvalidKey, len(block.Bytes))
	}
	enc, err := parseEncryptionKey(suite.kemID(), block.Bytes[ed25519.PublicKeySize:])
	if err != nil {
		return nil, err
	}
	p, err := NewPublicKeys(ed25519.PublicKey(block.Bytes[:ed25519.PublicKeySize]), enc)
	if err != nil {
		return nil, err
	}
	if err := checkKeyIDHeaders(block.Headers, p); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeKeyPEM decodes text holding exactly one PEM block of type typ and
// checks its headers: version, suite, nothing unknown.
func decodeKeyPEM(text []byte, typ string) (*pem.Block, Suite, error) {
	if len(text) > maxKeyText {
		return nil, "", fmt.Errorf("agreement: key text: %w: %d bytes, limit %d", errTooLarge, len(text), maxKeyText)
	}
	text = bytes.TrimSpace(text)
	if bytes.Count(text, []byte("-----BEGIN")) != 1 || !bytes.HasPrefix(text, []byte("-----BEGIN "+typ+"-----")) {
		return nil, "", fmt.Errorf("agreement: key text: %w: want exactly one PEM block of type %q", errInvalidKey, typ)
	}
	block, rest := pem.Decode(text)
	if block == nil || len(rest) != 0 {
		return nil, "", fmt.Errorf("agreement: key text: %w: broken PEM block", errInvalidKey)
	}
	for k := range block.Headers {
		switch k {
		case pemVersion, pemSuite, pemSigningKeyID, pemEncryptionKeyID:
		default:
			// Not quoted: a header line of a damaged file may hold key text.
			return nil, "", fmt.Errorf("agreement: key text: %w: a header other than %s, %s, %s and %s", errInvalidKey, pemVersion, pemSuite, pemSigningKeyID, pemEncryptionKeyID)
		}
	}
	if v := block.Headers[pemVersion]; v != keyTextVersion {
		return nil, "", fmt.Errorf("agreement: key text: %w: version %.16q, want %s", errUnsupportedVersion, v, keyTextVersion)
	}
	suite := Suite(block.Headers[pemSuite])
	if err := suite.validate(); err != nil {
		return nil, "", err
	}
	return block, suite, nil
}

// checkKeyIDHeaders compares the optional key id headers with the parsed
// keys: a mismatch means a damaged or hand-edited file.
func checkKeyIDHeaders(headers map[string]string, p *PublicKeys) error {
	for _, h := range []struct {
		name string
		want KeyID
	}{{pemSigningKeyID, p.signingID}, {pemEncryptionKeyID, p.encryptionID}} {
		if got, ok := headers[h.name]; ok && KeyID(got) != h.want {
			return fmt.Errorf("agreement: key text: %w: %s header does not match the key", errInvalidKey, h.name)
		}
	}
	return nil
}

// PrivateKeys is a key set: an Ed25519 signing key and an HPKE encryption
// key (decapsulation key) of one suite. An agent and an agbot each hold one.
//
// Private keys leave memory only through WriteFile. Printing a PrivateKeys
// (fmt, slog) shows its public key ids; encoding it with encoding/json fails.
// A PrivateKeys is immutable and safe for concurrent use.
type PrivateKeys struct {
	signing    ed25519.PrivateKey
	encryption hpke.PrivateKey
	public     *PublicKeys
}

// GenerateKeys returns a new key set for suite; "" means DefaultSuite.
func GenerateKeys(suite Suite) (*PrivateKeys, error) {
	if suite == "" {
		suite = DefaultSuite
	}
	h, ok := suite.hpke()
	if !ok {
		return nil, suite.validate()
	}
	_, signing, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("agreement: generating signing key: %w", err)
	}
	enc, err := h.kem.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("agreement: generating %s key: %w", suite, err)
	}
	return newPrivateKeys(signing, enc)
}

// newPrivateKeys returns the key set of an existing Ed25519 private key and
// HPKE private key of a supported suite.
func newPrivateKeys(signing ed25519.PrivateKey, encryption hpke.PrivateKey) (*PrivateKeys, error) {
	if len(signing) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("agreement: %w: signing private key is %d bytes, want %d", errInvalidKey, len(signing), ed25519.PrivateKeySize)
	}
	// An ed25519.PrivateKey is seed||public; a mismatched public half would
	// make every signature fail to verify.
	signing = ed25519.NewKeyFromSeed(signing.Seed())
	if encryption == nil {
		return nil, fmt.Errorf("agreement: %w: encryption private key is nil", errInvalidKey)
	}
	pub, err := NewPublicKeys(signing.Public().(ed25519.PublicKey), encryption.PublicKey())
	if err != nil {
		return nil, err
	}
	return &PrivateKeys{signing: signing, encryption: encryption, public: pub}, nil
}

// Public returns the public halves.
func (k *PrivateKeys) Public() *PublicKeys { return k.public }

// Signer returns the Ed25519 signing key as a crypto.Signer, for example to
// sign a certificate request. Its dynamic value is the private key: do not
// print it.
func (k *PrivateKeys) Signer() crypto.Signer { return k.signing }

// Format prints the public key ids only, for every verb. The value receiver
// covers a dereferenced copy too.
func (k PrivateKeys) Format(f fmt.State, verb rune) {
	// fmt.State buffers in memory; Format has no error to return.
	if k.public == nil {
		_, _ = io.WriteString(f, "PrivateKeys{}")
		return
	}
	_, _ = fmt.Fprintf(f, "PrivateKeys{Suite:%s SigningKeyID:%s EncryptionKeyID:%s Private:%s}",
		k.public.suite, k.public.signingID, k.public.encryptionID, redacted)
}

// String prints the public key ids only.
func (k PrivateKeys) String() string { return fmt.Sprint(k) }

// LogValue implements slog.LogValuer: the suite and public key ids.
func (k PrivateKeys) LogValue() slog.Value {
	if k.public == nil {
		return slog.GroupValue()
	}
	return slog.GroupValue(
		slog.String("suite", string(k.public.suite)),
		slog.String("signing_key_id", string(k.public.signingID)),
		slog.String("encryption_key_id", string(k.public.encryptionID)),
	)
}

// MarshalJSON always fails: private keys are written with WriteFile only.
func (k PrivateKeys) MarshalJSON() ([]byte, error) {
	return nil, errors.New("agreement: private keys are not JSON-encodable; use WriteFile")
}

// privateKeyFileMode is the only mode a private key file is written with.
const privateKeyFileMode fs.FileMode = 0o600

// WriteFile writes the key set to path atomically (the file is either the
// old or the new content, never partial), with mode 0600 whatever umask or
// an existing file's mode. The content is a PEM block of type
// "EDGESECRETS PRIVATE KEYS" with the same headers as the public text form
// and the Ed25519 seed followed by the HPKE private key bytes.
func (k *PrivateKeys) WriteFile(path string) error {
	// atomic.WriteFile gives the new file the mode of the file it replaces;
	// tighten that first so the key is never readable by others, even
	// briefly.
	// A symlink or device in the way is refused: atomic.WriteFile would
	// copy its target's mode.
	if fi, err := os.Lstat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("agreement: writing private keys to %s: %w: it exists and is not a regular file", path, errInsecureKeyFile)
		}
		if fi.Mode().Perm() != privateKeyFileMode {
			if err := os.Chmod(path, privateKeyFileMode); err != nil {
				return fmt.Errorf("agreement: writing private keys to %s: %w", path, err)
			}
		}
	}
	encBytes, err := k.encryption.Bytes()
	if err != nil {
		return fmt.Errorf("agreement: writing private keys to %s: serialising encryption key failed", path)
	}
	text := pem.EncodeToMemory(&pem.Block{
		Type:    pemPrivateType,
		Headers: k.public.pemHeaders(),
		Bytes:   append(bytes.Clone(k.signing.Seed()), encBytes...),
	})
	defer clear(text)
	if err := atomic.WriteFile(path, bytes.NewReader(text)); err != nil {
		return fmt.Errorf("agreement: writing private keys to %s: %w", path, err)
	}
	if err := os.Chmod(path, privateKeyFileMode); err != nil {
		return fmt.Errorf("agreement: writing private keys to %s: %w", path, err)
	}
	return nil
}

// ReadPrivateKeysFile reads a key set written by WriteFile. On Unix it
// refuses (edgesecrets.ErrInvalid) a file that group or others may access.
func ReadPrivateKeysFile(path string) (*PrivateKeys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("agreement: reading private keys: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("agreement: reading private keys: %w", err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("agreement: reading private keys from %s: %w: mode %04o, want 0600", path, errInsecureKeyFile, fi.Mode().Perm())
	}
	text, err := io.ReadAll(io.LimitReader(f, maxKeyText+1))
	if err != nil {
		return nil, fmt.Errorf("agreement: reading private keys from %s: %w", path, err)
	}
	defer clear(text)
	k, err := parsePrivateKeys(text)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return k, nil
}

// parsePrivateKeys parses the file content WriteFile writes. Its errors
// never quote the content.
func parsePrivateKeys(text []byte) (*PrivateKeys, error) {
	block, suite, err := decodeKeyPEM(text, pemPrivateType)
	if err != nil {
		return nil, err
	}
	defer clear(block.Bytes)
	if len(block.Bytes) < ed25519.SeedSize {
		return nil, fmt.Errorf("agreement: private keys: %w: body is %d bytes", errInvalidKey, len(block.Bytes))
	}
	h, _ := suite.hpke()
	enc, err := h.kem.NewPrivateKey(block.Bytes[ed25519.SeedSize:])
	if err != nil {
		return nil, fmt.Errorf("agreement: private keys: %w: not a %s encryption key", errInvalidKey, suite)
	}
	k, err := newPrivateKeys(ed25519.NewKeyFromSeed(block.Bytes[:ed25519.SeedSize]), enc)
	if err != nil {
		return nil, err
	}
	if err := checkKeyIDHeaders(block.Headers, k.public); err != nil {
		return nil, err
	}
	return k, nil
}

// redacted is what printing shows in place of private material.
const redacted = "[redacted]"
