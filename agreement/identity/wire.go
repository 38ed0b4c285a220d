package identity

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Body limits. A register or refresh body holds a CSR (about 2 KiB with an
// ML-KEM key), at most one certificate chain and an attestation document.
const (
	// MaxBodyBytes bounds every JSON body this package decodes.
	MaxBodyBytes = 64 << 10
	// maxAttestationBytes bounds the attestation document.
	maxAttestationBytes = 16 << 10
)

const redacted = "[redacted]"

// errTooLarge is the cause of a body over MaxBodyBytes (HTTP 413).
var errTooLarge = fmt.Errorf("larger than %d bytes", MaxBodyBytes)

// Attestation is the provider's attestation document for an instance (for
// example a signed instance identity document). It is a bearer credential
// while fresh, so printing it with fmt or slog shows "[redacted]"; its JSON
// form carries the value. string(a) gives the value to an Attestor.
type Attestation string

// String returns "[redacted]".
func (Attestation) String() string { return redacted }

// GoString returns "[redacted]".
func (Attestation) GoString() string { return redacted }

// Format prints "[redacted]" for every verb.
func (Attestation) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue logs "[redacted]".
func (Attestation) LogValue() slog.Value { return slog.StringValue(redacted) }

// RegisterRequest is the body of POST /instance: the node the agent claims
// to be, the provider's attestation, and a CSR (see NewCSR) naming the same
// provider, org and node plus the instance id.
//
//	{"provider":"openhorizon.factory1","org":"acme","node":"node-1",
//	 "attestation":"...","csr":"-----BEGIN CERTIFICATE REQUEST-----...",
//	 "lifetimeSeconds":3600}
type RegisterRequest struct {
	// Provider, Org and Node are the claimed identity; the CSR must name
	// the same.
	Provider string `json:"provider"`
	Org      string `json:"org"`
	Node     string `json:"node"`
	// Attestation is passed to the hub's Attestor.
	Attestation Attestation `json:"attestation"`
	// CSR is the PEM certificate signing request.
	CSR string `json:"csr"`
	// LifetimeSeconds asks for a certificate lifetime; 0 means the hub's
	// maximum, and the hub caps larger values at its maximum.
	LifetimeSeconds int64 `json:"lifetimeSeconds,omitempty"`
}

// LogValue logs the request with the attestation redacted (a JSON log
// handler would otherwise marshal its value).
func (req RegisterRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("provider", req.Provider), slog.String("org", req.Org), slog.String("node", req.Node),
		slog.String("attestation", redacted), slog.Int("csrBytes", len(req.CSR)), slog.Int64("lifetimeSeconds", req.LifetimeSeconds))
}

// RefreshRequest is the body of POST /instance/{provider}/{org}/{node}/{instanceId}.
//
// Proof of the current certificate is a signature, made with the current
// certificate's key, over the instance, the time, the lifetime asked for,
// and SHA-256 digests of the new CSR and of the current certificate (see
// NewRefreshRequest). We chose a signed request over mTLS because it
// survives TLS-terminating proxies and load balancers in front of the hub,
// needs no client-certificate setup on the listener, and works the same for
// an in-process Issuer; SignedAt within the hub's proof window bounds replay,
// and the hub API must be served over TLS as always.
//
//	{"csr":"-----BEGIN CERTIFICATE REQUEST-----...",
//	 "certificate":"-----BEGIN CERTIFICATE-----...",
//	 "signedAt":1767225600,"lifetimeSeconds":3600,"signature":"<base64>"}
type RefreshRequest struct {
	// CSR is the PEM request for the new certificate. Its key may differ
	// from the current one (key rotation).
	CSR string `json:"csr"`
	// Certificate is the PEM current certificate (the leaf only).
	Certificate string `json:"certificate"`
	// SignedAt is when the proof was made, in Unix seconds.
	SignedAt int64 `json:"signedAt"`
	// LifetimeSeconds is as in RegisterRequest.
	LifetimeSeconds int64 `json:"lifetimeSeconds,omitempty"`
	// Signature is the Ed25519 signature by the current certificate's key.
	Signature []byte `json:"signature"`
}

// IdentityResponse is the body of a successful register (201) or refresh
// (200): the new certificate and the CA chain that verifies it.
type IdentityResponse struct {
	Identity
	// Certificate is the PEM agent certificate.
	Certificate string `json:"certificate"`
	// CACertificates is the PEM chain from the issuing CA to the root.
	CACertificates string `json:"caCertificates"`
	// Serial is the certificate serial number in lowercase hex.
	Serial string `json:"serial"`
	// NotAfter is when the certificate expires.
	NotAfter time.Time `json:"notAfter"`
}

// refreshProofDomain separates refresh proofs from every other use of the
// agent's key.
const refreshProofDomain = "edgesecrets identity refresh v1"

// refreshProofMessage is what a refresh proof signs. Identity elements
// cannot hold '\n' (Validate), so the encoding is unambiguous.
func refreshProofMessage(id Identity, signedAt, lifetimeSeconds int64, csrDER, certDER []byte) []byte {
	csrSum := sha256.Sum256(csrDER)
	certSum := sha256.Sum256(certDER)
	var b bytes.Buffer
	for _, s := range []string{
		refreshProofDomain, id.Provider, id.Org, id.Node, id.InstanceID,
		strconv.FormatInt(signedAt, 10), strconv.FormatInt(lifetimeSeconds, 10),
		hex.EncodeToString(csrSum[:]), hex.EncodeToString(certSum[:]),
	} {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// NewRefreshRequest builds a refresh request for id: the new PEM CSR, the
// current certificate, and the proof signed with signingKey (the current
// certificate's Ed25519 key) at time now. lifetime 0 asks for the hub's
// maximum.
func NewRefreshRequest(signingKey crypto.Signer, id Identity, current *x509.Certificate, csrPEM []byte, now time.Time, lifetime time.Duration) (*RefreshRequest, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if current == nil {
		return nil, newError(OpRefresh, id, ErrInvalid, "no current certificate", nil)
	}
	pub, err := signingPublicKey(signingKey)
	if err != nil {
		return nil, newError(OpRefresh, id, ErrInvalid, err.Error(), nil)
	}
	if certKey, ok := current.PublicKey.(ed25519.PublicKey); !ok || !certKey.Equal(pub) {
		return nil, newError(OpRefresh, id, ErrInvalid, "the signing key is not the current certificate's key", nil)
	}
	csrDER, err := decodeSinglePEM(csrPEM, pemTypeCSR)
	if err != nil {
		return nil, newError(OpRefresh, id, ErrInvalid, err.Error(), nil)
	}
	req := &RefreshRequest{
		CSR:             string(csrPEM),
		Certificate:     string(EncodeCertificatesPEM(current)),
		SignedAt:        now.Unix(),
		LifetimeSeconds: int64(lifetime / time.Second),
	}
	msg := refreshProofMessage(id, req.SignedAt, req.LifetimeSeconds, csrDER, current.Raw)
	if req.Signature, err = signingKey.Sign(rand.Reader, msg, crypto.Hash(0)); err != nil {
		return nil, newError(OpRefresh, id, ErrInvalid, "signing the refresh proof", err)
	}
	return req, nil
}

// DecodeRegisterRequest decodes a JSON RegisterRequest of at most
// MaxBodyBytes: unknown fields, trailing data, a missing field or an
// oversized attestation are ErrInvalid. The CSR is only checked to be
// present; Issuer.Register checks it.
func DecodeRegisterRequest(r io.Reader) (*RegisterRequest, error) {
	var req RegisterRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, newError(OpRegister, Identity{}, ErrInvalid, "request body: "+err.Error(), tooLarge(err))
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	return &req, nil
}

func (req *RegisterRequest) check() error {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"provider", req.Provider}, {"org", req.Org}, {"node", req.Node},
		{"attestation", string(req.Attestation)}, {"csr", req.CSR},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	switch {
	case len(missing) > 0:
		return newError(OpRegister, Identity{}, ErrInvalid, fmt.Sprintf("request body: missing %q", missing), nil)
	case len(req.Attestation) > maxAttestationBytes:
		return newError(OpRegister, Identity{}, ErrInvalid, fmt.Sprintf("attestation is %d bytes, more than the %d allowed", len(req.Attestation), maxAttestationBytes), nil)
	case req.LifetimeSeconds < 0:
		return newError(OpRegister, Identity{}, ErrInvalid, "lifetimeSeconds is negative", nil)
	}
	return nil
}

// DecodeRefreshRequest decodes a JSON RefreshRequest of at most
// MaxBodyBytes, with the same strictness as DecodeRegisterRequest. The
// proof is checked by Issuer.Refresh.
func DecodeRefreshRequest(r io.Reader) (*RefreshRequest, error) {
	var req RefreshRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, newError(OpRefresh, Identity{}, ErrInvalid, "request body: "+err.Error(), tooLarge(err))
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	return &req, nil
}

func (req *RefreshRequest) check() error {
	var missing []string
	for _, f := range []struct {
		name  string
		empty bool
	}{
		{"csr", req.CSR == ""}, {"certificate", req.Certificate == ""},
		{"signedAt", req.SignedAt == 0}, {"signature", len(req.Signature) == 0},
	} {
		if f.empty {
			missing = append(missing, f.name)
		}
	}
	switch {
	case len(missing) > 0:
		return newError(OpRefresh, Identity{}, ErrInvalid, fmt.Sprintf("request body: missing %q", missing), nil)
	case len(req.Signature) != ed25519.SignatureSize:
		return newError(OpRefresh, Identity{}, ErrInvalid, fmt.Sprintf("signature is %d bytes, want %d", len(req.Signature), ed25519.SignatureSize), nil)
	case req.LifetimeSeconds < 0:
		return newError(OpRefresh, Identity{}, ErrInvalid, "lifetimeSeconds is negative", nil)
	}
	return nil
}

// DecodeIdentityResponse decodes a JSON IdentityResponse of at most
// MaxBodyBytes. The agent checks the certificate itself (Agent).
func DecodeIdentityResponse(r io.Reader) (*IdentityResponse, error) {
	var resp IdentityResponse
	if err := decodeJSON(r, &resp); err != nil {
		return nil, newError(OpDecode, Identity{}, ErrInvalid, "response body: "+err.Error(), tooLarge(err))
	}
	if resp.Certificate == "" || resp.CACertificates == "" {
		return nil, newError(OpDecode, resp.Identity, ErrInvalid, "response body: missing certificate or caCertificates", nil)
	}
	return &resp, nil
}

// tooLarge returns errTooLarge if err is it, else nil: the reason already
// says everything else.
func tooLarge(err error) error {
	if errors.Is(err, errTooLarge) {
		return errTooLarge
	}
	return nil
}

// decodeJSON decodes exactly one JSON value of at most MaxBodyBytes from r
// into v, refusing unknown fields. Its errors never quote the input.
func decodeJSON(r io.Reader, v any) error {
	body, err := io.ReadAll(io.LimitReader(r, MaxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return errTooLarge
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// jsonError describes a JSON decoding error by position and field, never by
// the input's content.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("JSON syntax error at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("field %q: expected %s", typ.Field, typ.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("unexpected end of JSON")
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", clip(field))
	}
	var b64 base64.CorruptInputError
	if errors.As(err, &b64) {
		return fmt.Errorf("a base64 field is not valid base64")
	}
	// Other errors (a bad time, for one) may quote the input.
	return fmt.Errorf("malformed JSON value")
}
