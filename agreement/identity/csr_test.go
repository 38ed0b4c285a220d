package identity

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/x509/pkix"
	"strings"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewCSRRoundTrip(t *testing.T) {
	k := newAgentKeys(t)
	for _, kem := range []hpke.KEM{hpke.MLKEM768X25519(), hpke.DHKEM(ecdh.X25519())} {
		enc, err := kem.GenerateKey()
		require.NoError(t, err)
		pemBytes, err := newCSR(k.sign, testID, enc.PublicKey())
		require.NoError(t, err)
		csr, err := parseCSR(pemBytes)
		require.NoError(t, err)
		assert.Equal(t, testID, csr.Identity)
		assert.True(t, csr.SigningKey.Equal(k.sign.Public()))
		assert.True(t, sameEncryptionKey(csr.EncryptionKey, enc.PublicKey()), "KEM %#x", kem.ID())
	}
}

func TestNewCSRRefusesBadInput(t *testing.T) {
	k := newAgentKeys(t)
	_, err := newCSR(k.sign, Identity{Provider: "p", Org: "a b", Node: "n", InstanceID: "i"}, k.enc.PublicKey())
	assert.ErrorContains(t, err, "org has a character outside")
	_, err = newCSR(nil, testID, k.enc.PublicKey())
	assert.ErrorContains(t, err, "no signing key")
	_, err = newCSR(k.sign, testID, nil)
	assert.ErrorContains(t, err, "no HPKE public key")
}

func TestParseCSRFraming(t *testing.T) {
	k := newAgentKeys(t)
	valid := k.csr(t, testID)
	cases := map[string]struct {
		in  string
		msg string
	}{
		"empty":       {"", "no \"CERTIFICATE REQUEST\" PEM block"},
		"not PEM":     {"hello", "input is not PEM"},
		"text before": {"hello\n" + valid, "input is not PEM"},
		"two blocks":  {valid + valid, "more than 1 PEM blocks"},
		"wrong type":  {strings.ReplaceAll(valid, "CERTIFICATE REQUEST", "CERTIFICATE"), `PEM block "CERTIFICATE", want "CERTIFICATE REQUEST"`},
		"headers":     {strings.Replace(valid, "-----\n", "-----\nProc-Type: 4,ENCRYPTED\n\n", 1), "without headers"},
		"not DER":     {"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n", "not a valid PKCS #10 request"},
		"oversized":   {valid + strings.Repeat(" ", maxPEMBytes), "more than the 32768 allowed"},
		"truncated":   {valid[:len(valid)/2], "malformed PEM block"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseCSR([]byte(tc.in))
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	_, err := parseCSR([]byte("\n\n" + valid + "\n\n"))
	assert.NoError(t, err, "surrounding whitespace is fine")
}

func TestParseCSRBadEncryptionKey(t *testing.T) {
	k := newAgentKeys(t)
	for name, value := range map[string][]byte{
		"not DER":     {1, 2, 3},
		"unknown KEM": mustMarshal(t, encryptionKeyASN1{KEM: 0x7777, PublicKey: []byte{1}}),
		"bad key":     mustMarshal(t, encryptionKeyASN1{KEM: 0x0020, PublicKey: []byte{1, 2, 3}}),
		"KEM too big": mustMarshal(t, encryptionKeyASN1{KEM: 1 << 20, PublicKey: []byte{1}}),
	} {
		t.Run(name, func(t *testing.T) {
			c := rawCSR{signer: k.sign, subject: pkix.Name{CommonName: testID.Node}, uris: []string{testID.nodeURI(), testID.instanceURI()}, noEnc: true,
				extra: []pkix.Extension{{Id: encryptionKeyOID, Value: value}}}
			_, err := parseCSR([]byte(c.pem(t)))
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.ErrorContains(t, err, "HPKE")
		})
	}
}

func TestIdentityValidate(t *testing.T) {
	assert.NoError(t, testID.Validate())
	long := strings.Repeat("a", 129)
	err := Identity{Provider: "", Org: "..", Node: long, InstanceID: "i/1"}.Validate()
	require.ErrorIs(t, err, edgesecrets.ErrInvalid)
	for _, want := range []string{"provider is empty", `org ".." is not a name`, "node is longer than 128", "instance id has a character outside"} {
		assert.ErrorContains(t, err, want, "every problem is reported")
	}
	assert.Equal(t, "edgesecrets://node/acme/node-1", testID.nodeURI())
	assert.Equal(t, "edgesecrets://instanceid/openhorizon.factory1/i-0123456789", testID.instanceURI())
	assert.Equal(t, "/instance/openhorizon.factory1/acme/node-1/i-0123456789", testID.path())
}

func TestEncryptionKeyExtensionOIDIsACopy(t *testing.T) {
	k := newAgentKeys(t)
	ext, err := marshalEncryptionKey(k.enc.PublicKey())
	require.NoError(t, err)
	assert.Equal(t, "2.999.3131.1.1", ext.Id.String(), "the OID the package documentation names")
	ext.Id[0] = 1
	again, err := marshalEncryptionKey(k.enc.PublicKey())
	require.NoError(t, err)
	assert.Equal(t, "2.999.3131.1.1", again.Id.String(), "a certificate template cannot change the package's OID")
}
