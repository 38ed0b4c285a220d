package identity

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// Body limits. A register or refresh body holds a CSR (about 2 KiB with an
// ML-KEM key), at most one certificate chain and an attestation document.
const (
	// maxBodyBytes bounds every JSON body this package decodes.
	maxBodyBytes = 64 << 10
	// maxAttestationBytes bounds the attestation document.
	maxAttestationBytes = 16 << 10
)

const redacted = edgesecrets.Redacted

// errTooLarge is the cause of a body over maxBodyBytes (HTTP 413).
var errTooLarge = jsonproblem.ErrTooLarge

// Attestation is the provider's attestation document for an instance (for
// example a signed instance identity document). It is a bearer credential
// while fresh, so it is the module's Sensitive string: printing it with
// fmt, slog or encoding/json shows [edgesecrets.Redacted]; only the request
// body the agent sends to the hub carries the value. string(a) gives the
// value to the hub's attestor (IssuerOptions.Attest).
type Attestation = edgesecrets.Sensitive

// Body returns the JSON body of POST /instance, the attestation included
// (json.Marshal of the request redacts it).
func (req *registerBody) Body() ([]byte, error) {
	type wire registerBody // the same fields, without this method set
	return json.Marshal(struct {
		*wire
		Attestation string `json:"attestation"`
	}{(*wire)(req), string(req.Attestation)})
}

// registerBody is the body of POST /instance: the node the agent claims
// to be, the provider's attestation, a CSR (see newCSR) naming the same
// provider, org and node plus the instance id, and a proof that the request
// is fresh and made by the holder of the CSR's key (see
// newRegisterBody).
//
//	{"provider":"openhorizon.factory1","org":"acme","node":"node-1",
//	 "attestation":"...","csr":"-----BEGIN CERTIFICATE REQUEST-----...",
//	 "lifetimeSeconds":3600,"nonce":"<base64>","signedAt":1767225600,
//	 "signature":"<base64>"}
type registerBody struct {
	// Provider, Org and Node are the claimed identity; the CSR must name
	// the same.
	Provider string `json:"provider"`
	Org      string `json:"org"`
	Node     string `json:"node"`
	// Attestation is passed to the hub's attestor (IssuerOptions.Attest).
	Attestation Attestation `json:"attestation"`
	// CSR is the PEM certificate signing request.
	CSR string `json:"csr"`
	// LifetimeSeconds asks for a certificate lifetime; 0 means the hub's
	// maximum, and the hub caps larger values at its maximum.
	LifetimeSeconds int64 `json:"lifetimeSeconds,omitempty"`
	// Proof: see requestProof.
	requestProof
}

// requestProof makes a register or refresh request single-use: a random
// nonce and the time, signed with the agent's key together with everything
// else in the request. The hub accepts a proof only within its proof window
// and only once (it remembers the nonce in its CertStore for that window),
// so a captured request replayed byte for byte, or with another nonce or
// time, changes nothing: ErrReplayed, or ErrUnauthenticated for an altered
// one.
type requestProof struct {
	// Nonce is 16 to 64 random bytes, new for every request.
	Nonce []byte `json:"nonce"`
	// SignedAt is when the proof was made, in Unix seconds.
	SignedAt int64 `json:"signedAt"`
	// Signature is the Ed25519 signature over the request (see
	// newRegisterBody and newRefreshBody for the key).
	Signature []byte `json:"signature"`
}

// Nonce lengths accepted in a requestProof.
const (
	minNonceBytes = 16
	maxNonceBytes = 64
)

// LogValue logs the request with the attestation redacted (a JSON log
// handler would otherwise marshal its value).
func (req registerBody) LogValue() slog.Value {
	return slog.GroupValue(slog.String("provider", req.Provider), slog.String("org", req.Org), slog.String("node", req.Node),
		slog.String("attestation", redacted), slog.Int("csrBytes", len(req.CSR)), slog.Int64("lifetimeSeconds", req.LifetimeSeconds))
}

// refreshBody is the body of POST /instance/{provider}/{org}/{node}/{instanceId}.
//
// Proof of the current certificate is a signature, made with the current
// certificate's key, over the instance, the time, a fresh nonce, the
// lifetime asked for, and SHA-256 digests of the new CSR and of the current
// certificate (see newRefreshBody). We chose a signed request over mTLS
// because it survives TLS-terminating proxies and load balancers in front
// of the hub, needs no client-certificate setup on the listener, and works
// the same for an in-process Issuer; the hub accepts each proof once and
// only within its proof window (requestProof), and the hub API must be
// served over TLS as always.
//
//	{"csr":"-----BEGIN CERTIFICATE REQUEST-----...",
//	 "certificate":"-----BEGIN CERTIFICATE-----...","lifetimeSeconds":3600,
//	 "nonce":"<base64>","signedAt":1767225600,"signature":"<base64>"}
type refreshBody struct {
	// CSR is the PEM request for the new certificate. Its key may differ
	// from the current one (key rotation).
	CSR string `json:"csr"`
	// Certificate is the PEM current certificate (the leaf only).
	Certificate string `json:"certificate"`
	// LifetimeSeconds is as in registerBody.
	LifetimeSeconds int64 `json:"lifetimeSeconds,omitempty"`
	// Proof: signed by the current certificate's key.
	requestProof
}

// responseBody is the body of a successful register (201) or refresh
// (200): the new certificate and the CA chain that verifies it.
type responseBody struct {
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

// Proof domains separate request proofs from every other use of the
// agent's key, and register proofs from refresh proofs.
const (
	registerProofDomain = "edgesecrets identity register v2"
	refreshProofDomain  = "edgesecrets identity refresh v2"
)

// proofMessage is what a request proof signs: the domain, then lines.
// Identity elements cannot hold '\n' (Validate) and every other line is a
// number or hex, so the encoding is unambiguous.
func proofMessage(domain string, p requestProof, lifetimeSeconds int64, lines ...string) []byte {
	var b bytes.Buffer
	for _, s := range append([]string{domain,
		strconv.FormatInt(p.SignedAt, 10), hex.EncodeToString(p.Nonce), strconv.FormatInt(lifetimeSeconds, 10),
	}, lines...) {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// digest is the hex SHA-256 of b, for a proof line.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// registerProofMessage is what a register proof signs: the claimed
// provider, org and node, the CSR (which names the instance id) and the
// attestation.
func registerProofMessage(req *registerBody, csrDER []byte) []byte {
	return proofMessage(registerProofDomain, req.requestProof, req.LifetimeSeconds,
		req.Provider, req.Org, req.Node, digest(csrDER), digest([]byte(req.Attestation)))
}

// refreshProofMessage is what a refresh proof signs.
func refreshProofMessage(id Identity, p requestProof, lifetimeSeconds int64, csrDER, certDER []byte) []byte {
	return proofMessage(refreshProofDomain, p, lifetimeSeconds,
		id.Provider, id.Org, id.Node, id.InstanceID, digest(csrDER), digest(certDER))
}

// newProof signs msg(p) with key, over a fresh nonce and now.
func newProof(key crypto.Signer, now time.Time, msg func(requestProof) []byte) (requestProof, error) {
	p := requestProof{Nonce: make([]byte, minNonceBytes), SignedAt: now.Unix()}
	rand.Read(p.Nonce)
	sig, err := key.Sign(rand.Reader, msg(p), crypto.Hash(0))
	if err != nil {
		return requestProof{}, err
	}
	p.Signature = sig
	return p, nil
}

// newRegisterBody builds a registration for id: the PEM CSR (newCSR for
// id), the provider's attestation, and the proof signed with signingKey
// (the CSR's Ed25519 key) at time now. lifetime 0 asks for the hub's
// maximum.
func newRegisterBody(signingKey crypto.Signer, id Identity, csrPEM []byte, attestation Attestation, now time.Time, lifetime time.Duration) (*registerBody, error) {
	if err := id.Validate(); err != nil {
		return nil, withOp(err, opRegister)
	}
	if _, err := signingPublicKey(signingKey); err != nil {
		return nil, newError(opRegister, id, edgesecrets.ErrInvalid, err.Error(), nil)
	}
	csrDER, err := decodeSinglePEM(csrPEM, pemTypeCSR)
	if err != nil {
		return nil, newError(opRegister, id, edgesecrets.ErrInvalid, err.Error(), nil)
	}
	req := &registerBody{
		Provider: id.Provider, Org: id.Org, Node: id.Node,
		Attestation: attestation, CSR: string(csrPEM), LifetimeSeconds: int64(lifetime / time.Second),
	}
	req.requestProof, err = newProof(signingKey, now, func(p requestProof) []byte {
		r := *req
		r.requestProof = p
		return registerProofMessage(&r, csrDER)
	})
	if err != nil {
		return nil, newError(opRegister, id, edgesecrets.ErrInvalid, "signing the register proof", err)
	}
	return req, nil
}

// newRefreshBody builds a refresh request for id: the new PEM CSR, the
// current certificate, and the proof signed with signingKey (the current
// certificate's Ed25519 key) at time now. lifetime 0 asks for the hub's
// maximum.
func newRefreshBody(signingKey crypto.Signer, id Identity, current *x509.Certificate, csrPEM []byte, now time.Time, lifetime time.Duration) (*refreshBody, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if current == nil {
		return nil, newError(opRefresh, id, edgesecrets.ErrInvalid, "no current certificate", nil)
	}
	pub, err := signingPublicKey(signingKey)
	if err != nil {
		return nil, newError(opRefresh, id, edgesecrets.ErrInvalid, err.Error(), nil)
	}
	if certKey, ok := current.PublicKey.(ed25519.PublicKey); !ok || !certKey.Equal(pub) {
		return nil, newError(opRefresh, id, edgesecrets.ErrInvalid, "the signing key is not the current certificate's key", nil)
	}
	csrDER, err := decodeSinglePEM(csrPEM, pemTypeCSR)
	if err != nil {
		return nil, newError(opRefresh, id, edgesecrets.ErrInvalid, err.Error(), nil)
	}
	req := &refreshBody{
		CSR:             string(csrPEM),
		Certificate:     string(encodeCertificatesPEM(current)),
		LifetimeSeconds: int64(lifetime / time.Second),
	}
	req.requestProof, err = newProof(signingKey, now, func(p requestProof) []byte {
		return refreshProofMessage(id, p, req.LifetimeSeconds, csrDER, current.Raw)
	})
	if err != nil {
		return nil, newError(opRefresh, id, edgesecrets.ErrInvalid, "signing the refresh proof", err)
	}
	return req, nil
}

// decodeRegisterBody decodes a JSON registerBody of at most
// maxBodyBytes: unknown fields, trailing data, a missing field or an
// oversized attestation are edgesecrets.ErrInvalid. The CSR is only checked to be
// present; Issuer.register checks it.
func decodeRegisterBody(r io.Reader) (*registerBody, error) {
	return decodeRequest[registerBody](opRegister, r)
}

func (req *registerBody) check() error {
	const op = opRegister
	switch {
	case len(req.Attestation) > maxAttestationBytes:
		return newError(op, Identity{}, edgesecrets.ErrInvalid, fmt.Sprintf("attestation is %d bytes, more than the %d allowed", len(req.Attestation), maxAttestationBytes), nil)
	case req.LifetimeSeconds < 0:
		return newError(op, Identity{}, edgesecrets.ErrInvalid, "lifetimeSeconds is negative", nil)
	}
	return req.requestProof.check(op, field{"provider", req.Provider == ""}, field{"org", req.Org == ""}, field{"node", req.Node == ""},
		field{"attestation", req.Attestation == ""}, field{"csr", req.CSR == ""})
}

// check reports missing fields (the proof's and the request's, given) and
// a malformed proof.
func (p *requestProof) check(op string, fields ...field) error {
	if err := missingFields(op, append(fields,
		field{"nonce", len(p.Nonce) == 0}, field{"signedAt", p.SignedAt == 0}, field{"signature", len(p.Signature) == 0},
	)); err != nil {
		return err
	}
	switch {
	case len(p.Nonce) < minNonceBytes || len(p.Nonce) > maxNonceBytes:
		return newError(op, Identity{}, edgesecrets.ErrInvalid, fmt.Sprintf("nonce is %d bytes, want %d to %d", len(p.Nonce), minNonceBytes, maxNonceBytes), nil)
	case len(p.Signature) != ed25519.SignatureSize:
		return newError(op, Identity{}, edgesecrets.ErrInvalid, fmt.Sprintf("signature is %d bytes, want %d", len(p.Signature), ed25519.SignatureSize), nil)
	}
	return nil
}

// decodeRefreshBody decodes a JSON refreshBody of at most
// maxBodyBytes, with the same strictness as decodeRegisterBody. The
// proof is checked by Issuer.refresh.
func decodeRefreshBody(r io.Reader) (*refreshBody, error) {
	return decodeRequest[refreshBody](opRefresh, r)
}

func (req *refreshBody) check() error {
	const op = opRefresh
	if req.LifetimeSeconds < 0 {
		return newError(op, Identity{}, edgesecrets.ErrInvalid, "lifetimeSeconds is negative", nil)
	}
	return req.requestProof.check(op, field{"csr", req.CSR == ""}, field{"certificate", req.Certificate == ""})
}

// decodeRequest decodes a request body and checks its fields.
func decodeRequest[T any, P interface {
	*T
	check() error
}](op string, r io.Reader) (*T, error) {
	var req T
	if err := decodeJSON(r, &req); err != nil {
		return nil, newError(op, Identity{}, edgesecrets.ErrInvalid, "request body: "+err.Error(), tooLarge(err))
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

// missingFields names every empty required field in one edgesecrets.ErrInvalid error.
func missingFields(op string, fields []field) error {
	var missing []string
	for _, f := range fields {
		if f.empty {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return newError(op, Identity{}, edgesecrets.ErrInvalid, fmt.Sprintf("request body: missing %q", missing), nil)
	}
	return nil
}

// decodeResponseBody decodes a JSON responseBody of at most
// maxBodyBytes. The agent checks the certificate itself (Agent).
func decodeResponseBody(r io.Reader) (*responseBody, error) {
	var resp responseBody
	if err := decodeJSON(r, &resp); err != nil {
		return nil, newError(opDecode, Identity{}, edgesecrets.ErrInvalid, "response body: "+err.Error(), tooLarge(err))
	}
	if resp.Certificate == "" || resp.CACertificates == "" {
		return nil, newError(opDecode, resp.Identity, edgesecrets.ErrInvalid, "response body: missing certificate or caCertificates", nil)
	}
	return &resp, nil
}

// decodeJSON decodes one JSON value of at most maxBodyBytes from r into v
// (jsonproblem.Decode: no unknown fields, no trailing data, errors never quote the
// input).
func decodeJSON(r io.Reader, v any) error { return jsonproblem.Decode(r, maxBodyBytes, v) }

// tooLarge returns errTooLarge if err is it, else nil: the reason already
// says everything else.
func tooLarge(err error) error {
	if errors.Is(err, errTooLarge) {
		return errTooLarge
	}
	return nil
}
