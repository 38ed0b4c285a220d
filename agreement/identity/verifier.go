package identity

import (
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
)

// defaultKEMs are the HPKE KEMs accepted when a policy lists none: the
// post-quantum hybrid ML-KEM-768+X25519 (0x647a, the agreement package's
// default) and classic DHKEM(X25519) (0x0020).
func defaultKEMs() []uint16 {
	return []uint16{hpke.MLKEM768X25519().ID(), hpke.DHKEM(ecdh.X25519()).ID()}
}

// kemPolicy is a set of allowed HPKE KEM ids.
type kemPolicy []uint16

func newKEMPolicy(ids []uint16) kemPolicy {
	if len(ids) == 0 {
		return defaultKEMs()
	}
	return slices.Clone(ids)
}

func (p kemPolicy) check(key hpke.PublicKey) error {
	if id := key.KEM().ID(); !slices.Contains(p, id) {
		allowed := make([]string, len(p))
		for i, a := range p {
			allowed[i] = fmt.Sprintf("%#04x", a)
		}
		return fmt.Errorf("HPKE KEM %#04x is not allowed here (allowed: %s)", id, strings.Join(allowed, ", "))
	}
	return nil
}

// trust verifies agent certificates against the hub CA chain.
type trust struct {
	roots, intermediates *x509.CertPool
	chain                []*x509.Certificate
}

func newTrust(chain []*x509.Certificate) (*trust, error) {
	if len(chain) == 0 || slices.Contains(chain, nil) {
		return nil, fmt.Errorf("identity: no CA certificates")
	}
	t := &trust{roots: x509.NewCertPool(), intermediates: x509.NewCertPool(), chain: slices.Clone(chain)}
	t.roots.AddCert(chain[len(chain)-1])
	for _, c := range chain[:len(chain)-1] {
		t.intermediates.AddCert(c)
	}
	return t, nil
}

// verify checks that leaf is valid at now and chains to the root for
// client authentication. extra are intermediates the caller presented.
// Errors are reasons; ErrExpired is wrapped when leaf is past NotAfter.
func (t *trust) verify(leaf *x509.Certificate, extra []*x509.Certificate, now time.Time) error {
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("%w at %s", ErrExpired, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return fmt.Errorf("certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	inter := t.intermediates
	if len(extra) > 0 {
		inter = inter.Clone()
		for _, c := range extra {
			inter.AddCert(c)
		}
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         t.roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("certificate does not chain to the hub CA")
	}
	return nil
}

// VerifierOptions configures NewVerifier.
type VerifierOptions struct {
	// CACertificates is the hub CA chain, issuing CA first, root last
	// (the CertSigner's Chain, pinned at deployment). Required.
	CACertificates []*x509.Certificate
	// Store holds the instance records the Issuer writes. Required.
	Store CertStore
	// AllowedKEMs lists acceptable HPKE KEM ids; empty means
	// ML-KEM-768+X25519 (0x647a) and DHKEM(X25519) (0x0020).
	AllowedKEMs []uint16
}

// Verifier is what the agbot asks before sealing secrets to an agent: is
// this certificate from our hub CA, unexpired, and for an instance whose
// record is active with this certificate's serial current or previous? If
// so it hands out the agent's keys.
type Verifier struct {
	trust *trust
	store CertStore
	kems  kemPolicy
}

// NewVerifier returns a Verifier.
func NewVerifier(opts VerifierOptions) (*Verifier, error) {
	t, err := newTrust(opts.CACertificates)
	if err != nil {
		return nil, err
	}
	if opts.Store == nil {
		return nil, fmt.Errorf("identity: verifier: no CertStore")
	}
	return &Verifier{trust: t, store: opts.Store, kems: newKEMPolicy(opts.AllowedKEMs)}, nil
}

// VerifiedIdentity is what Verify vouches for.
type VerifiedIdentity struct {
	// Instance is the identity the certificate names.
	Instance Identity
	// Serial is the certificate serial (lowercase hex).
	Serial string
	// NotBefore is when the certificate became valid.
	NotBefore time.Time
	// NotAfter is when the certificate expires; re-verify after it.
	NotAfter time.Time
	// SigningKey is the agent's Ed25519 public key: the key that verifies
	// the agent's signatures (replies, envelopes it sends).
	SigningKey ed25519.PublicKey
	// EncryptionKey is the agent's HPKE public key: the key to seal to.
	EncryptionKey hpke.PublicKey
}

// PublicKeys returns the agent's agreement key set: the keys the agbot
// seals to (agreement.Seal of a proposal or an update) and whose
// signatures it accepts on the agent's replies.
func (v VerifiedIdentity) PublicKeys() (*agreement.PublicKeys, error) {
	return agreement.NewPublicKeys(v.SigningKey, v.EncryptionKey)
}

// Verify checks an agent certificate chain in PEM (1 to 8 "CERTIFICATE"
// blocks, at most 32 KiB: the leaf first, then any intermediates the agent
// presented; see encodeCertificatesPEM) and returns what it vouches for.
// Refusals match edgesecrets.ErrInvalid (not such a PEM chain),
// ErrUnauthenticated (not from the hub CA, or expired),
// ErrForbidden (ErrRevoked when the instance is revoked; a serial neither
// current nor previous; a record for another node),
// edgesecrets.ErrNotFound (no record, with ErrUnknownInstance) or
// edgesecrets.ErrUnavailable (the store failed). A refusal for no record,
// a revoked instance or an expired certificate matches ErrIdentityLost:
// the agbot tells the agent, whose Agent.Refused takes it.
func (v *Verifier) Verify(ctx context.Context, chainPEM []byte) (*VerifiedIdentity, error) {
	certs, err := parseCertificatesPEM(chainPEM)
	if err != nil {
		return nil, withOp(err, opVerify)
	}
	return v.verify(ctx, certs...)
}

// verify is Verify for a parsed chain, leaf first.
func (v *Verifier) verify(ctx context.Context, certs ...*x509.Certificate) (*VerifiedIdentity, error) {
	if len(certs) == 0 || certs[0] == nil {
		return nil, newError(opVerify, Identity{}, edgesecrets.ErrInvalid, "no certificate", nil)
	}
	leaf := certs[0]
	if err := v.trust.verify(leaf, certs[1:], time.Now()); err != nil {
		return nil, newError(opVerify, Identity{}, ErrUnauthenticated, err.Error(), reasonSentinel(err))
	}
	c, err := inspectCertificate(leaf)
	if err != nil {
		return nil, newError(opVerify, Identity{}, ErrUnauthenticated, err.Error(), nil)
	}
	id := c.Identity
	if err := v.kems.check(c.EncryptionKey); err != nil {
		return nil, newError(opVerify, id, ErrForbidden, err.Error(), nil)
	}
	rec, err := activeRecord(ctx, v.store, opVerify, id)
	if err != nil {
		return nil, err
	}
	if c.Serial != rec.CurrentSerial && (rec.PreviousSerial == "" || c.Serial != rec.PreviousSerial) {
		return nil, newError(opVerify, id, ErrForbidden, fmt.Sprintf("certificate serial %s is neither the current nor the previous serial of the instance", c.Serial), nil)
	}
	return &VerifiedIdentity{Instance: id, Serial: c.Serial, NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter, SigningKey: c.SigningKey, EncryptionKey: c.EncryptionKey}, nil
}

// activeRecord reads id's record and refuses one that is missing, revoked
// or for another node.
func activeRecord(ctx context.Context, store CertStore, op string, id Identity) (Record, error) {
	rec, err := store.Get(ctx, id.Provider, id.InstanceID)
	if err != nil {
		return Record{}, storeError(op, id, err)
	}
	if err := checkRecord(rec, id); err != nil {
		return Record{}, newError(op, id, ErrForbidden, err.Error(), reasonSentinel(err))
	}
	return rec, nil
}

// checkRecord refuses a record that is revoked or names another node.
func checkRecord(rec Record, id Identity) error {
	if rec.Revoked {
		return fmt.Errorf("%w at %s", ErrRevoked, rec.RevokedAt.UTC().Format(time.RFC3339))
	}
	if rec.Instance != id {
		return fmt.Errorf("instance %s/%s is registered to org %q node %q", id.Provider, id.InstanceID, rec.Instance.Org, rec.Instance.Node)
	}
	return nil
}

// reasonSentinel returns ErrRevoked, ErrExpired or ErrUnknownInstance
// when err wraps one, so the *Error built from err's text still matches it.
func reasonSentinel(err error) error {
	for _, s := range []error{ErrRevoked, ErrExpired, ErrUnknownInstance} {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// storeError wraps a CertStore failure: NotFound and Conflict keep their
// kind, a context error stays a context error, anything else is
// edgesecrets.ErrUnavailable. The cause is kept for logs but not shown to callers.
func storeError(op string, id Identity, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return newError(op, id, nil, "record store", err)
	case errors.Is(err, edgesecrets.ErrNotFound):
		return newError(op, id, edgesecrets.ErrNotFound, "no record for the instance", ErrUnknownInstance)
	case errors.Is(err, edgesecrets.ErrConflict):
		return newError(op, id, edgesecrets.ErrConflict, "the instance record changed concurrently; retry", nil)
	}
	return newError(op, id, edgesecrets.ErrUnavailable, "record store failed", err)
}
