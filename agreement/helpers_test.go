package agreement

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// canary is the secret value the tests look for in every error and printout.
const canary = "C4NARY-s3cr3t-value"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// allKinds are the error kinds of the package; an error should match one.
var allKinds = []error{
	errTooLarge, errMalformed, errUnsupportedVersion, errUnexpectedType, errInvalidMessage, errInvalidKey,
	errUnknownSuite, errInsecureKeyFile, ErrSuiteNotAllowed, ErrWrongRecipient, ErrWrongSender,
	ErrBadSignature, ErrDecrypt, ErrReplay,
}

// requireKind asserts that err matches want, the exported kind want
// belongs to, and no other cause.
func requireKind(t *testing.T, err error, want error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	if c, ok := want.(*cause); ok { //nolint:errorlint // compares the table's values, not an error chain
		require.ErrorIs(t, err, c.kind)
		other := map[error]error{edgesecrets.ErrInvalid: ErrNotAuthentic, ErrNotAuthentic: edgesecrets.ErrInvalid}[c.kind]
		assert.NotErrorIs(t, err, other)
		assert.NotErrorIs(t, err, ErrReplay)
	}
	for _, k := range allKinds {
		if k != want { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
			assert.NotErrorIs(t, err, k, "error %q also matches %q", err, k)
		}
	}
}

func mustKeys(t testing.TB, suite Suite) *PrivateKeys {
	t.Helper()
	k, err := GenerateKeys(suite)
	require.NoError(t, err)
	return k
}

// secretForms are the printed forms of canary a leak could take.
func secretForms() []string {
	return []string{canary, base64.StdEncoding.EncodeToString([]byte(canary)), base64.RawURLEncoding.EncodeToString([]byte(canary)), hex.EncodeToString([]byte(canary))}
}

// keyForms are the printed forms of a key set's private material.
func keyForms(t testing.TB, k *PrivateKeys) []string {
	t.Helper()
	enc, err := k.encryption.Bytes()
	require.NoError(t, err)
	var forms []string
	for _, b := range [][]byte{k.signing.Seed(), enc} {
		forms = append(forms, string(b), hex.EncodeToString(b), base64.StdEncoding.EncodeToString(b)[:40], base64.RawURLEncoding.EncodeToString(b)[:40], fmt.Sprint(string(b)))
	}
	return forms
}

// assertNoLeak fails if s holds any of the forbidden strings.
func assertNoLeak(t *testing.T, s string, forbidden []string) {
	t.Helper()
	for _, f := range forbidden {
		assert.NotContains(t, s, f)
	}
}

// proposalWithSecrets returns a proposal of one service with n secrets of
// about size bytes each, every value starting with the canary.
func proposalWithSecrets(agreementID string, n, size int) Proposal {
	secrets := make(map[string]SecretDetails, n)
	for i := range n {
		value := []byte(canary + strings.Repeat("x", max(0, size-len(canary))))
		secrets[fmt.Sprintf("secret-%02d", i)] = SecretDetails{Format: FormatJSON, Data: edgesecrets.Data{"password": value}}
	}
	return Proposal{
		Version:     messageVersion,
		AgreementID: agreementID,
		Services: []ServiceSecrets{{
			Service: ServiceRef{Org: "myorg", URL: "https://example.com/svc", Arch: "amd64", Version: "1.0.0"},
			Secrets: secrets,
		}},
	}
}

// parts are the decoded fields of an envelope, for tampering.
type parts struct {
	header, enc, ciphertext, signature []byte
}

func split(t testing.TB, env []byte) parts {
	t.Helper()
	var f map[string]string
	var v map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(env, &v))
	f = map[string]string{}
	for k, raw := range v {
		if k != fieldVersion {
			var s string
			require.NoError(t, json.Unmarshal(raw, &s))
			f[k] = s
		}
	}
	dec := func(s string) []byte {
		b, err := b64.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	return parts{dec(f[fieldHeader]), dec(f[fieldEnc]), dec(f[fieldCiphertext]), dec(f[fieldSignature])}
}

func (p parts) join() []byte { return encodeEnvelope(p.header, p.enc, p.ciphertext, p.signature) }

// signedBy re-signs p with k's signing key, as a sender (or a forger) would.
func (p parts) signedBy(t testing.TB, k *PrivateKeys) parts {
	t.Helper()
	digest := transcriptDigest(p.header, p.enc, p.ciphertext)
	sig, err := k.signing.Sign(nil, digest[:], signatureOptions)
	require.NoError(t, err)
	p.signature = sig
	return p
}

// withHeader returns p with its header JSON changed by edit.
func (p parts) withHeader(t testing.TB, edit func(h map[string]any)) parts {
	t.Helper()
	var h map[string]any
	dec := json.NewDecoder(bytes.NewReader(p.header))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&h))
	edit(h)
	b, err := json.Marshal(h)
	require.NoError(t, err)
	p.header = b
	return p
}

// withOuter re-encodes the outer JSON object after edit.
func withOuter(t testing.TB, env []byte, edit func(m map[string]json.RawMessage)) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(env, &m))
	edit(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i/8] ^= 1 << (i % 8)
	return c
}

// decodeTop decodes and validates the JSON form of a message outside an
// envelope, as Open does inside one (at most defaultMaxMessageSize bytes).
func decodeTop[M any, PM interface {
	*M
	decodable
}](what string, b []byte) (M, error) {
	var m M
	if err := decodeMessage(what, b, defaultMaxMessageSize, PM(&m)); err != nil {
		var zero M
		return zero, fmt.Errorf("agreement: %w", err)
	}
	return m, nil
}

// decodeProposal, decodeUpdate and decodeReply are the message decoders
// the fuzz and table tests drive.
func decodeProposal(b []byte) (Proposal, error) { return decodeTop[Proposal]("proposal", b) }
func decodeUpdate(b []byte) (Update, error)     { return decodeTop[Update]("update", b) }
func decodeReply(b []byte) (Reply, error)       { return decodeTop[Reply]("reply", b) }

// lastAccepted returns the last sequence a NewMemoryReplayGuard guard
// accepted for (agreementID, typ), 0 if none.
func lastAccepted(g ReplayGuard, agreementID string, typ MessageType) uint64 {
	m := g.(*memoryReplayGuard)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[replayKey{agreementID, typ}]
}

// samePublicKeys reports whether p and q hold the same two keys, by the
// keys themselves rather than their ids.
func samePublicKeys(p, q *PublicKeys) bool {
	return p.signing.Equal(q.signing) && p.suite == q.suite && bytes.Equal(p.encryption.Bytes(), q.encryption.Bytes())
}

// suites returns the supported suites, the default first.
func suites() []Suite { return []Suite{SuiteMLKEM768X25519, SuiteX25519} }
