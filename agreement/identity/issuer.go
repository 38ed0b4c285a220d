package identity

import (
	"context"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/redact"
)

// AttestationRequest is what the Issuer asks IssuerOptions.Attest to
// confirm.
type AttestationRequest struct {
	// Instance is the identity the CSR names (and the request claims).
	Instance Identity
	// Attestation is the document the agent presented.
	Attestation Attestation
	// SigningKey and EncryptionKey are the agent's keys from the checked
	// CSR, and CSR its DER, for attestors that bind the document to the
	// agent's key.
	SigningKey    ed25519.PublicKey
	EncryptionKey hpke.PublicKey
	CSR           []byte
}

// Format implements fmt.Formatter: the fields as %v prints them, the
// attestation redacted, for every verb, and behind a pointer too.
func (req AttestationRequest) Format(f fmt.State, _ rune) {
	type plain AttestationRequest // without this method
	redact.Format(f, plain(req))
}

// policy holds the Issuer's limits.
type policy struct {
	maxLifetime, attestationFreshness, proofWindow, clockSkew time.Duration
}

// IssuerOptions configures NewIssuer.
type IssuerOptions struct {
	// Attest is the provider confirmation callback (Copper Argos): it
	// checks that the attestation document is genuine, was issued by the
	// provider for exactly this instance, and has not been used before if
	// the provider allows only one use, and returns when the provider made
	// the document; the Issuer refuses documents older than
	// AttestationFreshness. It returns an error to refuse; the error is
	// logged at the hub and never sent to the caller, and must not quote
	// the document. Required.
	Attest func(ctx context.Context, req AttestationRequest) (issuedAt time.Time, err error)
	// Signer issues certificates; zero means a new in-memory CA (NewCA),
	// which agents trust through the chain in their first response and
	// agbots in this process through Verifier. Pass NewCA's to share it.
	Signer CertSigner
	// Store keeps instance records; zero means a new NewMemoryCertStore().
	Store CertStore
	// MaxLifetime caps certificate lifetime; requests asking for nothing
	// get it. Zero means 24 h.
	MaxLifetime time.Duration
	// AttestationFreshness is the oldest attestation accepted. Zero means
	// 10 min.
	AttestationFreshness time.Duration
	// ProofWindow is how far a register or refresh proof's time may be
	// from now, either way. Zero means 5 min. The CertStore remembers each
	// accepted proof's nonce until its time + ProofWindow, so no proof is
	// accepted twice.
	ProofWindow time.Duration
	// ClockSkew is tolerated for times in the future (attestation
	// issuedAt) and backdates NotBefore. Zero means 1 min.
	ClockSkew time.Duration
	// AllowedKEMs lists acceptable HPKE KEM ids; empty means
	// ML-KEM-768+X25519 (0x647a) and DHKEM(X25519) (0x0020).
	AllowedKEMs []uint16
	// Logger defaults to discarding.
	Logger *slog.Logger
}

func (o IssuerOptions) policy() policy {
	def := func(d, v time.Duration) time.Duration {
		if d <= 0 {
			return v
		}
		return d
	}
	return policy{
		maxLifetime:          def(o.MaxLifetime, 24*time.Hour),
		attestationFreshness: def(o.AttestationFreshness, 10*time.Minute),
		proofWindow:          def(o.ProofWindow, 5*time.Minute),
		clockSkew:            def(o.ClockSkew, time.Minute),
	}
}

// Issuer is the hub side: it registers instances, refreshes and revokes
// their certificates, and keeps one Record per instance.
type Issuer struct {
	attest func(context.Context, AttestationRequest) (time.Time, error)
	signer CertSigner
	store  CertStore
	policy policy
	kems   kemPolicy
	trust  *trust
	log    *slog.Logger
}

// NewIssuer returns an Issuer.
func NewIssuer(opts IssuerOptions) (*Issuer, error) {
	if opts.Attest == nil {
		return nil, fmt.Errorf("identity: issuer: no Attest")
	}
	is := &Issuer{
		attest: opts.Attest,
		signer: opts.Signer,
		store:  opts.Store,
		policy: opts.policy(),
		kems:   newKEMPolicy(opts.AllowedKEMs),
		log:    opts.Logger,
	}
	if is.signer == nil {
		ca, err := NewCA(CAOptions{})
		if err != nil {
			return nil, err
		}
		is.signer = ca
	}
	if is.store == nil {
		is.store = NewMemoryCertStore()
	}
	if is.log == nil {
		is.log = slog.New(slog.DiscardHandler)
	}
	t, err := newTrust(is.signer.Chain())
	if err != nil {
		return nil, err
	}
	is.trust = t
	return is, nil
}

// Verifier returns a Verifier sharing the Issuer's CA chain, store and KEM
// policy: what an agbot in the hub process uses.
func (is *Issuer) Verifier() *Verifier {
	return &Verifier{trust: is.trust, store: is.store, kems: is.kems}
}

// register checks a registration and issues the instance's first
// certificate: the CSR passes parseCSR; it names the claimed provider, org
// and node; its HPKE KEM is allowed; the proof is signed by the CSR's key
// within the proof window; Attest confirms the attestation and it is
// fresh; the proof's nonce was never used (else ErrReplayed, and nothing
// changes); the instance is not revoked (tombstone) or registered to
// another node. Registering an active instance again, with a fresh
// attestation, replaces its record: earlier certificates stop verifying.
// The record is written before the certificate is returned; if the write
// fails there is no certificate.
func (is *Issuer) register(ctx context.Context, req *registerBody) (*responseBody, error) {
	const op = opRegister
	if req == nil {
		return nil, newError(op, Identity{}, edgesecrets.ErrInvalid, "no request", nil)
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	csr, err := parseCSR([]byte(req.CSR))
	if err != nil {
		return nil, withOp(err, op)
	}
	id := csr.Identity
	claimed := Identity{Provider: req.Provider, Org: req.Org, Node: req.Node, InstanceID: id.InstanceID}
	if claimed != id {
		return nil, newError(op, id, ErrForbidden, fmt.Sprintf("the CSR names provider %q org %q node %q but the request claims provider %q org %q node %q",
			id.Provider, id.Org, id.Node, clip(req.Provider), clip(req.Org), clip(req.Node)), nil)
	}
	if err := is.kems.check(csr.EncryptionKey); err != nil {
		return nil, newError(op, id, edgesecrets.ErrInvalid, err.Error(), nil)
	}
	if err := is.checkProof(op, id, req.requestProof, csr.SigningKey, registerProofMessage(req, csr.Raw)); err != nil {
		return nil, err
	}
	issuedAt, err := is.attest(ctx, AttestationRequest{Instance: id, Attestation: req.Attestation,
		SigningKey: csr.SigningKey, EncryptionKey: csr.EncryptionKey, CSR: csr.Raw})
	if err != nil {
		if ctx.Err() != nil {
			return nil, newError(op, id, nil, "attestation", ctx.Err())
		}
		return nil, newError(op, id, ErrForbidden, "the attestor refused the attestation", err)
	}
	now := time.Now()
	switch {
	case issuedAt.IsZero():
		return nil, newError(op, id, ErrForbidden, "the attestor did not say when the attestation was issued", nil)
	case issuedAt.After(now.Add(is.policy.clockSkew)):
		return nil, newError(op, id, ErrForbidden, fmt.Sprintf("attestation issued at %s is in the future", issuedAt.UTC().Format(time.RFC3339)), nil)
	case now.Sub(issuedAt) > is.policy.attestationFreshness:
		return nil, newError(op, id, ErrForbidden, fmt.Sprintf("attestation issued at %s is older than the %v freshness window", issuedAt.UTC().Format(time.RFC3339), is.policy.attestationFreshness), nil)
	}
	// Only an attested request spends a nonce, so strangers cannot fill
	// the store's nonce table.
	if err := is.useNonce(ctx, op, id, req.requestProof); err != nil {
		return nil, err
	}
	rec, err := is.store.Get(ctx, id.Provider, id.InstanceID)
	switch {
	case errors.Is(err, edgesecrets.ErrNotFound):
		rec = Record{}
	case err != nil:
		return nil, storeError(op, id, err)
	default:
		if err := checkRecord(rec, id); err != nil {
			return nil, newError(op, id, ErrForbidden, err.Error()+"; it cannot register again", reasonSentinel(err))
		}
	}
	return is.issue(ctx, op, csr, req.LifetimeSeconds, func(serial string, notAfter time.Time) Record {
		return Record{Instance: id, CurrentSerial: serial, NotAfter: notAfter, UpdatedAt: now, Revision: rec.Revision}
	})
}

// refresh issues a new certificate to an instance that proves it holds its
// current one (see refreshBody). id comes from the request path; the
// certificate and the CSR must name exactly it. A proof already used is
// refused with ErrReplayed before anything changes. The presented serial drives
// the record: the current serial shifts to previous and the new one becomes
// current; the previous serial (the agent lost the last response) is
// allowed and only current moves; any other serial means two holders of one
// identity, so the instance is revoked and the refresh refused.
func (is *Issuer) refresh(ctx context.Context, id Identity, req *refreshBody) (*responseBody, error) {
	const op = opRefresh
	if err := id.Validate(); err != nil {
		return nil, withOp(err, op)
	}
	if req == nil {
		return nil, newError(op, id, edgesecrets.ErrInvalid, "no request", nil)
	}
	if err := req.check(); err != nil {
		return nil, withInstance(err, id)
	}
	certs, err := parseCertificatesPEM([]byte(req.Certificate))
	if err != nil {
		return nil, withInstance(withOp(err, op), id)
	}
	if len(certs) != 1 {
		return nil, newError(op, id, edgesecrets.ErrInvalid, "certificate must be the leaf alone", nil)
	}
	leaf := certs[0]
	now := time.Now()
	if err := is.trust.verify(leaf, nil, now); err != nil {
		return nil, newError(op, id, ErrUnauthenticated, err.Error(), reasonSentinel(err))
	}
	current, err := inspectCertificate(leaf)
	if err != nil {
		return nil, newError(op, id, ErrUnauthenticated, err.Error(), nil)
	}
	csrDER, err := decodeSinglePEM([]byte(req.CSR), pemTypeCSR)
	if err != nil {
		return nil, newError(op, id, edgesecrets.ErrInvalid, "CSR "+err.Error(), nil)
	}
	if err := is.checkProof(op, id, req.requestProof, current.SigningKey, refreshProofMessage(id, req.requestProof, req.LifetimeSeconds, csrDER, leaf.Raw)); err != nil {
		return nil, err
	}
	if current.Identity != id {
		return nil, newError(op, id, ErrForbidden, "the certificate names instance "+current.Identity.String()+", not the one in the path", nil)
	}
	csr, err := parseCSR([]byte(req.CSR))
	if err != nil {
		return nil, withInstance(withOp(err, op), id)
	}
	if csr.Identity != id {
		return nil, newError(op, id, ErrForbidden, "the CSR names instance "+csr.Identity.String()+", not the one in the path", nil)
	}
	if err := is.kems.check(csr.EncryptionKey); err != nil {
		return nil, newError(op, id, edgesecrets.ErrInvalid, err.Error(), nil)
	}
	// Spent before the serial state machine runs: a replayed request must
	// not shift serials or revoke the instance.
	if err := is.useNonce(ctx, op, id, req.requestProof); err != nil {
		return nil, err
	}
	rec, err := activeRecord(ctx, is.store, op, id)
	if err != nil {
		return nil, err
	}
	var previous string
	switch current.Serial {
	case rec.CurrentSerial:
		previous = rec.CurrentSerial
	case rec.PreviousSerial:
		if rec.PreviousSerial == "" {
			return nil, is.revokeForSerial(ctx, id, current.Serial)
		}
		previous = rec.PreviousSerial
	default:
		return nil, is.revokeForSerial(ctx, id, current.Serial)
	}
	return is.issue(ctx, op, csr, req.LifetimeSeconds, func(serial string, notAfter time.Time) Record {
		next := rec
		next.CurrentSerial, next.PreviousSerial, next.NotAfter, next.UpdatedAt = serial, previous, notAfter, now
		return next
	})
}

// checkProof checks that a request proof was made within the proof window
// and that its signature over msg verifies with key.
func (is *Issuer) checkProof(op string, id Identity, p requestProof, key ed25519.PublicKey, msg []byte) error {
	now := time.Now()
	signedAt := time.Unix(p.SignedAt, 0)
	if signedAt.Before(now.Add(-is.policy.proofWindow)) || signedAt.After(now.Add(is.policy.proofWindow)) {
		return newError(op, id, ErrUnauthenticated, fmt.Sprintf("%s proof signed at %s is outside the %v window", op, signedAt.UTC().Format(time.RFC3339), is.policy.proofWindow), nil)
	}
	if !ed25519.Verify(key, msg, p.Signature) {
		whose := "the certificate's key"
		if op == opRegister {
			whose = "the CSR's key"
		}
		return newError(op, id, ErrUnauthenticated, op+" proof signature does not verify with "+whose, nil)
	}
	return nil
}

// useNonce spends a checked proof's nonce: a proof already used is
// refused with ErrReplayed.
func (is *Issuer) useNonce(ctx context.Context, op string, id Identity, p requestProof) error {
	err := is.store.UseNonce(ctx, NonceUse{
		Provider: id.Provider, InstanceID: id.InstanceID, Nonce: p.Nonce,
		// One second more: SignedAt is truncated to seconds.
		Expires: time.Unix(p.SignedAt, 0).Add(is.policy.proofWindow + time.Second),
		Now:     time.Now(),
	})
	if errors.Is(err, ErrReplayed) {
		is.log.WarnContext(ctx, "identity: refusing a replayed request", "op", op, "instance", id.String())
		return newError(op, id, ErrReplayed, "this request was already used once; make a new one", nil)
	}
	if err != nil {
		return storeError(op, id, err)
	}
	return nil
}

// revokeForSerial revokes id after a refresh presented serial, neither
// current nor previous, and returns the refusal.
func (is *Issuer) revokeForSerial(ctx context.Context, id Identity, serial string) error {
	reason := fmt.Sprintf("certificate serial %s is neither the current nor the previous serial: the identity is in use twice, instance revoked", serial)
	is.log.WarnContext(ctx, "identity: revoking instance: refresh with an unknown serial", "instance", id.String(), "serial", serial)
	if err := is.revoke(ctx, opRefresh, id); err != nil {
		// Still refuse; say the tombstone may be missing.
		is.log.ErrorContext(ctx, "identity: could not record the revocation", "instance", id.String(), "error", err)
		return newError(opRefresh, id, ErrForbidden, reason+" (recording the revocation failed)", ErrRevoked)
	}
	return newError(opRefresh, id, ErrForbidden, reason, ErrRevoked)
}

// Revoke revokes an instance: its record becomes a tombstone, so it can
// neither refresh nor register again and the Verifier refuses its
// certificates. Revoking a revoked instance succeeds. Callers authorise the
// request (Handler through its authorizeRevoke).
func (is *Issuer) Revoke(ctx context.Context, id Identity) error {
	if err := id.Validate(); err != nil {
		return withOp(err, opRevoke)
	}
	if err := is.revoke(ctx, opRevoke, id); err != nil {
		return err
	}
	is.log.InfoContext(ctx, "identity: instance revoked", "instance", id.String())
	return nil
}

// revoke marks the record revoked, re-reading it when a concurrent update
// wins (a refresh racing a revoke must not undo it).
func (is *Issuer) revoke(ctx context.Context, op string, id Identity) error {
	const attempts = 5
	for range attempts {
		rec, err := is.store.Get(ctx, id.Provider, id.InstanceID)
		if err != nil {
			return storeError(op, id, err)
		}
		if rec.Instance != id {
			return newError(op, id, ErrForbidden, fmt.Sprintf("instance %s/%s is registered to org %q node %q", id.Provider, id.InstanceID, rec.Instance.Org, rec.Instance.Node), nil)
		}
		if rec.Revoked {
			return nil
		}
		now := time.Now()
		rec.Revoked, rec.RevokedAt, rec.UpdatedAt = true, now, now
		_, err = is.store.Put(ctx, rec)
		if errors.Is(err, edgesecrets.ErrConflict) {
			continue
		}
		if err != nil {
			return storeError(op, id, err)
		}
		return nil
	}
	return newError(op, id, edgesecrets.ErrConflict, fmt.Sprintf("the record kept changing over %d attempts", attempts), nil)
}

// issue signs a certificate for csr, checks what the signer returned,
// writes the record next(serial, notAfter), and only then returns the
// certificate.
func (is *Issuer) issue(ctx context.Context, op string, csr *parsedCSR, lifetimeSeconds int64, next func(serial string, notAfter time.Time) Record) (*responseBody, error) {
	id := csr.Identity
	now := time.Now()
	lifetime := is.policy.maxLifetime
	if lifetimeSeconds > 0 && lifetimeSeconds < int64(lifetime/time.Second) {
		lifetime = time.Duration(lifetimeSeconds) * time.Second
	}
	exts, err := agentExtensions(op, id, csr.EncryptionKey)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: id.Node},
		NotBefore:             now.Add(-is.policy.clockSkew),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		ExtraExtensions:       exts,
	}
	der, err := is.signer.Sign(ctx, tmpl, csr.SigningKey)
	if err != nil {
		if ctx.Err() != nil {
			return nil, newError(op, id, nil, "signing", ctx.Err())
		}
		return nil, newError(op, id, edgesecrets.ErrUnavailable, "the certificate signer failed", err)
	}
	cert, err := is.checkIssued(der, csr, now.Add(lifetime))
	if err != nil {
		return nil, newError(op, id, edgesecrets.ErrUnavailable, "the certificate signer returned a bad certificate: "+err.Error(), nil)
	}
	serial := serialString(cert)
	rec := next(serial, cert.NotAfter)
	if serial == rec.PreviousSerial {
		return nil, newError(op, id, edgesecrets.ErrUnavailable, "the certificate signer reused serial "+serial, nil)
	}
	if _, err := is.store.Put(ctx, rec); err != nil {
		// The certificate is dropped: no record, no certificate.
		return nil, storeError(op, id, err)
	}
	is.log.InfoContext(ctx, "identity: certificate issued", "op", op, "instance", id.String(), "serial", serial, "notAfter", cert.NotAfter)
	return &responseBody{
		Identity:       id,
		Certificate:    string(encodeCertificatesPEM(cert)),
		CACertificates: string(encodeCertificatesPEM(is.trust.chain...)),
		Serial:         serial,
		NotAfter:       cert.NotAfter,
	}, nil
}

// checkIssued parses what the signer returned and checks it is what was
// asked for: the CSR's keys and identity, chaining to the CA, not outliving
// the policy.
func (is *Issuer) checkIssued(der []byte, csr *parsedCSR, latest time.Time) (*x509.Certificate, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("not a certificate")
	}
	got, err := inspectCertificate(cert)
	if err != nil {
		return nil, err
	}
	switch {
	case got.Identity != csr.Identity:
		return nil, fmt.Errorf("it names %s", got.Identity)
	case !got.SigningKey.Equal(csr.SigningKey), !sameEncryptionKey(got.EncryptionKey, csr.EncryptionKey):
		return nil, fmt.Errorf("its keys are not the CSR's")
	case cert.NotAfter.After(latest):
		return nil, fmt.Errorf("it is valid until %s, past the policy's %s", cert.NotAfter.UTC().Format(time.RFC3339), latest.UTC().Format(time.RFC3339))
	case got.Serial == "":
		return nil, fmt.Errorf("it has no serial")
	}
	if err := is.trust.verify(cert, nil, time.Now()); err != nil {
		return nil, err
	}
	return cert, nil
}

// withOp sets the operation of an *Error from a shared decoder.
func withOp(err error, op string) error {
	if e, ok := errors.AsType[*Error](err); ok {
		c := *e
		c.Op = op
		return &c
	}
	return err
}

// withInstance sets the instance of an *Error that has none.
func withInstance(err error, id Identity) error {
	if e, ok := errors.AsType[*Error](err); ok && e.Instance.isZero() {
		c := *e
		c.Instance = id
		return &c
	}
	return err
}
