package agreement

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzOpen feeds arbitrary bytes to Open for a recipient of each suite. Open
// must never panic, never quote the plaintext in an error, and accept only
// the envelopes the sender really sealed.
func FuzzOpen(f *testing.F) {
	agbot := derivedKeys(f, SuiteX25519, 1)
	agents := []*PrivateKeys{derivedKeys(f, SuiteX25519, 2), derivedKeys(f, SuiteMLKEM768X25519, 3)}
	plaintext := []byte(`{"value":"` + canary + `"}`)
	for _, agent := range agents {
		env, err := Seal(agbot, agent.Public(), plaintext, Header{Type: TypeProposal, AgreementID: "agr-1", Sequence: 1, Time: t0}, Options{})
		require.NoError(f, err)
		f.Add(env)
		f.Add(env[:len(env)/2])
		f.Add(split(f, env).withHeader(f, func(h map[string]any) { h["sequence"] = 2 }).join())
	}
	for _, s := range []string{"", "{}", "null", `{"version":1}`, `{"version":1,"header":"","enc":"","ciphertext":"","signature":""}`, `{"version":1e99}`} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, env []byte) {
		for _, agent := range agents {
			h, pt, err := Open[[]byte](context.Background(), agent, agbot.Public(), env, NewMemoryReplayGuard(), Options{})
			if err != nil {
				assert.Nil(t, pt)
				assert.NotContains(t, err.Error(), canary)
				continue
			}
			// Fuzz workers redo the setup (HPKE sealing is randomised), so
			// compare content: the agbot signed only this header and plaintext.
			assert.Equal(t, plaintext, pt, "accepted an envelope the agbot did not seal")
			assert.Equal(t, Header{Version: 1, Suite: agent.Public().Suite(), SenderKeyID: agbot.Public().signingID,
				RecipientKeyID: agent.Public().EncryptionKeyID(), Type: TypeProposal, AgreementID: "agr-1", Sequence: 1, Time: t0}, h)
		}
	})
}

// checkMessageRoundTrip asserts that a decoded message validates and
// survives encoding and decoding again unchanged.
func checkMessageRoundTrip[M message](t *testing.T, m M, decode func([]byte) (M, error)) {
	t.Helper()
	require.NoError(t, m.validate())
	b, err := json.Marshal(m)
	require.NoError(t, err)
	again, err := decode(b)
	require.NoError(t, err, "re-encoded message does not decode")
	b2, err := json.Marshal(again)
	require.NoError(t, err)
	assert.JSONEq(t, string(b), string(b2))
}

func addMessageSeeds(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(""))
	f.Add([]byte("{}"))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"agreementId":"a"}`))
}

func FuzzDecodeProposal(f *testing.F) {
	p, err := json.Marshal(proposalWithSecrets("agr-1", 2, 10))
	require.NoError(f, err)
	addMessageSeeds(f, validProposal, string(p), strings.Replace(validProposal, `"json"`, `"raw"`, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeProposal(b)
		if err != nil {
			assert.Equal(t, Proposal{}, p)
			return
		}
		checkMessageRoundTrip(t, p, decodeProposal)
	})
}

func FuzzDecodeUpdate(f *testing.F) {
	addMessageSeeds(f, validUpdate, `{"version":1,"agreementId":"a","kind":"labels","payload":{"a":1}}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := decodeUpdate(b)
		if err != nil {
			assert.Equal(t, Update{}.Kind, u.Kind)
			return
		}
		checkMessageRoundTrip(t, u, decodeUpdate)
		if u.Kind == UpdateKindSecrets {
			_, err := u.Secrets()
			assert.NoError(t, err)
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	addMessageSeeds(f,
		`{"version":1,"agreementId":"a","accepted":true}`,
		`{"version":1,"agreementId":"a","inReplyTo":{"type":"update","sequence":3},"accepted":false,"reason":"no"}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeReply(b)
		if err != nil {
			assert.Equal(t, Reply{}, r)
			return
		}
		checkMessageRoundTrip(t, r, decodeReply)
	})
}

func FuzzParsePublicKeys(f *testing.F) {
	for _, suite := range suites() {
		text, err := fixedKeys(f, suite).Public().MarshalText()
		require.NoError(f, err)
		f.Add(text)
		f.Add(bytes.ReplaceAll(text, []byte("Version: 1"), []byte("Version: 2")))
	}
	f.Add([]byte("-----BEGIN EDGESECRETS PUBLIC KEYS-----\n-----END EDGESECRETS PUBLIC KEYS-----\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		p, err := parsePublicKeys(text)
		if err != nil {
			return
		}
		again, err := p.MarshalText()
		require.NoError(t, err)
		q, err := parsePublicKeys(again)
		require.NoError(t, err)
		assert.True(t, samePublicKeys(p, q))
	})
}

// FuzzParsePrivateKeys checks that the key file parser never panics and
// never quotes the file in its errors.
func FuzzParsePrivateKeys(f *testing.F) {
	for _, suite := range suites() {
		text, err := os.ReadFile(filepath.Join("testdata", "private-"+goldenName(suite)+".pem"))
		require.NoError(f, err)
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		k, err := parsePrivateKeys(text)
		if err != nil {
			// The body of a PEM block is base64 of the key: no error may
			// carry a line of it.
			for _, line := range strings.Split(string(text), "\n") {
				if len(line) >= 16 && !strings.Contains(line, ":") && !strings.HasPrefix(line, "-----") {
					assert.NotContains(t, err.Error(), line)
				}
			}
			return
		}
		pub, err := k.Public().MarshalText()
		require.NoError(t, err)
		p, err := parsePublicKeys(pub)
		require.NoError(t, err)
		assert.True(t, samePublicKeys(p, k.Public()))
	})
}
