package identity

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
)

// AgentOptions configures NewAgent.
type AgentOptions struct {
	// Instance is who the agent is. Required.
	Instance Identity
	// SigningKey is the agent's Ed25519 key (ed25519.PrivateKey, or any
	// crypto.Signer with an Ed25519 public key), e.g. the Signer of the
	// agent's agreement.PrivateKeys. Required unless KeyFile holds it.
	SigningKey crypto.Signer
	// EncryptionKey is the agent's HPKE public key, the one the agbot
	// seals to, e.g. the EncryptionKey of the agent's
	// agreement.PublicKeys. Required.
	EncryptionKey hpke.PublicKey
	// Hub is the hub's identity API over HTTP. Hub or Issuer is required.
	Hub *Client
	// Issuer is the hub in process, used instead of Hub.
	Issuer *Issuer
	// KeyFile and CertFile, when set, are where the agent keeps its key
	// and each accepted certificate, the pair a TLS stack loads. KeyFile
	// is a PKCS #8 PEM file, mode 0600 (a file group or others may read
	// is refused): with SigningKey zero, NewAgent reads the key from it
	// (after a restart); with an ed25519.PrivateKey, NewAgent writes the
	// key to it unless it already holds it. CertFile gets the PEM chain
	// (leaf, then the CA chain) of each accepted certificate, and only if
	// the leaf is for the key in KeyFile. Both are written atomically
	// (temporary file, fsync, rename), so a crash leaves the old file or
	// the new one. LoadCertificate reads CertFile after a restart.
	KeyFile, CertFile string
	// CACertificates pins the hub CA chain (root last). When empty, the
	// chain in the first registration response is trusted and pinned.
	CACertificates []*x509.Certificate
	// Lifetime is the certificate lifetime to ask for; 0 asks for the
	// hub's maximum.
	Lifetime time.Duration
	// InitialBackoff is Run's delay after the first failed renewal or
	// registration; zero means 5 s. Each further failure doubles it, up to
	// MaxBackoff (zero means 5 min).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// Jitter returns a number in [0, 1) choosing where in [d/2, d) a
	// retry delay of base d falls; default math/rand/v2.Float64.
	Jitter func() float64
	// OnExpiryWarning, when set, is called when a renewal in Run failed
	// and the certificate expires (notAfter) before the next attempt
	// (nextAttempt): unless the hub recovers sooner, the agent loses its
	// identity and must register again. err is the last failure. The
	// warning is logged too.
	OnExpiryWarning func(notAfter, nextAttempt time.Time, err error)
	// Attest, when set, keeps the agent registered on its own: Run
	// registers when the agent has no certificate, and registers again
	// whenever its identity is lost, that is when a renewal, or an agbot
	// through Refused, answers that the hub has no record for the
	// instance, that it is revoked or that the certificate expired (errors
	// matching ErrIdentityLost). Each attempt calls Attest for a fresh
	// attestation and sends a new request with a fresh nonce; failures are
	// retried with the backoff above, capped, without end. Each loss is
	// logged once at WARN, not once per attempt. Without Attest, Run
	// returns such an error and the caller registers.
	Attest func(ctx context.Context) (Attestation, error)
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Format prints the options without the signing key.
func (o AgentOptions) Format(f fmt.State, _ rune) {
	// fmt.State buffers in memory; Format has no error to return.
	_, _ = fmt.Fprintf(f, "{Instance:%s SigningKey:%s KeyFile:%q CertFile:%q Lifetime:%v}", o.Instance, keyPresence(o.SigningKey), o.KeyFile, o.CertFile, o.Lifetime)
}

// MarshalJSON encodes what LogValue logs: never the signing key.
func (o AgentOptions) MarshalJSON() ([]byte, error) { return logValueJSON(o.LogValue()) }

// LogValue logs the options without the signing key.
func (o AgentOptions) LogValue() slog.Value {
	return slog.GroupValue(slog.String("instance", o.Instance.String()), slog.String("signingKey", keyPresence(o.SigningKey)),
		slog.String("keyFile", o.KeyFile), slog.String("certFile", o.CertFile), slog.Duration("lifetime", o.Lifetime))
}

// Agent is the node side of the identity protocol: it registers with the
// hub, renews its certificate, and accepts a certificate only if it names
// this instance, carries this agent's signing and encryption keys, and
// chains to the hub CA; then it installs it (AgentOptions.CertFile) and
// uses it.
type Agent struct {
	id       Identity
	key      *heldKey
	pub      ed25519.PublicKey
	encKey   hpke.PublicKey
	hub      hub
	files    *files
	lifetime time.Duration
	renewal  refresherOptions
	attest   func(ctx context.Context) (Attestation, error)
	lost     chan error // Refused's reports, for Run; holds at most one
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
	if (opts.KeyFile == "") != (opts.CertFile == "") {
		return nil, fmt.Errorf("identity: agent: KeyFile and CertFile go together")
	}
	if opts.KeyFile != "" {
		key, err := keyForFile(opts.KeyFile, opts.SigningKey)
		if err != nil {
			return nil, err
		}
		opts.SigningKey = key
	}
	pub, err := signingPublicKey(opts.SigningKey)
	if err != nil {
		return nil, fmt.Errorf("identity: agent: %v", err)
	}
	var h hub
	switch {
	case opts.Hub != nil && opts.Issuer != nil:
		return nil, fmt.Errorf("identity: agent: both a Hub and an Issuer")
	case opts.Hub != nil:
		h = opts.Hub
	case opts.Issuer != nil:
		h = opts.Issuer
	}
	switch {
	case opts.EncryptionKey == nil:
		return nil, fmt.Errorf("identity: agent: no encryption key")
	case h == nil:
		return nil, fmt.Errorf("identity: agent: no Hub or Issuer")
	}
	a := &Agent{
		id: opts.Instance, key: &heldKey{opts.SigningKey}, pub: pub, encKey: opts.EncryptionKey,
		hub: h, lifetime: opts.Lifetime, attest: opts.Attest, lost: make(chan error, 1), log: opts.Logger,
		renewal: refresherOptions{initial: opts.InitialBackoff, max: opts.MaxBackoff, jitter: opts.Jitter, onWarning: opts.OnExpiryWarning},
	}
	if opts.KeyFile != "" {
		a.files = &files{keyPath: opts.KeyFile, certPath: opts.CertFile}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.renewal.log = a.log
	if len(opts.CACertificates) > 0 {
		if a.ca, err = newTrust(opts.CACertificates); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// keyForFile returns the agent's signing key for a KeyFile: the key read
// from it when signingKey is nil, else signingKey, written to the file
// unless the file already holds it.
func keyForFile(path string, signingKey crypto.Signer) (crypto.Signer, error) {
	if signingKey == nil {
		return readKeyFile(path)
	}
	key, ok := signingKey.(ed25519.PrivateKey)
	if !ok {
		return nil, newError(opInstall, Identity{}, edgesecrets.ErrInvalid, fmt.Sprintf("a KeyFile needs an ed25519.PrivateKey SigningKey (or none, to read it), not a %T", signingKey), nil)
	}
	stored, err := readKeyFile(path)
	if err == nil && stored.Equal(key) {
		clear(stored)
		return key, nil
	}
	clear(stored)
	if err := writeKeyFile(path, key); err != nil {
		return nil, err
	}
	return key, nil
}

// Format prints the agent's instance, never its key.
func (a *Agent) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "Agent{%s}", a.id) // fmt.State buffers in memory; Format has no error to return
}

// LogValue logs the agent's instance, never its key.
func (a *Agent) LogValue() slog.Value { return slog.StringValue("agent " + a.id.String()) }

// certificate returns the current certificate, or nil before the first
// registration.
func (a *Agent) certificate() *x509.Certificate {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.chain) == 0 {
		return nil
	}
	return a.chain[0]
}

// CertificateChain returns the current certificate followed by the hub CA
// chain as PEM "CERTIFICATE" blocks, or nil before the first registration:
// what the agent presents to the agbot (Verifier.Verify).
func (a *Agent) CertificateChain() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.chain) == 0 {
		return nil
	}
	return encodeCertificatesPEM(a.chain...)
}

// Register registers the instance with the provider's attestation and
// installs the first certificate.
func (a *Agent) Register(ctx context.Context, attestation Attestation) (*x509.Certificate, error) {
	csr, err := newCSR(a.key.Signer, a.id, a.encKey)
	if err != nil {
		return nil, err
	}
	req, err := newRegisterBody(a.key.Signer, a.id, csr, attestation, time.Now(), a.lifetime)
	if err != nil {
		return nil, err
	}
	resp, err := a.hub.register(ctx, req)
	if err != nil {
		return nil, err
	}
	cert, err := a.accept(opRegister, resp)
	if err == nil {
		// A loss reported before this registration was about a
		// certificate that is gone now.
		select {
		case stale := <-a.lost:
			_ = stale // drained: it named the old certificate
		default:
		}
	}
	return cert, err
}

// Refused tells the agent that an agbot, or anything else that verifies
// its certificate (Verifier.Verify), refused it with err. It reports
// whether err says the identity is lost (errors.Is(err,
// ErrIdentityLost): no record for the instance, revoked, or expired);
// then Run, given AgentOptions.Attest, registers again: at once, or after
// the backoff when it registered again only moments ago. Any other error
// changes nothing: the caller retries as it would. Refused never blocks;
// reports that arrive while a registration is due count as one.
func (a *Agent) Refused(err error) bool {
	if !errors.Is(err, ErrIdentityLost) {
		return false
	}
	select {
	case a.lost <- err:
	default:
	}
	return true
}

// reregister registers with a fresh attestation from AgentOptions.Attest.
func (a *Agent) reregister(ctx context.Context) (*x509.Certificate, error) {
	attestation, err := a.attest(ctx)
	if err != nil {
		return nil, newError(opRegister, a.id, edgesecrets.ErrUnavailable, "getting an attestation", err)
	}
	return a.Register(ctx, attestation)
}

// Renew refreshes the certificate now, with proof of the current one, and
// installs the new one. Run does it when it is due.
func (a *Agent) Renew(ctx context.Context) (*x509.Certificate, error) {
	current := a.certificate()
	if current == nil {
		return nil, newError(opRefresh, a.id, edgesecrets.ErrInvalid, "no certificate yet: register first", nil)
	}
	csr, err := newCSR(a.key.Signer, a.id, a.encKey)
	if err != nil {
		return nil, err
	}
	req, err := newRefreshBody(a.key.Signer, a.id, current, csr, time.Now(), a.lifetime)
	if err != nil {
		return nil, err
	}
	resp, err := a.hub.refresh(ctx, a.id, req)
	if err != nil {
		return nil, err
	}
	return a.accept(opRefresh, resp)
}

// LoadCertificate takes the certificate installed at CertFile (after a
// restart), with the same checks as a fresh one. An expired certificate is
// refused (ErrUnauthenticated, "certificate expired"): register again.
func (a *Agent) LoadCertificate() error {
	if a.files == nil {
		return newError(opInstall, a.id, edgesecrets.ErrInvalid, "the agent has no KeyFile and CertFile", nil)
	}
	chain, err := a.files.readCertificate()
	if err != nil {
		return err
	}
	_, err = a.install(opInstall, chain[0], chain[1:], false)
	return err
}

// accept checks a hub response and installs its certificate.
func (a *Agent) accept(op string, resp *responseBody) (*x509.Certificate, error) {
	leaves, err := parseCertificatesPEM([]byte(resp.Certificate))
	if err != nil {
		return nil, withInstance(withOp(err, op), a.id)
	}
	if len(leaves) != 1 {
		return nil, newError(op, a.id, edgesecrets.ErrInvalid, "the hub returned more than one certificate", nil)
	}
	caChain, err := parseCertificatesPEM([]byte(resp.CACertificates))
	if err != nil {
		return nil, withInstance(withOp(err, op), a.id)
	}
	return a.install(op, leaves[0], caChain, true)
}

// install checks leaf against the agent's identity and keys and the hub CA,
// writes it to CertFile, and makes it current. store=false skips the write
// (the chain came from CertFile).
func (a *Agent) install(op string, leaf *x509.Certificate, caChain []*x509.Certificate, store bool) (*x509.Certificate, error) {
	got, err := inspectCertificate(leaf)
	if err != nil {
		return nil, newError(op, a.id, edgesecrets.ErrInvalid, "the hub's certificate: "+err.Error(), nil)
	}
	switch {
	case got.Identity != a.id:
		return nil, newError(op, a.id, edgesecrets.ErrInvalid, "the hub's certificate names "+got.Identity.String()+"; not installed", nil)
	case !got.SigningKey.Equal(a.pub):
		return nil, newError(op, a.id, edgesecrets.ErrInvalid, "the hub's certificate is for another signing key; not installed", nil)
	case !sameEncryptionKey(got.EncryptionKey, a.encKey):
		return nil, newError(op, a.id, edgesecrets.ErrInvalid, "the hub's certificate carries another encryption key; not installed", nil)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ca := a.ca
	if ca == nil {
		if ca, err = newTrust(caChain); err != nil {
			return nil, newError(op, a.id, edgesecrets.ErrInvalid, "the hub sent no CA chain", nil)
		}
	}
	if err := ca.verify(leaf, caChain, time.Now()); err != nil {
		return nil, newError(op, a.id, ErrUnauthenticated, "the hub's certificate: "+err.Error()+"; not installed", reasonSentinel(err))
	}
	chain := append([]*x509.Certificate{leaf}, caChain...)
	if store && a.files != nil {
		if err := a.files.writeCertificate(chain); err != nil {
			return nil, err
		}
	}
	a.ca, a.chain = ca, chain
	a.log.Info("identity: certificate installed", "op", op, "instance", a.id.String(), "serial", got.Serial, "notAfter", leaf.NotAfter)
	return leaf, nil
}
