package identity

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"

	"github.com/edgesecrets/edgesecrets"
)

// The HPKE public key travels as an X.509 extension: in the CSR's extension
// request, where the agent's Ed25519 signature over the CSR binds it to the
// identity, and copied by the hub into the certificate, where the CA's
// signature binds it for the agbot. A certificate is then a complete
// statement "this node, this instance, this signing key, this encryption
// key", checked by ordinary chain verification; no side table is needed.
//
// The extension is non-critical and its value is the DER of
//
//	EncryptionKey ::= SEQUENCE { kem INTEGER, publicKey OCTET STRING }
//
// where kem is the RFC 9180 KEM id and publicKey its SerializePublicKey.
//
// The OID is provisional: edgesecrets has no registered arc yet, so it sits
// under the ITU-T "example" arc 2.999 where it collides with no real
// assignment. Before certificates outlive one release it moves under the
// project's IANA enterprise number; only the hub CA issues and only this
// package reads the extension, so the change is this one line.
var encryptionKeyOID = asn1.ObjectIdentifier{2, 999, 3131, 1, 1}

// oidSubjectAltName is the SAN extension (RFC 5280 4.2.1.6).
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// oidCommonName is the subject CN attribute.
var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// Input limits.
const (
	// maxPEMBytes bounds one PEM input (a CSR, a certificate chain). An
	// ML-KEM-768+X25519 key makes a CSR of about 2 KiB.
	maxPEMBytes = 32 << 10
	// maxChainCerts bounds the certificates in one PEM chain.
	maxChainCerts = 8
)

const (
	pemTypeCSR  = "CERTIFICATE REQUEST"
	pemTypeCert = "CERTIFICATE"
)

type encryptionKeyASN1 struct {
	KEM       int
	PublicKey []byte
}

func marshalEncryptionKey(pub hpke.PublicKey) (pkix.Extension, error) {
	if pub == nil {
		return pkix.Extension{}, fmt.Errorf("no HPKE public key")
	}
	der, err := asn1.Marshal(encryptionKeyASN1{KEM: int(pub.KEM().ID()), PublicKey: pub.Bytes()})
	if err != nil {
		return pkix.Extension{}, err
	}
	return pkix.Extension{Id: append(asn1.ObjectIdentifier(nil), encryptionKeyOID...), Value: der}, nil
}

// parseEncryptionKey decodes the extension value into an HPKE public key.
func parseEncryptionKey(der []byte) (hpke.PublicKey, error) {
	var v encryptionKeyASN1
	rest, err := asn1.Unmarshal(der, &v)
	if err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("HPKE public key extension is not a DER SEQUENCE { INTEGER, OCTET STRING }")
	}
	if v.KEM < 0 || v.KEM > 0xffff {
		return nil, fmt.Errorf("HPKE KEM id %d out of range", v.KEM)
	}
	kem, err := hpke.NewKEM(uint16(v.KEM))
	if err != nil {
		return nil, fmt.Errorf("unknown HPKE KEM id %#04x", v.KEM)
	}
	pub, err := kem.NewPublicKey(v.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("HPKE public key is not a valid key for KEM %#04x", v.KEM)
	}
	return pub, nil
}

// signingPublicKey returns the Ed25519 public key of signer, or an error if
// signer is not an Ed25519 key.
func signingPublicKey(signer crypto.Signer) (ed25519.PublicKey, error) {
	if signer == nil {
		return nil, fmt.Errorf("no signing key")
	}
	pub, ok := signer.Public().(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("signing key is %T, want an Ed25519 key", signer.Public())
	}
	return pub, nil
}

// newCSR returns a PEM certificate signing request for id, signed with the
// agent's Ed25519 signing key and carrying its HPKE public key: subject CN =
// id.Node, SAN URIs id.nodeURI() and id.instanceURI(), and the encryption
// key extension (see encryptionKeyOID).
func newCSR(signingKey crypto.Signer, id Identity, encryptionKey hpke.PublicKey) ([]byte, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if _, err := signingPublicKey(signingKey); err != nil {
		return nil, newError(opRegister, id, edgesecrets.ErrInvalid, err.Error(), nil)
	}
	exts, err := agentExtensions(opRegister, id, encryptionKey)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: id.Node}, ExtraExtensions: exts}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, signingKey)
	if err != nil {
		// The cause comes from the signer; it describes a failure, not the key.
		return nil, newError(opRegister, id, edgesecrets.ErrInvalid, "signing the CSR", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemTypeCSR, Bytes: der}), nil
}

// agentExtensions returns the two extensions every agent CSR and
// certificate carries: the SAN with id's URIs and the HPKE public key.
func agentExtensions(op string, id Identity, encryptionKey hpke.PublicKey) ([]pkix.Extension, error) {
	enc, err := marshalEncryptionKey(encryptionKey)
	if err != nil {
		return nil, newError(op, id, edgesecrets.ErrInvalid, err.Error(), nil)
	}
	san, err := marshalURISAN(id)
	if err != nil {
		return nil, newError(op, id, edgesecrets.ErrInvalid, "encoding SAN URIs", err)
	}
	return []pkix.Extension{san, enc}, nil
}

// marshalURISAN encodes the SAN extension with the two URIs, in the order
// node, instance id, as raw IA5 strings so they are exactly the canonical
// text.
func marshalURISAN(id Identity) (pkix.Extension, error) {
	var names []asn1.RawValue
	for _, u := range []string{id.nodeURI(), id.instanceURI()} {
		names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(u)})
	}
	der, err := asn1.Marshal(names)
	if err != nil {
		return pkix.Extension{}, err
	}
	return pkix.Extension{Id: oidSubjectAltName, Value: der}, nil
}

// sanURIs walks a SAN extension value and returns its URIs as raw strings.
// Any other kind of name (DNS, IP, e-mail, otherName, directory name...) is
// an error: an agent certificate names the agent by URI only.
func sanURIs(der []byte) ([]string, error) {
	var seq asn1.RawValue
	rest, err := asn1.Unmarshal(der, &seq)
	if err != nil || len(rest) != 0 || seq.Class != asn1.ClassUniversal || seq.Tag != asn1.TagSequence || !seq.IsCompound {
		return nil, fmt.Errorf("SAN extension is not a DER SEQUENCE")
	}
	var uris []string
	for b := seq.Bytes; len(b) > 0; {
		var name asn1.RawValue
		b, err = asn1.Unmarshal(b, &name)
		if err != nil {
			return nil, fmt.Errorf("SAN extension holds a malformed name")
		}
		if name.Class != asn1.ClassContextSpecific || name.Tag != 6 || name.IsCompound {
			return nil, fmt.Errorf("SAN of type [%d]: only URI names are allowed", name.Tag)
		}
		uris = append(uris, string(name.Bytes))
	}
	return uris, nil
}

// parsedCSR is a certificate signing request that passed every check of
// parseCSR.
type parsedCSR struct {
	// Identity is what the CN and SAN URIs name.
	Identity Identity
	// SigningKey is the agent's Ed25519 public key (the CSR's key).
	SigningKey ed25519.PublicKey
	// EncryptionKey is the agent's HPKE public key from the extension.
	EncryptionKey hpke.PublicKey
	// Raw is the DER of the request.
	Raw []byte
}

// parseCSR decodes one PEM "CERTIFICATE REQUEST" of at most 32 KiB and checks
// it: a valid signature by an Ed25519 key (the one allowed key type);
// subject exactly CN = node id; exactly one node SAN URI and one
// instance-id SAN URI in canonical form and no other name of any kind; the
// HPKE public key extension holding a key of a KEM crypto/hpke knows; no
// other requested extension. Errors are edgesecrets.ErrInvalid and say which rule
// failed.
func parseCSR(pemBytes []byte) (*parsedCSR, error) {
	der, err := decodeSinglePEM(pemBytes, pemTypeCSR)
	if err != nil {
		return nil, nameError(err.Error())
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, nameError("CSR is not a valid PKCS #10 request")
	}
	if req.PublicKeyAlgorithm != x509.Ed25519 || req.SignatureAlgorithm != x509.PureEd25519 {
		return nil, nameError(fmt.Sprintf("CSR key is %v signed with %v: only Ed25519 keys are allowed", req.PublicKeyAlgorithm, req.SignatureAlgorithm))
	}
	if err := req.CheckSignature(); err != nil {
		return nil, nameError("CSR signature does not verify with its public key")
	}
	pub, ok := req.PublicKey.(ed25519.PublicKey)
	if !ok {
		return nil, nameError("CSR public key is not Ed25519")
	}
	cn, err := onlyCommonName(req.Subject)
	if err != nil {
		return nil, nameError("CSR " + err.Error())
	}
	uris, encKey, err := checkExtensions(req.Extensions)
	if err != nil {
		return nil, nameError("CSR " + err.Error())
	}
	id, err := identityFromNames(cn, uris)
	if err != nil {
		return nil, nameError("CSR " + err.Error())
	}
	return &parsedCSR{Identity: id, SigningKey: pub, EncryptionKey: encKey, Raw: der}, nil
}

// onlyCommonName returns the subject CN, or an error if the subject holds
// anything else.
func onlyCommonName(subject pkix.Name) (string, error) {
	if len(subject.Names) != 1 || !subject.Names[0].Type.Equal(oidCommonName) {
		return "", fmt.Errorf("subject must be exactly CN=<node id>, has %d attributes", len(subject.Names))
	}
	cn, ok := subject.Names[0].Value.(string)
	if !ok {
		return "", fmt.Errorf("subject CN is not a string")
	}
	return cn, nil
}

// checkExtensions accepts exactly the SAN and the HPKE key extension, each
// once, and returns the SAN URIs and the key. Other extensions in a
// certificate are checked by the caller; this is for the request side.
func checkExtensions(exts []pkix.Extension) ([]string, hpke.PublicKey, error) {
	var uris []string
	var key hpke.PublicKey
	var sawSAN bool
	for _, ext := range exts {
		switch {
		case ext.Id.Equal(oidSubjectAltName) && !sawSAN:
			sawSAN = true
			var err error
			if uris, err = sanURIs(ext.Value); err != nil {
				return nil, nil, err
			}
		case ext.Id.Equal(encryptionKeyOID) && key == nil:
			var err error
			if key, err = parseEncryptionKey(ext.Value); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, fmt.Errorf("extension %s is not allowed (or repeated)", ext.Id)
		}
	}
	if !sawSAN {
		return nil, nil, fmt.Errorf("has no SAN extension")
	}
	if key == nil {
		return nil, nil, fmt.Errorf("has no HPKE public key extension (%s)", encryptionKeyOID)
	}
	return uris, key, nil
}

// decodeSinglePEM returns the DER of the one PEM block of type typ in b.
// Anything but surrounding whitespace, or a size over maxPEMBytes, is an
// error.
func decodeSinglePEM(b []byte, typ string) ([]byte, error) {
	blocks, err := decodePEMBlocks(b, typ, 1)
	if err != nil {
		return nil, err
	}
	return blocks[0], nil
}

// decodePEMBlocks returns the DER of 1..max PEM blocks of type typ making up
// all of b (but whitespace).
func decodePEMBlocks(b []byte, typ string, max int) ([][]byte, error) {
	if len(b) > maxPEMBytes {
		return nil, fmt.Errorf("PEM input is %d bytes, more than the %d allowed", len(b), maxPEMBytes)
	}
	var ders [][]byte
	rest := b
	for rest = bytes.TrimSpace(rest); len(rest) > 0; rest = bytes.TrimSpace(rest) {
		if len(ders) == max {
			return nil, fmt.Errorf("more than %d PEM blocks", max)
		}
		// pem.Decode skips text before a block; we do not.
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			return nil, fmt.Errorf("input is not PEM (or has text between or around blocks)")
		}
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, fmt.Errorf("malformed PEM block")
		}
		if block.Type != typ || len(block.Headers) != 0 {
			return nil, fmt.Errorf("PEM block %q, want %q without headers", clip(block.Type), typ)
		}
		ders = append(ders, block.Bytes)
	}
	if len(ders) == 0 {
		return nil, fmt.Errorf("no %q PEM block", typ)
	}
	return ders, nil
}
