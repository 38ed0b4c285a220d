package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewCA(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	_, otherKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	own, err := NewCA(CAOptions{Key: key, CommonName: "kept"})
	require.NoError(t, err)

	tests := []struct {
		name    string
		opts    CAOptions
		wantErr string
		wantKey ed25519.PublicKey // the root's key, when known
	}{
		{name: "generated", opts: CAOptions{}},
		{name: "a root for the given key", opts: CAOptions{Key: key}, wantKey: key.Public().(ed25519.PublicKey)},
		{name: "loaded", opts: CAOptions{Key: key, Certificate: own.Chain()[0]}, wantKey: key.Public().(ed25519.PublicKey)},
		{name: "certificate without key", opts: CAOptions{Certificate: own.Chain()[0]}, wantErr: "a certificate without its key"},
		{name: "key of another certificate", opts: CAOptions{Key: otherKey, Certificate: own.Chain()[0]}, wantErr: "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca, err := NewCA(tt.opts)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.True(t, ca == nil, "no signer, not a nil pointer in an interface")
				return
			}
			require.NoError(t, err)
			cert := ca.Chain()[0]
			assert.True(t, cert.IsCA)
			assert.NotZero(t, cert.KeyUsage&x509.KeyUsageCertSign)
			require.NoError(t, cert.CheckSignatureFrom(cert), "self-signed")
			if tt.wantKey != nil {
				assert.Equal(t, tt.wantKey, cert.PublicKey)
			}
		})
	}
}
