package agreement

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSealOpenRoundTrip(t *testing.T) {
	for _, suite := range suites() {
		t.Run(string(suite), func(t *testing.T) {
			agbot, agent := mustKeys(t, suite), mustKeys(t, suite)
			guard := NewMemoryReplayGuard()
			plaintext := []byte(`{"value":"` + canary + `"}`)

			env, err := Seal(agbot, agent.Public(), plaintext, Header{Type: TypeUpdate, AgreementID: "agr-1", Sequence: 7, Time: t0}, Options{})
			require.NoError(t, err)
			assert.NotContains(t, string(env), canary, "the plaintext travels encrypted")

			h, got, err := Open[[]byte](context.Background(), agent, agbot.Public(), env, guard, Options{})
			require.NoError(t, err)
			assert.Equal(t, plaintext, got)
			assert.Equal(t, Header{
				Version:        envelopeVersion,
				Suite:          suite,
				SenderKeyID:    agbot.Public().signingID,
				RecipientKeyID: agent.Public().EncryptionKeyID(),
				Type:           TypeUpdate,
				AgreementID:    "agr-1",
				Sequence:       7,
				Time:           t0,
			}, h)
			assert.Equal(t, uint64(7), lastAccepted(guard, "agr-1", TypeUpdate))

			peeked, err := PeekHeader(env, Options{})
			require.NoError(t, err)
			assert.Equal(t, h, peeked)
		})
	}
}

func TestSealAcrossSuites(t *testing.T) {
	// The sender's own suite does not matter: the recipient's key decides.
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteMLKEM768X25519)
	env, err := Seal(agbot, agent.Public(), []byte("{}"), Header{Type: TypeProposal, AgreementID: "a", Sequence: 1}, Options{})
	require.NoError(t, err)
	h, _, err := Open[[]byte](context.Background(), agent, agbot.Public(), env, NewMemoryReplayGuard(), Options{})
	require.NoError(t, err)
	assert.Equal(t, SuiteMLKEM768X25519, h.Suite)
	assert.False(t, h.Time.IsZero(), "a zero Time is sealed as now")
}

func TestSealRejects(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteX25519)
	ok := Header{Type: TypeProposal, AgreementID: "a", Sequence: 1, Time: t0}
	for _, tc := range []struct {
		name      string
		header    func(h Header) Header
		plaintext []byte
		opts      Options
		want      error
	}{
		{name: "over the size limit", plaintext: make([]byte, 101), opts: Options{MaxSize: 100}, want: errTooLarge},
		{name: "suite not allowed for sealing", opts: Options{AllowedSuites: []Suite{SuiteMLKEM768X25519}}, want: errUnknownSuite},
		{name: "sequence 0", header: func(h Header) Header { h.Sequence = 0; return h }, want: errInvalidMessage},
		{name: "no agreement id", header: func(h Header) Header { h.AgreementID = ""; return h }, want: errInvalidMessage},
		{name: "bad type", header: func(h Header) Header { h.Type = "Bad Type"; return h }, want: errInvalidMessage},
		{name: "version other than the keys say", header: func(h Header) Header { h.Version = 2; return h }, want: errInvalidMessage},
		{name: "suite other than the recipient's", header: func(h Header) Header { h.Suite = SuiteMLKEM768X25519; return h }, want: errInvalidMessage},
		{name: "recipient key id of another key", header: func(h Header) Header { h.RecipientKeyID = agbot.Public().EncryptionKeyID(); return h }, want: errInvalidMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := ok
			if tc.header != nil {
				h = tc.header(h)
			}
			_, err := Seal(agbot, agent.Public(), tc.plaintext, h, tc.opts)
			requireKind(t, err, tc.want)
		})
	}
	t.Run("fields matching the keys are fine", func(t *testing.T) {
		h := ok
		h.Version, h.Suite, h.SenderKeyID, h.RecipientKeyID = envelopeVersion, SuiteX25519, agbot.Public().signingID, agent.Public().EncryptionKeyID()
		_, err := Seal(agbot, agent.Public(), []byte(nil), h, Options{})
		require.NoError(t, err)
	})
}

// openCall is one Open attempt of the rejection table.
type openCall struct {
	recipient *PrivateKeys
	sender    *PublicKeys
	env       []byte
	opts      Options
	// open defaults to OpenProposal.
	open func(ctx context.Context, recipient *PrivateKeys, sender *PublicKeys, env []byte, guard ReplayGuard, opts Options) error
}

// rejectFixture is the world of one rejection case: the agbot seals a
// proposal (sequence 1, agreement "agr-A") to the agent; other is a third
// party of the same suite, otherSuite a key set of the other suite.
type rejectFixture struct {
	suite            Suite
	agbot, agent     *PrivateKeys
	other, otherKind *PrivateKeys
	guard            ReplayGuard
	env              []byte
}

func (f *rejectFixture) seal(t *testing.T, to *PrivateKeys, h Header, plaintext []byte) []byte {
	t.Helper()
	env, err := Seal(f.agbot, to.Public(), plaintext, h, Options{})
	require.NoError(t, err)
	return env
}

func (f *rejectFixture) accept(t *testing.T, env []byte) {
	t.Helper()
	_, _, err := Open[[]byte](context.Background(), f.agent, f.agbot.Public(), env, f.guard, Options{})
	require.NoError(t, err)
}

func TestOpenRejects(t *testing.T) {
	proposal := proposalWithSecrets("agr-A", 2, 40)
	proposalJSON, err := json.Marshal(proposal)
	require.NoError(t, err)
	hdr := func(typ MessageType, agreement string, seq uint64) Header {
		return Header{Type: typ, AgreementID: agreement, Sequence: seq, Time: t0}
	}

	cases := []struct {
		name string
		want error
		call func(t *testing.T, f *rejectFixture) openCall
	}{
		{"envelope over the limit, before parsing", errTooLarge, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: []byte(strings.Repeat(" ", envelopeLimit(defaultMaxMessageSize)+1))}
		}},
		{"sealed message over the receiver's limit", errTooLarge, func(t *testing.T, f *rejectFixture) openCall {
			big := proposalWithSecrets("agr-A", 10, 10_000)
			env, err := Seal(f.agbot, f.agent.Public(), big, Header{Sequence: 2, Time: t0}, Options{})
			require.NoError(t, err)
			return openCall{env: env, opts: Options{MaxSize: 50_000}}
		}},
		{"encapsulated key over its limit", errTooLarge, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env)
			p.enc = make([]byte, maxEncLength+1)
			return openCall{env: p.join()}
		}},
		{"not JSON", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: []byte("this is not an envelope")}
		}},
		{"unknown field", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: withOuter(t, f.env, func(m map[string]json.RawMessage) { m["extra"] = json.RawMessage(`"x"`) })}
		}},
		{"field name in another case", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: withOuter(t, f.env, func(m map[string]json.RawMessage) { m["Header"] = m[fieldHeader]; delete(m, fieldHeader) })}
		}},
		{"field given twice (one wire form per envelope)", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			// The signed value last, so a decoder keeping the last member would accept it.
			env := bytes.Replace(f.env, []byte(`{`), []byte(`{"`+fieldEnc+`":"AAAA",`), 1)
			return openCall{env: env}
		}},
		{"data after the envelope", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: append(slices.Clone(f.env), []byte(` {}`)...)}
		}},
		{"JSON array instead of an object", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: []byte(`[1,2]`)}
		}},
		{"missing signature", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: withOuter(t, f.env, func(m map[string]json.RawMessage) { delete(m, fieldSignature) })}
		}},
		{"padded base64", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			sig := split(t, f.env).signature
			return openCall{env: withOuter(t, f.env, func(m map[string]json.RawMessage) {
				m[fieldSignature] = json.RawMessage(`"` + base64.URLEncoding.EncodeToString(sig) + `"`)
			})}
		}},
		{"base64 with an escaped character", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: withOuter(t, f.env, func(m map[string]json.RawMessage) {
				s := string(m[fieldSignature])
				m[fieldSignature] = json.RawMessage(`"\u00` + hexByte(s[1]) + s[2:])
			})}
		}},
		{"envelope version 2", errUnsupportedVersion, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: withOuter(t, f.env, func(m map[string]json.RawMessage) { m[fieldVersion] = json.RawMessage(`2`) })}
		}},
		{"header version 2, signed by the agbot", errUnsupportedVersion, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env).withHeader(t, func(h map[string]any) { h["version"] = 2 }).signedBy(t, f.agbot)
			return openCall{env: p.join()}
		}},
		{"suite outside the recipient's allow-list", ErrSuiteNotAllowed, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: f.env, opts: Options{AllowedSuites: []Suite{f.otherKind.Public().Suite()}}}
		}},
		{"unknown suite in the header", ErrSuiteNotAllowed, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env).withHeader(t, func(h map[string]any) { h["suite"] = "DHKEM-X25519/HKDF-SHA256/AES-128-GCM" }).signedBy(t, f.agbot)
			return openCall{env: p.join(), opts: Options{AllowedSuites: suites()}}
		}},
		{"header suite is not the recipient key's (downgrade)", ErrSuiteNotAllowed, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env).withHeader(t, func(h map[string]any) { h["suite"] = string(f.otherKind.Public().Suite()) }).signedBy(t, f.agbot)
			return openCall{env: p.join(), opts: Options{AllowedSuites: suites()}}
		}},
		{"sealed to another agent", ErrWrongRecipient, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: f.seal(t, f.other, hdr(TypeProposal, "agr-A", 2), proposalJSON)}
		}},
		{"opened with another agent's keys", ErrWrongRecipient, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{recipient: f.other, env: f.env}
		}},
		{"expected sender is another key", ErrWrongSender, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{sender: f.other.Public(), env: f.env}
		}},
		{"flipped ciphertext bit", ErrBadSignature, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env)
			p.ciphertext = flip(p.ciphertext, 100)
			return openCall{env: p.join()}
		}},
		{"flipped encapsulated key bit", ErrBadSignature, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env)
			p.enc = flip(p.enc, 3)
			return openCall{env: p.join()}
		}},
		{"header agreement id changed", ErrBadSignature, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: split(t, f.env).withHeader(t, func(h map[string]any) { h["agreementId"] = "agr-B" }).join()}
		}},
		{"forged by a third key claiming the agbot's id", ErrBadSignature, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: split(t, f.env).signedBy(t, f.other).join()}
		}},
		{"signature of another envelope", ErrBadSignature, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env)
			p.signature = split(t, f.seal(t, f.agent, hdr(TypeProposal, "agr-A", 1), proposalJSON)).signature
			return openCall{env: p.join()}
		}},
		{"garbage ciphertext signed by the agbot", ErrDecrypt, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env)
			p.ciphertext = make([]byte, len(p.ciphertext))
			return openCall{env: p.signedBy(t, f.agbot).join()}
		}},
		{"header changed after encryption, signed by the agbot (AAD)", ErrDecrypt, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env).withHeader(t, func(h map[string]any) { h["sequence"] = 99 }).signedBy(t, f.agbot)
			return openCall{env: p.join()}
		}},
		{"encapsulated key of another envelope, signed by the agbot", ErrDecrypt, func(t *testing.T, f *rejectFixture) openCall {
			p := split(t, f.env)
			p.enc = split(t, f.seal(t, f.agent, hdr(TypeProposal, "agr-A", 1), proposalJSON)).enc
			return openCall{env: p.signedBy(t, f.agbot).join()}
		}},
		{"same envelope twice", ErrReplay, func(t *testing.T, f *rejectFixture) openCall {
			f.accept(t, f.env)
			return openCall{env: f.env}
		}},
		{"older sequence after a newer one", ErrReplay, func(t *testing.T, f *rejectFixture) openCall {
			f.accept(t, f.seal(t, f.agent, hdr(TypeProposal, "agr-A", 5), proposalJSON))
			return openCall{env: f.env}
		}},
		{"update opened as a proposal", errUnexpectedType, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: f.seal(t, f.agent, hdr(TypeUpdate, "agr-A", 1), proposalJSON)}
		}},
		{"proposal opened as an update", errUnexpectedType, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: f.env, open: func(ctx context.Context, r *PrivateKeys, s *PublicKeys, env []byte, g ReplayGuard, o Options) error {
				_, _, err := Open[Update](ctx, r, s, env, g, o)
				return err
			}}
		}},
		{"sequence 0, signed by the agbot", errInvalidMessage, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: split(t, f.env).withHeader(t, func(h map[string]any) { h["sequence"] = 0 }).signedBy(t, f.agbot).join()}
		}},
		{"proposal for another agreement than its envelope", errInvalidMessage, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: f.seal(t, f.agent, hdr(TypeProposal, "agr-B", 1), proposalJSON)}
		}},
		{"proposal with an unsafe secret name", errInvalidMessage, func(t *testing.T, f *rejectFixture) openCall {
			bad := strings.Replace(string(proposalJSON), `"secret-00"`, `"../etc"`, 1)
			return openCall{env: f.seal(t, f.agent, hdr(TypeProposal, "agr-A", 1), []byte(bad))}
		}},
		{"plaintext is not a proposal", errMalformed, func(t *testing.T, f *rejectFixture) openCall {
			return openCall{env: f.seal(t, f.agent, hdr(TypeProposal, "agr-A", 1), []byte(canary))}
		}},
		{"proposal of another message version", errUnsupportedVersion, func(t *testing.T, f *rejectFixture) openCall {
			v2 := strings.Replace(string(proposalJSON), `"version":1`, `"version":2`, 1)
			return openCall{env: f.seal(t, f.agent, hdr(TypeProposal, "agr-A", 1), []byte(v2))}
		}},
	}

	for _, suite := range suites() {
		otherSuite := SuiteX25519
		if suite == SuiteX25519 {
			otherSuite = SuiteMLKEM768X25519
		}
		for _, tc := range cases {
			t.Run(string(suite)+"/"+tc.name, func(t *testing.T) {
				f := &rejectFixture{
					suite: suite, agbot: mustKeys(t, suite), agent: mustKeys(t, suite),
					other: mustKeys(t, suite), otherKind: mustKeys(t, otherSuite), guard: NewMemoryReplayGuard(),
				}
				f.env = f.seal(t, f.agent, hdr(TypeProposal, "agr-A", 1), proposalJSON)
				c := tc.call(t, f)
				if c.recipient == nil {
					c.recipient = f.agent
				}
				if c.sender == nil {
					c.sender = f.agbot.Public()
				}
				if c.open == nil {
					c.open = func(ctx context.Context, r *PrivateKeys, s *PublicKeys, env []byte, g ReplayGuard, o Options) error {
						_, _, err := Open[Proposal](ctx, r, s, env, g, o)
						return err
					}
				}
				before := lastAccepted(f.guard, "agr-A", TypeProposal)

				err := c.open(context.Background(), c.recipient, c.sender, c.env, f.guard, c.opts)

				requireKind(t, err, tc.want)
				assert.Equal(t, before, lastAccepted(f.guard, "agr-A", TypeProposal), "a rejected envelope must not advance the guard")
				assert.Empty(t, lastAccepted(f.guard, "agr-B", TypeProposal))
				forbidden := append(secretForms(), keyForms(t, f.agent)...)
				forbidden = append(forbidden, keyForms(t, f.agbot)...)
				assertNoLeak(t, err.Error(), forbidden)
			})
		}
	}
}

func hexByte(c byte) string { return fmt.Sprintf("%02x", c) }

func TestOpenRejectsEveryFlippedBit(t *testing.T) {
	for _, suite := range suites() {
		t.Run(string(suite), func(t *testing.T) {
			agbot, agent := mustKeys(t, suite), mustKeys(t, suite)
			env, err := Seal(agbot, agent.Public(), []byte(canary), Header{Type: TypeReply, AgreementID: "a", Sequence: 1, Time: t0}, Options{})
			require.NoError(t, err)
			guard := NewMemoryReplayGuard()
			for i := range len(env) * 8 {
				// The hybrid suite's envelope is mostly its 1120-byte
				// encapsulated key: there, flip one bit per byte (every
				// byte still gets a flip) to keep the race-enabled run short.
				if suite == SuiteMLKEM768X25519 && i/8 > 400 && i/8 < len(env)-150 && i%8 != (i/8)%8 {
					continue
				}
				h, pt, err := Open[[]byte](context.Background(), agent, agbot.Public(), flip(env, i), guard, Options{})
				if !assert.Error(t, err, "bit %d flipped was accepted", i) {
					continue
				}
				assert.Nil(t, pt)
				assert.Zero(t, h)
				assert.NotContains(t, err.Error(), canary)
			}
			assert.Zero(t, lastAccepted(guard, "a", TypeReply))
			_, pt, err := Open[[]byte](context.Background(), agent, agbot.Public(), env, guard, Options{})
			require.NoError(t, err, "the untouched envelope still opens")
			assert.Equal(t, canary, string(pt))
		})
	}
}

func TestReplayAcrossAgreementsAndTypes(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteX25519)
	guard := NewMemoryReplayGuard()
	seal := func(typ MessageType, agreement string, seq uint64) []byte {
		env, err := Seal(agbot, agent.Public(), []byte("{}"), Header{Type: typ, AgreementID: agreement, Sequence: seq, Time: t0}, Options{})
		require.NoError(t, err)
		return env
	}
	open := func(env []byte) error {
		_, _, err := Open[[]byte](context.Background(), agent, agbot.Public(), env, guard, Options{})
		return err
	}
	a5, b1, a1update := seal(TypeUpdate, "A", 5), seal(TypeUpdate, "B", 1), seal(TypeProposal, "A", 1)

	require.NoError(t, open(a5))
	require.NoError(t, open(b1), "agreement B has its own sequence")
	require.NoError(t, open(a1update), "each message type has its own sequence")
	requireKind(t, open(a5), ErrReplay)
	requireKind(t, open(b1), ErrReplay)
	requireKind(t, open(seal(TypeUpdate, "A", 4)), ErrReplay)
	require.NoError(t, open(seal(TypeUpdate, "A", 6)))

	// An envelope of agreement A cannot be passed off as one of B: the
	// agreement id is signed, and changing it breaks the signature.
	p := split(t, a5).withHeader(t, func(h map[string]any) { h["agreementId"] = "C" })
	requireKind(t, open(p.join()), ErrBadSignature)
	assert.Zero(t, lastAccepted(guard, "C", TypeUpdate))

	// On replay the header is returned (authentic), so an agent can answer again.
	h, pt, err := Open[[]byte](context.Background(), agent, agbot.Public(), b1, guard, Options{})
	requireKind(t, err, ErrReplay)
	assert.Nil(t, pt)
	assert.Equal(t, "B", h.AgreementID)
	assert.Equal(t, uint64(1), h.Sequence)
	assert.Equal(t, uint64(6), lastAccepted(guard, "A", TypeUpdate))
}

type failingGuard struct{ err error }

func (g failingGuard) Accept(context.Context, string, MessageType, uint64) error { return g.err }

func TestOpenGuardFailures(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteX25519)
	env, err := Seal(agbot, agent.Public(), []byte("{}"), Header{Type: TypeProposal, AgreementID: "A", Sequence: 1, Time: t0}, Options{})
	require.NoError(t, err)

	diskFull := errors.New("disk full")
	_, pt, err := Open[[]byte](context.Background(), agent, agbot.Public(), env, failingGuard{diskFull}, Options{})
	require.ErrorIs(t, err, diskFull, "a guard's own failure is passed through")
	assert.NotErrorIs(t, err, ErrReplay)
	assert.Nil(t, pt, "a message whose sequence was not recorded must not be applied")

	_, _, err = Open[[]byte](context.Background(), agent, agbot.Public(), env, nil, Options{})
	require.ErrorContains(t, err, "nil replay guard")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = Open[[]byte](ctx, agent, agbot.Public(), env, NewMemoryReplayGuard(), Options{})
	require.ErrorIs(t, err, context.Canceled)
}

func TestMemoryReplayGuardConcurrent(t *testing.T) {
	g := NewMemoryReplayGuard()
	const goroutines = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[uint64]int{}
	for range goroutines {
		wg.Go(func() {
			for seq := uint64(1); seq <= 200; seq++ {
				if g.Accept(context.Background(), "A", TypeUpdate, seq) == nil {
					mu.Lock()
					wins[seq]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for seq, n := range wins {
		assert.Equal(t, 1, n, "sequence %d accepted %d times", seq, n)
	}
	assert.Equal(t, uint64(200), lastAccepted(g, "A", TypeUpdate))
}

func TestPeekHeaderIsUnverified(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteX25519)
	env, err := Seal(agbot, agent.Public(), []byte("{}"), Header{Type: TypeProposal, AgreementID: "A", Sequence: 1, Time: t0}, Options{})
	require.NoError(t, err)
	forged := split(t, env).withHeader(t, func(h map[string]any) { h["agreementId"] = "B" }).join()
	h, err := PeekHeader(forged, Options{})
	require.NoError(t, err, "PeekHeader reads without verifying")
	assert.Equal(t, "B", h.AgreementID)
	_, err = PeekHeader([]byte("{"), Options{})
	requireKind(t, err, errMalformed)
}
