package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/edgesecrets/edgesecrets"
	"github.com/natefinch/atomic"
)

// keyFileMode is the mode of the private key file.
const keyFileMode fs.FileMode = 0o600

// pemTypeKey is the PEM type of the PKCS #8 key file.
const pemTypeKey = "PRIVATE KEY"

// files is where an agent keeps its Ed25519 key and its certificate
// (AgentOptions.KeyFile and CertFile): a PKCS #8 PEM key file (mode 0600)
// and a PEM certificate file (leaf, then the CA chain), the pair a TLS
// stack loads. Both are written atomically (github.com/natefinch/atomic:
// temporary file, fsync, rename), so a crash leaves the old file or the new
// one, never a mix. The HPKE private key is the agreement package's to
// store.
type files struct {
	keyPath, certPath string
}

// writeKeyFile writes the agent's Ed25519 key to path as a PKCS #8 PEM
// file with mode 0600, atomically. An existing file's mode is tightened
// first, since the atomic write keeps the mode of the file it replaces.
func writeKeyFile(path string, key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return newError(opInstall, Identity{}, edgesecrets.ErrInvalid, "not an Ed25519 private key", nil)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return newError(opInstall, Identity{}, edgesecrets.ErrInvalid, "encoding the key", nil)
	}
	block := pem.EncodeToMemory(&pem.Block{Type: pemTypeKey, Bytes: der})
	defer clear(block)
	clear(der)
	if err := os.Chmod(path, keyFileMode); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fileError("tightening the mode of the key file", path, err)
	}
	if err := atomic.WriteFile(path, bytes.NewReader(block)); err != nil {
		return fileError("writing the key file", path, err)
	}
	// The temporary file was created 0600; check nothing widened it.
	info, err := os.Stat(path)
	if err != nil {
		return fileError("checking the key file", path, err)
	}
	if info.Mode().Perm() != keyFileMode {
		return newError(opInstall, Identity{}, edgesecrets.ErrInvalid, fmt.Sprintf("key file %s has mode %v, want %v", path, info.Mode().Perm(), keyFileMode), nil)
	}
	return nil
}

// readKeyFile reads the Ed25519 key writeKeyFile wrote to path. A key file
// readable by group or others is refused.
func readKeyFile(path string) (ed25519.PrivateKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fileError("reading the key file", path, err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, newError(opInstall, Identity{}, edgesecrets.ErrInvalid, fmt.Sprintf("key file %s has mode %v: it must not be readable by group or others", path, info.Mode().Perm()), nil)
	}
	raw, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	defer clear(raw)
	der, err := decodeSinglePEM(raw, pemTypeKey)
	if err != nil {
		// err describes the PEM framing, never the content.
		return nil, newError(opInstall, Identity{}, edgesecrets.ErrInvalid, "key file "+path+": "+err.Error(), nil)
	}
	defer clear(der)
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, newError(opInstall, Identity{}, edgesecrets.ErrInvalid, "key file "+path+" is not a PKCS #8 key", nil)
	}
	key, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, newError(opInstall, Identity{}, edgesecrets.ErrInvalid, fmt.Sprintf("key file %s holds a %T, want an Ed25519 key", path, parsed), nil)
	}
	return key, nil
}

// writeCertificate installs a certificate chain (leaf first) at certPath,
// atomically, but only if the leaf's public key is the key in keyPath: a
// certificate that does not match the key is never installed, and the file
// keeps its old content.
func (f *files) writeCertificate(chain []*x509.Certificate) error {
	if len(chain) == 0 || chain[0] == nil {
		return newError(opInstall, Identity{}, edgesecrets.ErrInvalid, "no certificate", nil)
	}
	key, err := readKeyFile(f.keyPath)
	if err != nil {
		return err
	}
	defer clear(key)
	leafKey, ok := chain[0].PublicKey.(ed25519.PublicKey)
	if !ok || !leafKey.Equal(key.Public()) {
		return newError(opInstall, Identity{}, ErrForbidden, "the certificate's public key is not the agent's key in "+f.keyPath+"; not installed", nil)
	}
	if err := atomic.WriteFile(f.certPath, bytes.NewReader(encodeCertificatesPEM(chain...))); err != nil {
		return fileError("writing the certificate file", f.certPath, err)
	}
	return nil
}

// readCertificate reads the chain at certPath, leaf first.
func (f *files) readCertificate() ([]*x509.Certificate, error) {
	raw, err := readBounded(f.certPath)
	if err != nil {
		return nil, err
	}
	certs, err := parseCertificatesPEM(raw)
	if err != nil {
		return nil, withOp(err, opInstall)
	}
	return certs, nil
}

// readBounded reads at most maxPEMBytes (+1 to detect more) of a file.
func readBounded(path string) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fileError("opening", path, err)
	}
	defer func() { _ = file.Close() }() // read-only
	raw, err := io.ReadAll(io.LimitReader(file, maxPEMBytes+1))
	if err != nil {
		return nil, fileError("reading", path, err)
	}
	if len(raw) > maxPEMBytes {
		clear(raw)
		return nil, newError(opInstall, Identity{}, edgesecrets.ErrInvalid, fmt.Sprintf("%s is larger than %d bytes", path, maxPEMBytes), nil)
	}
	return raw, nil
}

// fileError wraps a file-system failure as edgesecrets.ErrUnavailable; the cause is
// kept, so a missing file matches fs.ErrNotExist.
func fileError(what, path string, err error) error {
	return newError(opInstall, Identity{}, edgesecrets.ErrUnavailable, what+" "+path, err)
}
