package agreement

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// envelopeVersion is the version of the envelope format this package
// writes and the only one Open accepts.
const envelopeVersion = 1

// defaultMaxMessageSize bounds a plaintext message (and, with the base64
// and header overhead added, an envelope) unless Options.MaxSize says
// otherwise. It matches the 1 MiB limit of a Kubernetes Secret.
const defaultMaxMessageSize = 1 << 20

// MessageType says what an envelope carries. Replay protection keeps one
// sequence per agreement and type.
type MessageType string

// Message types of the agreement protocol.
const (
	TypeProposal MessageType = "proposal"
	TypeUpdate   MessageType = "update"
	TypeReply    MessageType = "reply"
)

// Header is the public part of an envelope. It travels in clear, is the
// AEAD's additional data and is signed by the sender together with the
// encapsulated key and the ciphertext, so no field can be changed.
//
// Seal fills Version, Suite, SenderKeyID and RecipientKeyID from the keys
// (a caller that sets them must set the same values); the caller sets Type,
// AgreementID, Sequence and optionally Time.
type Header struct {
	Version        int         `json:"version"`
	Suite          Suite       `json:"suite"`
	SenderKeyID    KeyID       `json:"senderKeyId"`
	RecipientKeyID KeyID       `json:"recipientKeyId"`
	Type           MessageType `json:"type"`
	AgreementID    string      `json:"agreementId"`
	// Sequence orders the sender's messages of one type within an agreement;
	// the recipient accepts only a sequence above the last it accepted.
	// It starts at 1.
	Sequence uint64 `json:"sequence"`
	// Time is when the envelope was sealed (the sender's clock); zero means
	// now.
	Time time.Time `json:"time"`
}

// Limits of header fields.
const (
	maxAgreementIDLength = 256
	maxTypeLength        = 32
)

// validate checks the fields every header must have, whoever wrote them.
func (h Header) validate() error {
	if err := checkAgreementID(h.AgreementID); err != nil {
		return fmt.Errorf("%w: header: %w", errInvalidMessage, err)
	}
	if !validToken(string(h.Type), maxTypeLength) {
		return fmt.Errorf("%w: header: message type %.40q is not 1 to %d of [a-z0-9._-]", errInvalidMessage, string(h.Type), maxTypeLength)
	}
	if h.Sequence == 0 {
		return fmt.Errorf("%w: header: sequence is 0; sequences start at 1", errInvalidMessage)
	}
	if !h.SenderKeyID.valid() || !h.RecipientKeyID.valid() {
		return fmt.Errorf("%w: header: key ids must be 32 hex digits", errInvalidMessage)
	}
	if h.Time.IsZero() {
		return fmt.Errorf("%w: header: time is missing", errInvalidMessage)
	}
	return nil
}

// Options tune Seal, Open and PeekHeader. The zero value gives the
// defaults.
type Options struct {
	// MaxSize is the largest plaintext message in bytes; Open and
	// PeekHeader derive their envelope limit from it. Both sides should
	// agree. Zero or less means 1 MiB (1 << 20), the limit of a
	// Kubernetes Secret.
	MaxSize int
	// AllowedSuites are the suites accepted: Open rejects an envelope of
	// any other suite (empty means the recipient key's own suite) and Seal
	// refuses to seal to a key of any other suite (empty means every
	// supported suite). This is how an agent or agbot insists on the
	// post-quantum suite.
	AllowedSuites []Suite
}

// maxSize returns o.MaxSize or its default.
func (o Options) maxSize() int {
	if o.MaxSize > 0 {
		return o.MaxSize
	}
	return defaultMaxMessageSize
}

// Fixed sizes bounding the envelope around a plaintext.
const (
	maxHeaderJSON = 2 << 10
	maxEncLength  = 2 << 10 // an ML-KEM-768 + X25519 encapsulation is 1120 bytes
	aeadOverhead  = 16
	envelopeFrame = 256 // field names, quotes, braces, version
)

// envelopeLimit is the largest envelope whose plaintext can be maxPlain.
func envelopeLimit(maxPlain int) int {
	enc := b64.EncodedLen
	return enc(maxHeaderJSON) + enc(maxEncLength) + enc(maxPlain+aeadOverhead) + enc(ed25519.SignatureSize) + envelopeFrame
}

// The envelope's wire form is one JSON object:
//
//	{"version":1,"header":"<b64>","enc":"<b64>","ciphertext":"<b64>","signature":"<b64>"}
//
// where <b64> is unpadded base64url. The header is carried as the exact
// bytes that were signed and used as AAD (like a JWS protected header), so
// nothing depends on re-encoding JSON the same way.
var b64 = base64.RawURLEncoding

const (
	fieldVersion    = "version"
	fieldHeader     = "header"
	fieldEnc        = "enc"
	fieldCiphertext = "ciphertext"
	fieldSignature  = "signature"
)

// hpkeInfo and signatureContext separate this protocol's keys and
// signatures from any other use of the same keys.
const (
	hpkeInfo         = "edgesecrets agreement envelope v1"
	signatureContext = "edgesecrets agreement envelope v1"
)

// seal encrypts plaintext to recipient and signs it with sender's key. h
// supplies Type, AgreementID, Sequence and optionally Time (see Header).
// The result is the envelope's JSON wire form.
func seal(sender *PrivateKeys, recipient *PublicKeys, h Header, plaintext []byte, o Options) ([]byte, error) {
	if sender == nil || recipient == nil {
		return nil, fmt.Errorf("agreement: seal: %w: nil sender or recipient keys", errInvalidKey)
	}
	if limit := o.maxSize(); len(plaintext) > limit {
		return nil, fmt.Errorf("agreement: seal: %w: message is %d bytes, limit %d", errTooLarge, len(plaintext), limit)
	}
	if len(o.AllowedSuites) > 0 && !slices.Contains(o.AllowedSuites, recipient.suite) {
		return nil, fmt.Errorf("agreement: seal: %w: recipient key is %s", errUnknownSuite, recipient.suite)
	}
	if err := cmp.Or(
		checkPreset("version", h.Version, envelopeVersion),
		checkPreset("suite", h.Suite, recipient.suite),
		checkPreset("sender key id", h.SenderKeyID, sender.public.signingID),
		checkPreset("recipient key id", h.RecipientKeyID, recipient.encryptionID),
	); err != nil {
		return nil, err
	}
	h.Version, h.Suite = envelopeVersion, recipient.suite
	h.SenderKeyID, h.RecipientKeyID = sender.public.signingID, recipient.encryptionID
	if h.Time.IsZero() {
		h.Time = time.Now()
	}
	h.Time = h.Time.UTC()
	if err := h.validate(); err != nil {
		return nil, fmt.Errorf("agreement: seal: %w", err)
	}
	header, err := appendHeader(make([]byte, 0, headerSize(h)), h)
	if err != nil {
		return nil, fmt.Errorf("agreement: seal: encoding header: %w", err)
	}
	if len(header) > maxHeaderJSON {
		return nil, fmt.Errorf("agreement: seal: %w: header is %d bytes, limit %d", errTooLarge, len(header), maxHeaderJSON)
	}
	enc, ciphertext, sig, err := protect(sender, recipient, header, plaintext)
	if err != nil {
		return nil, fmt.Errorf("agreement: seal: %w", err)
	}
	return encodeEnvelope(header, enc, ciphertext, sig), nil
}

// protect is the cryptography of Seal: a fresh HPKE encapsulation to the
// recipient, the plaintext encrypted with header as additional data, and the
// sender's signature over header, encapsulated key and ciphertext. Its
// errors name the step, never key material.
func protect(sender *PrivateKeys, recipient *PublicKeys, header, plaintext []byte) (enc, ciphertext, sig []byte, err error) {
	suite, _ := recipient.suite.hpke()
	enc, sealer, err := hpke.NewSender(recipient.encryption, suite.kdf, suite.aead, []byte(hpkeInfo))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s encapsulation failed", recipient.suite)
	}
	if ciphertext, err = sealer.Seal(header, plaintext); err != nil {
		return nil, nil, nil, errors.New("encryption failed")
	}
	digest := transcriptDigest(header, enc, ciphertext)
	if sig, err = sender.signing.Sign(nil, digest[:], signatureOptions); err != nil {
		return nil, nil, nil, errors.New("signing failed")
	}
	return enc, ciphertext, sig, nil
}

// checkPreset returns an error if a caller preset a header field the keys
// determine (set is not zero) to a value other than theirs.
func checkPreset[T comparable](name string, set, want T) error {
	var zero T
	if set != zero && set != want {
		return fmt.Errorf("agreement: seal: %w: header %s is %v, the keys say %v", errInvalidMessage, name, set, want)
	}
	return nil
}

// signatureOptions select Ed25519ctx (RFC 8032) with this protocol's
// context string.
var signatureOptions = &ed25519.Options{Context: signatureContext}

// transcriptDigest is what the sender signs: a SHA-256 over header,
// encapsulated key and ciphertext, each length-prefixed so no bytes can
// move from one part to another. Signing the 32-byte digest instead of the
// whole envelope keeps Ed25519 from hashing a large ciphertext twice.
func transcriptDigest(header, enc, ciphertext []byte) (sum [sha256.Size]byte) {
	d := sha256.New()
	var n [8]byte
	for _, part := range [...][]byte{header, enc, ciphertext} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		d.Write(n[:])
		d.Write(part)
	}
	d.Sum(sum[:0])
	return sum
}

func encodeEnvelope(header, enc, ciphertext, sig []byte) []byte {
	b := make([]byte, 0, envelopeFrame+b64.EncodedLen(len(header))+b64.EncodedLen(len(enc))+b64.EncodedLen(len(ciphertext))+b64.EncodedLen(len(sig)))
	b = append(b, `{"`+fieldVersion+`":`+strconv.Itoa(envelopeVersion)...)
	for _, f := range []struct {
		name string
		val  []byte
	}{{fieldHeader, header}, {fieldEnc, enc}, {fieldCiphertext, ciphertext}, {fieldSignature, sig}} {
		b = append(b, `,"`+f.name+`":"`...)
		b = b64.AppendEncode(b, f.val)
		b = append(b, '"')
	}
	return append(b, '}')
}

// envelope is a parsed, not yet verified envelope.
type envelope struct {
	header     Header
	headerRaw  []byte
	enc        []byte
	ciphertext []byte
	signature  []byte
}

// parseEnvelope decodes the wire form strictly: exact field names, no
// extra fields, base64url values only, so that no change to the bytes goes
// unnoticed.
func parseEnvelope(b []byte, maxPlain int) (*envelope, error) {
	if limit := envelopeLimit(maxPlain); len(b) > limit {
		return nil, fmt.Errorf("%w: envelope is %d bytes, limit %d", errTooLarge, len(b), limit)
	}
	fields, err := objectMembers(b)
	if err != nil {
		return nil, fmt.Errorf("%w: envelope: %w", errMalformed, err)
	}
	for name := range fields {
		switch name {
		case fieldVersion, fieldHeader, fieldEnc, fieldCiphertext, fieldSignature:
		default:
			return nil, fmt.Errorf("%w: envelope: unknown field %.40q", errMalformed, name)
		}
	}
	if err := checkVersion(fields[fieldVersion], "envelope"); err != nil {
		return nil, err
	}
	var env envelope
	for _, f := range []struct {
		name string
		dst  *[]byte
		max  int
	}{
		{fieldHeader, &env.headerRaw, maxHeaderJSON},
		{fieldEnc, &env.enc, maxEncLength},
		{fieldCiphertext, &env.ciphertext, maxPlain + aeadOverhead},
		{fieldSignature, &env.signature, ed25519.SignatureSize},
	} {
		v, err := decodeB64Field(fields[f.name], f.max)
		if errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("envelope field %q: %w", f.name, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: envelope field %q: %w", errMalformed, f.name, err)
		}
		*f.dst = v
	}
	if len(env.signature) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: envelope: signature is %d bytes, want %d", errMalformed, len(env.signature), ed25519.SignatureSize)
	}
	dec := json.NewDecoder(bytes.NewReader(env.headerRaw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env.header); err != nil {
		return nil, fmt.Errorf("%w: envelope header: %s", errMalformed, jsonproblem.Describe(err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: envelope header: data after the JSON object", errMalformed)
	}
	if env.header.Version != envelopeVersion {
		return nil, fmt.Errorf("%w: envelope header version %d, want %d", errUnsupportedVersion, env.header.Version, envelopeVersion)
	}
	if err := env.header.validate(); err != nil {
		return nil, err
	}
	return &env, nil
}

// objectMembers splits one JSON object into its members. Unlike
// json.Unmarshal into a map, it refuses a member named twice (the map would
// silently keep the last), so an envelope has exactly one wire form; and
// like it, it refuses anything after the object.
func objectMembers(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil {
		return nil, errors.New(jsonproblem.Describe(err))
	} else if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	members := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New(jsonproblem.Describe(err))
		}
		name, _ := tok.(string) // inside an object, keys are strings
		if _, dup := members[name]; dup {
			return nil, fmt.Errorf("field %.40q appears twice", name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errors.New(jsonproblem.Describe(err))
		}
		members[name] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, errors.New(jsonproblem.Describe(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON object")
	}
	return members, nil
}

// checkVersion checks a version field holding exactly the JSON number 1.
func checkVersion(raw json.RawMessage, what string) error {
	if raw == nil {
		return fmt.Errorf("%w: %s: missing field %q", errMalformed, what, fieldVersion)
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil {
		return fmt.Errorf("%w: %s: version is not an integer", errMalformed, what)
	}
	if v != envelopeVersion {
		return fmt.Errorf("%w: %s version %d, want %d", errUnsupportedVersion, what, v, envelopeVersion)
	}
	return nil
}

// decodeB64Field decodes a JSON string holding only unpadded base64url
// characters (no escapes, no line breaks, which base64 decoders skip).
func decodeB64Field(raw json.RawMessage, max int) ([]byte, error) {
	if raw == nil {
		return nil, errors.New("missing")
	}
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, errors.New("not a string")
	}
	s := raw[1 : len(raw)-1]
	for _, c := range s {
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return nil, errors.New("not unpadded base64url")
		}
	}
	if len(s) > b64.EncodedLen(max) {
		return nil, fmt.Errorf("%w: over %d bytes", errTooLarge, max)
	}
	v, err := b64.Strict().AppendDecode(nil, s)
	if err != nil {
		return nil, errors.New("not unpadded base64url")
	}
	return v, nil
}

// PeekHeader returns the header of an envelope WITHOUT verifying anything:
// use it only to choose keys (which agbot's signing key, which of several
// own key sets) or the message type to open before calling Open. Only
// opts.MaxSize applies.
func PeekHeader(envelope []byte, opts Options) (Header, error) {
	env, err := parseEnvelope(envelope, opts.maxSize())
	if err != nil {
		return Header{}, fmt.Errorf("agreement: peek: %w", err)
	}
	return env.header, nil
}

// open verifies and decrypts an envelope sealed to recipient by sender, and
// records its sequence in guard; want is the expected message type ("" for
// any) and check, when set, checks the plaintext before the guard records
// the sequence.
func open(ctx context.Context, recipient *PrivateKeys, sender *PublicKeys, b []byte, guard ReplayGuard, o Options,
	want MessageType, check func(Header, []byte) error) (Header, []byte, error) {
	if guard == nil {
		return Header{}, nil, errors.New("agreement: open: nil replay guard")
	}
	h, plaintext, err := verifyAndDecrypt(recipient, sender, b, o, want)
	if err != nil {
		return Header{}, nil, fmt.Errorf("agreement: open: %w", err)
	}
	if check != nil {
		if err := check(h, plaintext); err != nil {
			clear(plaintext)
			return Header{}, nil, fmt.Errorf("agreement: open %s of agreement %q: %w", h.Type, h.AgreementID, err)
		}
	}
	if err := guard.Accept(ctx, h.AgreementID, h.Type, h.Sequence); err != nil {
		clear(plaintext)
		return h, nil, fmt.Errorf("agreement: open %s of agreement %q: %w", h.Type, h.AgreementID, err)
	}
	return h, plaintext, nil
}

func verifyAndDecrypt(recipient *PrivateKeys, sender *PublicKeys, b []byte, o Options, want MessageType) (Header, []byte, error) {
	if recipient == nil || sender == nil {
		return Header{}, nil, fmt.Errorf("%w: nil recipient or sender keys", errInvalidKey)
	}
	env, err := parseEnvelope(b, o.maxSize())
	if err != nil {
		return Header{}, nil, err
	}
	h := env.header
	allowed := o.AllowedSuites
	if len(allowed) == 0 {
		allowed = []Suite{recipient.public.suite}
	}
	if !slices.Contains(allowed, h.Suite) {
		return Header{}, nil, fmt.Errorf("%w: envelope suite %.64q, allowed %v", ErrSuiteNotAllowed, string(h.Suite), allowed)
	}
	if h.Suite != recipient.public.suite {
		return Header{}, nil, fmt.Errorf("%w: envelope suite %s, recipient key is %s", ErrSuiteNotAllowed, h.Suite, recipient.public.suite)
	}
	if h.RecipientKeyID != recipient.public.encryptionID {
		return Header{}, nil, fmt.Errorf("%w: envelope is for encryption key %s, this key is %s", ErrWrongRecipient, h.RecipientKeyID, recipient.public.encryptionID)
	}
	if h.SenderKeyID != sender.signingID {
		return Header{}, nil, fmt.Errorf("%w: envelope is signed by key %s, expected %s", ErrWrongSender, h.SenderKeyID, sender.signingID)
	}
	digest := transcriptDigest(env.headerRaw, env.enc, env.ciphertext)
	if err := ed25519.VerifyWithOptions(sender.signing, digest[:], env.signature, signatureOptions); err != nil {
		return Header{}, nil, fmt.Errorf("%w: %s of agreement %q", ErrBadSignature, h.Type, h.AgreementID)
	}
	// From here on the header is authentic.
	if want != "" && h.Type != want {
		return Header{}, nil, fmt.Errorf("%w: envelope of agreement %q holds a %s, want a %s", errUnexpectedType, h.AgreementID, h.Type, want)
	}
	suite, _ := recipient.public.suite.hpke()
	rctx, err := hpke.NewRecipient(env.enc, recipient.encryption, suite.kdf, suite.aead, []byte(hpkeInfo))
	if err != nil {
		return Header{}, nil, fmt.Errorf("%w: %s of agreement %q: decapsulation failed", ErrDecrypt, h.Type, h.AgreementID)
	}
	plaintext, err := rctx.Open(env.headerRaw, env.ciphertext)
	if err != nil {
		return Header{}, nil, fmt.Errorf("%w: %s of agreement %q", ErrDecrypt, h.Type, h.AgreementID)
	}
	return h, plaintext, nil
}
