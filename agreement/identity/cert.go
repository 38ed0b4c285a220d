package identity

import (
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

// parseCertificatesPEM decodes 1 to 8 PEM "CERTIFICATE" blocks (at most
// 32 KiB in all), leaf first. Errors are edgesecrets.ErrInvalid.
func parseCertificatesPEM(b []byte) ([]*x509.Certificate, error) {
	ders, err := decodePEMBlocks(b, pemTypeCert, maxChainCerts)
	if err != nil {
		return nil, nameError(err.Error())
	}
	certs := make([]*x509.Certificate, 0, len(ders))
	for i, der := range ders {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, nameError(fmt.Sprintf("PEM block %d is not a valid X.509 certificate", i+1))
		}
		certs = append(certs, c)
	}
	return certs, nil
}

// encodeCertificatesPEM returns certs as concatenated PEM blocks.
func encodeCertificatesPEM(certs ...*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: pemTypeCert, Bytes: c.Raw})...)
	}
	return out
}

// certContents is what an agent certificate states.
type certContents struct {
	Identity      Identity
	SigningKey    ed25519.PublicKey
	EncryptionKey hpke.PublicKey
	Serial        string
}

// inspectCertificate reads an agent certificate's identity and keys with
// the same naming rules as parseCSR. It does not check the chain or the
// validity period.
func inspectCertificate(cert *x509.Certificate) (certContents, error) {
	pub, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok {
		return certContents{}, fmt.Errorf("certificate key is %v, want Ed25519", cert.PublicKeyAlgorithm)
	}
	cn, err := onlyCommonName(cert.Subject)
	if err != nil {
		return certContents{}, fmt.Errorf("certificate %w", err)
	}
	var uris []string
	var encKey hpke.PublicKey
	var sawSAN bool
	for _, ext := range cert.Extensions {
		switch {
		case ext.Id.Equal(oidSubjectAltName):
			if sawSAN {
				return certContents{}, fmt.Errorf("certificate has two SAN extensions")
			}
			sawSAN = true
			if uris, err = sanURIs(ext.Value); err != nil {
				return certContents{}, fmt.Errorf("certificate %w", err)
			}
		case ext.Id.Equal(encryptionKeyOID):
			if encKey != nil {
				return certContents{}, fmt.Errorf("certificate has two HPKE public key extensions")
			}
			if encKey, err = parseEncryptionKey(ext.Value); err != nil {
				return certContents{}, fmt.Errorf("certificate %w", err)
			}
		}
	}
	if encKey == nil {
		return certContents{}, fmt.Errorf("certificate has no HPKE public key extension")
	}
	id, err := identityFromNames(cn, uris)
	if err != nil {
		return certContents{}, fmt.Errorf("certificate %w", err)
	}
	return certContents{Identity: id, SigningKey: pub, EncryptionKey: encKey, Serial: serialString(cert)}, nil
}

// serialString is the record form of a certificate serial: lowercase hex.
func serialString(cert *x509.Certificate) string {
	if cert.SerialNumber == nil {
		return ""
	}
	return cert.SerialNumber.Text(16)
}

// sameEncryptionKey reports whether a and b are the same HPKE public key.
func sameEncryptionKey(a, b hpke.PublicKey) bool {
	if a == nil || b == nil {
		return false
	}
	return a.KEM().ID() == b.KEM().ID() && string(a.Bytes()) == string(b.Bytes())
}
