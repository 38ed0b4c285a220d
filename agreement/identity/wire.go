package identity

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
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
var errTooLarge = jsonproblem.ErrTooLarge

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
	return decodeRequest[RegisterRequest](OpRegister, r)
}

func (req *RegisterRequest) check() error {
	const op = OpRegister
	switch {
	case len(req.Attestation) > maxAttestationBytes:
		return newError(op, Identity{}, ErrInvalid, fmt.Sprintf("attestation is %d bytes, more than the %d allowed", len(req.Attestation), maxAttestationBytes), nil)
	case req.LifetimeSeconds < 0:
		return newError(op, Identity{}, ErrInvalid, "lifetimeSeconds is negative", nil)
	}
	return missingFields(op, []field{
		{"provider", req.Provider == ""}, {"org", req.Org == ""}, {"node", req.Node == ""},
		{"attestation", req.Attestation == ""}, {"csr", req.CSR == ""},
	})
}

// DecodeRefreshRequest decodes a JSON RefreshRequest of at most
// MaxBodyBytes, with the same strictness as DecodeRegisterRequest. The
// proof is checked by Issuer.Refresh.
func DecodeRefreshRequest(r io.Reader) (*RefreshRequest, error) {
	return decodeRequest[RefreshRequest](OpRefresh, r)
}

func (req *RefreshRequest) check() error {
	const op = OpRefresh
	if err := missingFields(op, []field{
		{"csr", req.CSR == ""}, {"certificate", req.Certificate == ""},
		{"signedAt", req.SignedAt == 0}, {"signature", len(req.Signature) == 0},
	}); err != nil {
		return err
	}
	switch {
	case len(req.Signature) != ed25519.SignatureSize:
		return newError(op, Identity{}, ErrInvalid, fmt.Sprintf("signature is %d bytes, want %d", len(req.Signature), ed25519.SignatureSize), nil)
	case req.LifetimeSeconds < 0:
		return newError(op, Identity{}, ErrInvalid, "lifetimeSeconds is negative", nil)
	}
	return nil
}

// decodeRequest decodes a request body and checks its fields.
func decodeRequest[T any, P interface {
	*T
	check() error
}](op string, r io.Reader) (*T, error) {
	var req T
	if err := decodeJSON(r, &req); err != nil {
		return nil, newError(op, Identity{}, ErrInvalid, "request body: "+err.Error(), tooLarge(err))
	}
	if err := P(&req).check(); err != nil {
		return nil, err
	}
	return &req, nil
}

// field is a required request field and whether it is empty.
type field struct {
	name  string
	empty bool
}

// missingFields names every empty required field in one ErrInvalid error.
func missingFields(op string, fields []field) error {
	var missing []string
	for _, f := range fields {
		if f.empty {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return newError(op, Identity{}, ErrInvalid, fmt.Sprintf("request body: missing %q", missing), nil)
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

// decodeJSON decodes one JSON value of at most MaxBodyBytes from r into v
// (jsonproblem.Decode: no unknown fields, no trailing data, errors never quote the
// input).
func decodeJSON(r io.Reader, v any) error { return jsonproblem.Decode(r, MaxBodyBytes, v) }

// tooLarge returns errTooLarge if err is it, else nil: the reason already
// says everything else.
func tooLarge(err error) error {
	if errors.Is(err, errTooLarge) {
		return errTooLarge
	}
	return nil
}
