package demo

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
)

// caLifetime is the lifetime of a generated hub CA.
const caLifetime = 10 * 365 * 24 * time.Hour

// LoadOrCreateCA reads the hub's identity CA from certPath (PEM
// certificate) and keyPath (PEM PKCS #8 Ed25519 key), or when neither
// exists generates a self-signed root and writes both with mode 0600. It
// reports whether it created the CA. An agbot that keeps its CA across
// restarts keeps the agents' certificates valid. One of the two files
// without the other is an error.
func LoadOrCreateCA(certPath, keyPath string) (identity.CertSigner, bool, error) {
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		ca, err := parseCA(certPEM, keyPEM)
		if err != nil {
			return nil, false, fmt.Errorf("hub CA %s: %w", certPath, err)
		}
		return ca, false, nil
	case errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist):
	case certErr != nil && !errors.Is(certErr, fs.ErrNotExist):
		return nil, false, certErr
	case keyErr != nil && !errors.Is(keyErr, fs.ErrNotExist):
		return nil, false, keyErr
	default:
		return nil, false, fmt.Errorf("hub CA: %s and %s must both exist or both be missing", certPath, keyPath)
	}

	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	ca, err := identity.NewCA(identity.CAOptions{Key: key, CommonName: "edgesecrets example hub CA", Lifetime: caLifetime})
	if err != nil {
		return nil, false, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, false, err
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Chain()[0].Raw})
	// The key first: a certificate without its key is refused at the next
	// start, a key without its certificate too, and neither is used.
	if err := WritePrivateFile(keyPath, keyPEM); err != nil {
		return nil, false, fmt.Errorf("writing the hub CA key: %w", err)
	}
	if err := WritePrivateFile(certPath, certPEM); err != nil {
		return nil, false, fmt.Errorf("writing the hub CA certificate: %w", err)
	}
	return ca, true, nil
}

// parseCA loads a CA from its PEM certificate and PKCS #8 key. Errors never
// quote the key.
func parseCA(certPEM, keyPEM []byte) (identity.CertSigner, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, errors.New("no PEM PKCS #8 private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, errors.New("the private key does not parse")
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("the private key is not Ed25519")
	}
	return identity.NewCA(identity.CAOptions{Certificate: cert, Key: key})
}
