package identity

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// AgentOptions configures NewAgent.
type AgentOptions struct {
	// Instance is who the agent is. Required.
	Instance Identity
	// SigningKey is the agent's Ed25519 key (ed25519.PrivateKey, or any
	// crypto.Signer with an Ed25519 public key). Required.
	SigningKey crypto.Signer
	// EncryptionKey is the agent's HPKE public key, the one the agbot
	// seals to. Required.
	EncryptionKey hpke.PublicKey
	// Hub is the hub's identity API: a *Client, or an *Issuer in process.
	// Required.
	Hub Hub
	// Files, when set, is where each accepted certificate is installed;
	// its KeyPath must hold SigningKey.
	Files *Files
	// CACertificates pins the hub CA chain (root last). When empty, the
	// chain in the first registration response is trusted and pinned.
	CACertificates []*x509.Certificate
	// Lifetime is the certificate lifetime to ask for; 0 asks for the
	// hub's maximum.
	Lifetime time.Duration
	// Clock defaults to the system clock.
	Clock Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Format prints the options without the signing key.
func (o AgentOptions) Format(f fmt.State, _ rune) {
	// fmt.State buffers in memory; Format has no error to return.
	_, _ = fmt.Fprintf(f, "{Instance:%s SigningKey:%s Files:%v Lifetime:%v}", o.Instance, keyPresence(o.SigningKey), o.Files != nil, o.Lifetime)
}

// MarshalJSON encodes what LogValue logs: never the signing key.
func (o AgentOptions) MarshalJSON() ([]byte, error) { return logValueJSON(o.LogValue()) }

// LogValue logs the options without the signing key.
func (o AgentOptions) LogValue() slog.Value {
	return slog.GroupValue(slog.String("instance", o.Instance.String()), slog.String("signingKey", keyPresence(o.SigningKey)),
		slog.Bool("files", o.Files != nil), slog.Duration("lifetime", o.Lifetime))
}

// Agent is the node side of the identity protocol: it registers with the
// hub, renews its certificate, and accepts a certificate only if it names
// this instance, carries this agent's signing and encryption keys, and
// chains to the hub CA; then it installs it (Files) and uses it. It
// implements Renewer for a Refresher.
type Agent struct {
	id       Identity
	key      *heldKey
	pub      ed25519.PublicKey
	encKey   hpke.PublicKey
	hub      Hub
	files    *Files
	lifetime time.Duration
	clock    Clock
	log      *slog.Logger

	mu    sync.Mutex
	ca    *trust
	chain []*x509.Certificate // leaf first
}

// NewAgent returns an Agent without a certificate: call Register, or
// LoadCertificate after a restart.
func NewAgent(opts AgentOptions) (*Agent, error) {
	if err := opts.Instance.Validate(); err != nil {
		return nil, err
	}
	pub, err := signingPublicKey(opts.SigningKey)
	if err != nil {
		return nil, fmt.Errorf("identity: agent: %v", err)
	}
	switch {
	case opts.EncryptionKey == nil:
		return nil, fmt.Errorf("identity: agent: no encryption key")
	case opts.Hub == nil:
		return nil, fmt.Errorf("identity: agent: no Hub")
	}
	a := &Agent{
		id: opts.Instance, key: &heldKey{opts.SigningKey}, pub: pub, encKey: opts.EncryptionKey,
		hub: opts.Hub, files: opts.Files, lifetime: opts.Lifetime,
		clock: clockOrSystem(opts.Clock), log: opts.Logger,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if len(opts.CACertificates) > 0 {
		if a.ca, err = newTrust(opts.CACertificates); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Format prints the agent's instance, never its key.
func (a *Agent) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "Agent{%s}", a.id) // fmt.State buffers in memory; Format has no error to return
}

// LogValue logs the agent's instance, never its key.
func (a *Agent) LogValue() slog.Value { return slog.StringValue("agent " + a.id.String()) }

// Certificate returns the current certificate, or nil before the first
// registration.
func (a *Agent) Certificate() *x509.Certificate {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.chain) == 0 {
		return nil
	}
	return a.chain[0]
}

// CertificateChain returns the current certificate followed by the hub CA
// chain, or nil: what the agent presents to the agbot.
func (a *Agent) CertificateChain() []*x509.Certificate {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*x509.Certificate(nil), a.chain...)
}

// Register registers the instance with the provider's attestation and
// installs the first certificate.
func (a *Agent) Register(ctx context.Context, attestation Attestation) (*x509.Certificate, error) {
	csr, err := NewCSR(a.key.Signer, a.id, a.encKey)
	if err != nil {
		return nil, err
	}
	req, err := NewRegisterRequest(a.key.Signer, a.id, csr, attestation, a.clock.Now(), a.lifetime)
	if err != nil {
		return nil, err
	}
	resp, err := a.hub.Register(ctx, req)
	if err != nil {
		return nil, err
	}
	return a.accept(OpRegister, resp)
}

// Renew refreshes the certificate with proof of the current one and
// installs the new one. It implements Renewer.
func (a *Agent) Renew(ctx context.Context) (*x509.Certificate, error) {
	current := a.Certificate()
	if current == nil {
		return nil, newError(OpRefresh, a.id, ErrInvalid, "no certificate yet: register first", nil)
	}
	csr, err := NewCSR(a.key.Signer, a.id, a.encKey)
	if err != nil {
		return nil, err
	}
	req, err := NewRefreshRequest(a.key.Signer, a.id, current, csr, a.clock.Now(), a.lifetime)
	if err != nil {
		return nil, err
	}
	resp, err := a.hub.Refresh(ctx, a.id, req)
	if err != nil {
		return nil, err
	}
	return a.accept(OpRefresh, resp)
}

// LoadCertificate takes the certificate installed in Files (after a
// restart), with the same checks as a fresh one. An expired certificate is
// refused with ErrExpired: register again.
func (a *Agent) LoadCertificate() error {
	if a.files == nil {
		return newError(OpInstall, a.id, ErrInvalid, "the agent has no Files", nil)
	}
	chain, err := a.files.ReadCertificate()
	if err != nil {
		return err
	}
	_, err = a.install(OpInstall, chain[0], chain[1:], false)
	return err
}

// accept checks a hub response and installs its certificate.
func (a *Agent) accept(op string, resp *IdentityResponse) (*x509.Certificate, error) {
	leaves, err := ParseCertificatesPEM([]byte(resp.Certificate))
	if err != nil {
		return nil, withInstance(withOp(err, op), a.id)
	}
	if len(leaves) != 1 {
		return nil, newError(op, a.id, ErrInvalid, "the hub returned more than one certificate", nil)
	}
	caChain, err := ParseCertificatesPEM([]byte(resp.CACertificates))
	if err != nil {
		return nil, withInstance(withOp(err, op), a.id)
	}
	return a.install(op, leaves[0], caChain, true)
}

// install checks leaf against the agent's identity and keys and the hub CA,
// writes it to Files, and makes it current. store=false skips the write
// (the chain came from Files).
func (a *Agent) install(op string, leaf *x509.Certificate, caChain []*x509.Certificate, store bool) (*x509.Certificate, error) {
	got, err := inspectCertificate(leaf)
	if err != nil {
		return nil, newError(op, a.id, ErrInvalid, "the hub's certificate: "+err.Error(), nil)
	}
	switch {
	case got.Identity != a.id:
		return nil, newError(op, a.id, ErrInvalid, "the hub's certificate names "+got.Identity.String()+"; not installed", nil)
	case !got.SigningKey.Equal(a.pub):
		return nil, newError(op, a.id, ErrInvalid, "the hub's certificate is for another signing key; not installed", nil)
	case !sameEncryptionKey(got.EncryptionKey, a.encKey):
		return nil, newError(op, a.id, ErrInvalid, "the hub's certificate carries another encryption key; not installed", nil)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ca := a.ca
	if ca == nil {
		if ca, err = newTrust(caChain); err != nil {
			return nil, newError(op, a.id, ErrInvalid, "the hub sent no CA chain", nil)
		}
	}
	if err := ca.verify(leaf, caChain, a.clock.Now()); err != nil {
		return nil, newError(op, a.id, ErrUnauthenticated, "the hub's certificate: "+err.Error()+"; not installed", reasonSentinel(err))
	}
	chain := append([]*x509.Certificate{leaf}, caChain...)
	if store && a.files != nil {
		if err := a.files.WriteCertificate(chain); err != nil {
			return nil, err
		}
	}
	a.ca, a.chain = ca, chain
	a.log.Info("identity: certificate installed", "op", op, "instance", a.id.String(), "serial", got.Serial, "notAfter", leaf.NotAfter)
	return leaf, nil
}
