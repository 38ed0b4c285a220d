package identity

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"time"
)

// CertSigner issues agent certificates for the Issuer: the signing half of
// a CA, which may live in an HSM, a cloud KMS or Vault's PKI engine.
type CertSigner interface {
	// Sign issues a certificate from template for the public key pub and
	// returns its DER. The signer sets SerialNumber (unique, at least 64
	// random bits) and the issuer; it must not widen the template's
	// validity, names or extensions.
	Sign(ctx context.Context, template *x509.Certificate, pub crypto.PublicKey) ([]byte, error)
	// Chain returns the CA certificates that verify what Sign issues:
	// the issuing CA first, the root last. NewIssuer reads it once; a CA
	// rotation means a new Issuer (and Verifiers) with the new chain.
	Chain() []*x509.Certificate
}

// CAOptions configures NewCA.
type CAOptions struct {
	// Certificate and Key are an existing CA to load. With Key alone,
	// NewCA makes a self-signed root for that key (an embedder that keeps
	// the key, to keep its CA across restarts, then saves the root,
	// Chain()[0]); with neither, a self-signed root for a new Ed25519 key
	// that exists only in memory.
	Certificate *x509.Certificate
	Key         crypto.Signer
	// CommonName names a generated root; default "edgesecrets hub CA".
	CommonName string
	// Lifetime of a generated root; default ten years.
	Lifetime time.Duration
}

// Format prints the options without the key.
func (o CAOptions) Format(f fmt.State, _ rune) {
	// fmt.State buffers in memory; Format has no error to return.
	_, _ = fmt.Fprintf(f, "{CommonName:%q Lifetime:%v Certificate:%v Key:%s}", o.CommonName, o.Lifetime, o.Certificate != nil, keyPresence(o.Key))
}

// MarshalJSON encodes what LogValue logs: never the key, so a struct
// holding the options can go through slog's JSON handler.
func (o CAOptions) MarshalJSON() ([]byte, error) { return logValueJSON(o.LogValue()) }

// LogValue logs the options without the key.
func (o CAOptions) LogValue() slog.Value {
	return slog.GroupValue(slog.String("commonName", o.CommonName), slog.Duration("lifetime", o.Lifetime),
		slog.Bool("certificate", o.Certificate != nil), slog.String("key", keyPresence(o.Key)))
}

// memoryCA is the in-memory certificate authority of NewCA.
type memoryCA struct {
	cert *x509.Certificate
	key  *heldKey // behind a pointer: printing a CA value shows an address
}

// NewCA loads or generates an in-memory certificate authority, the
// Issuer's default CertSigner. Its key exists only in memory unless the
// embedder passes in one it persists, so a generated CA's certificates die
// with the process. Chain returns its certificate alone; Sign cuts a
// validity past the CA's own to it. Printing it (fmt, slog) shows its
// subject, never its key.
func NewCA(opts CAOptions) (CertSigner, error) {
	switch {
	case opts.Certificate != nil && opts.Key != nil:
		ca, err := loadCA(opts.Certificate, opts.Key)
		if err != nil {
			return nil, err
		}
		return ca, nil
	case opts.Certificate != nil:
		return nil, fmt.Errorf("identity: CA: a certificate without its key")
	}
	name := opts.CommonName
	if name == "" {
		name = "edgesecrets hub CA"
	}
	lifetime := opts.Lifetime
	if lifetime <= 0 {
		lifetime = 10 * 365 * 24 * time.Hour
	}
	now := time.Now()
	key := opts.Key
	if key == nil {
		_, generated, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("identity: CA: generating key: %w", err)
		}
		key = generated
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("identity: CA: self-signing: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("identity: CA: parsing own certificate: %w", err)
	}
	return &memoryCA{cert: cert, key: &heldKey{key}}, nil
}

func loadCA(cert *x509.Certificate, key crypto.Signer) (*memoryCA, error) {
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("identity: CA: certificate %q is not a CA certificate with the cert-sign key usage", cert.Subject.CommonName)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("identity: CA: the key does not match certificate %q", cert.Subject.CommonName)
	}
	return &memoryCA{cert: cert, key: &heldKey{key}}, nil
}

// Chain implements CertSigner: the CA certificate alone.
func (ca *memoryCA) Chain() []*x509.Certificate { return []*x509.Certificate{ca.cert} }

// Sign implements CertSigner. A validity past the CA's own is cut to it.
func (ca *memoryCA) Sign(ctx context.Context, template *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := *template
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	t.SerialNumber = serial
	if t.NotAfter.After(ca.cert.NotAfter) {
		t.NotAfter = ca.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, &t, ca.cert, pub, ca.key.Signer)
	if err != nil {
		return nil, fmt.Errorf("identity: CA: signing: %w", err)
	}
	return der, nil
}

// Format prints the CA's subject, never its key.
func (ca *memoryCA) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "CA{%q}", ca.cert.Subject.CommonName) // fmt.State buffers in memory; Format has no error to return
}

// LogValue logs the CA's subject, never its key.
func (ca *memoryCA) LogValue() slog.Value {
	return slog.StringValue("CA " + ca.cert.Subject.CommonName)
}

// randomSerial returns a positive serial of 127 random bits.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 127)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("identity: CA: serial: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// heldKey keeps a private key behind a pointer, so printing a struct that
// holds one by value (which bypasses its Format method) shows an address,
// never the key.
type heldKey struct{ crypto.Signer }

// keyPresence says whether a key is set, for Format methods.
// logValueJSON encodes a LogValue group as a JSON object, so that a
// type's MarshalJSON shows exactly what its LogValue does.
func logValueJSON(v slog.Value) ([]byte, error) {
	m := map[string]any{}
	for _, a := range v.Group() {
		m[a.Key] = a.Value.Resolve().Any()
	}
	return json.Marshal(m)
}

func keyPresence(k any) string {
	if k == nil {
		return "<nil>"
	}
	return redacted
}
