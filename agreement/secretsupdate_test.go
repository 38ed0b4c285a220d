package agreement

import (
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SealSecretsUpdate's envelope opens as the Update NewSecretsUpdate makes
// of the same secrets, and an invalid update is refused as Seal refuses
// it.
func TestSealSecretsUpdate(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteX25519)
	su := SecretsUpdate{Services: proposalWithSecrets("agr-1", 3, 40).Services}
	env, err := SealSecretsUpdate(agbot, agent.Public(), "agr-1", su, Header{Sequence: 7}, Options{})
	require.NoError(t, err)
	h, got, err := Open[Update](t.Context(), agent, agbot.Public(), env, NewMemoryReplayGuard(), Options{})
	require.NoError(t, err)
	assert.Equal(t, uint64(7), h.Sequence)
	assert.Equal(t, TypeUpdate, h.Type)
	want, err := NewSecretsUpdate("agr-1", su)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	opened, err := got.Secrets()
	require.NoError(t, err)
	assert.Equal(t, su, opened)

	for _, tc := range []struct {
		name, agreementID string
		su                SecretsUpdate
		want              string
	}{
		{"no services", "agr-1", SecretsUpdate{}, "no services"},
		{"no agreement id", "", su, "agreement id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SealSecretsUpdate(agbot, agent.Public(), tc.agreementID, tc.su, Header{Sequence: 8}, Options{})
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.ErrorContains(t, err, tc.want)
			assertNoLeak(t, err.Error(), secretForms())
		})
	}
}

// spyMessage is a secrets update that keeps a reference to the buffer it
// encodes into.
type spyMessage struct {
	secretsUpdateMessage
	buf *[]byte
}

func (m spyMessage) encode() ([]byte, error) {
	b, err := m.secretsUpdateMessage.encode()
	*m.buf = b
	return b, err
}

// The rotation path's one buffer, which holds every value's encoding, is
// all zeros once the update is sealed (issue 24: the update's payload
// buffer was never cleared, and json.Marshal left a copy).
func TestSealingASecretsUpdateWipesItsBuffer(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteX25519)
	var buf []byte
	m := spyMessage{secretsUpdateMessage{agreementID: "agr-1", su: SecretsUpdate{Services: proposalWithSecrets("agr-1", 2, 64).Services}}, &buf}
	env, err := sealMessage(agbot, agent.Public(), TypeUpdate, m, Header{Sequence: 1}, Options{})
	require.NoError(t, err)
	require.NotEmpty(t, buf)
	assert.Equal(t, make([]byte, len(buf)), buf, "the encoded update is wiped once sealed")
	_, u, err := Open[Update](t.Context(), agent, agbot.Public(), env, NewMemoryReplayGuard(), Options{})
	require.NoError(t, err)
	su, err := u.Secrets()
	require.NoError(t, err)
	assert.Len(t, su.Services[0].Secrets, 2, "and the envelope holds it")
}

// SigningKeyID is the SenderKeyID of what the keys' owner seals, as
// EncryptionKeyID is the RecipientKeyID of what is sealed to them.
func TestKeyIDsAreTheHeaders(t *testing.T) {
	agbot, agent := mustKeys(t, SuiteX25519), mustKeys(t, SuiteMLKEM768X25519)
	env, err := Seal(agbot, agent.Public(), []byte("x"), Header{Type: TypeProposal, AgreementID: "agr-1", Sequence: 1}, Options{})
	require.NoError(t, err)
	h, err := PeekHeader(env, Options{})
	require.NoError(t, err)
	assert.Equal(t, agbot.Public().SigningKeyID(), h.SenderKeyID)
	assert.Equal(t, agent.Public().EncryptionKeyID(), h.RecipientKeyID)
	assert.NotEqual(t, agbot.Public().SigningKeyID(), agbot.Public().EncryptionKeyID())
}
