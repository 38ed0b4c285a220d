// Package identity gives agents certificates the agbot can trust before it
// seals secrets to them, on the Copper Argos model (Athenz): the provider
// that launched a node vouches for it, the hub issues it a short-lived
// certificate, the node refreshes it with proof of the current one, and an
// administrator can revoke it.
//
// A certificate names one instance (see Identity): subject CN = node id and
// exactly two SAN URIs,
//
//	edgesecrets://node/<org>/<node-id>
//	edgesecrets://instanceid/<provider>/<instance-id>
//
// and carries the agent's Ed25519 signing key as its public key and the
// agent's HPKE public key in a non-critical extension (chosen over a signed
// companion field so the certificate alone states every key the agbot
// needs): OID 2.999.3131.1.1 (provisional, under the ITU-T example arc),
// value the DER of SEQUENCE { kem INTEGER, publicKey OCTET STRING }, kem
// the RFC 9180 KEM id. The CSR carries it in its extension request.
//
// Agent side: Agent — Register and Renew (a new CSR each time; each
// certificate is accepted only if it names the instance, carries the
// agent's keys and chains to the hub CA), Run (renew after 2/3 of the
// lifetime, jittered exponential backoff, expiry warnings; with
// AgentOptions.Attest also register, and register again when a renewal or
// an agbot through Agent.Refused says the identity is lost:
// ErrIdentityLost, that is ErrUnknownInstance, ErrRevoked or ErrExpired), key and
// certificate files (AgentOptions.KeyFile and CertFile: atomic writes, key
// 0600, a certificate is installed only if it matches the key) — talking
// to the hub through a Client (the HTTP API) or an Issuer in process.
//
// Hub side: Issuer (register: CSR rules, claimed identity, the provider's
// attestor (IssuerOptions.Attest) with a freshness window, one record per
// instance written before the certificate is returned; refresh: proof of
// the current certificate by a request signed with its key, and the serial
// state machine — current shifts to previous, previous is allowed once
// more, any other serial revokes the instance; revoke: a tombstone),
// CertSigner with the in-memory CA (NewCA) as default, CertStore with
// NewMemoryCertStore as default, Issuer.Handler (the HTTP API), and Verifier,
// which the agbot calls before sealing and which returns the agent's keys
// only for an active instance.
//
// Every register and refresh request carries a proof: a random nonce and
// the time, signed by the agent's key over the whole request. The Issuer
// accepts a proof within its ProofWindow and only once (the CertStore
// remembers the nonce, CertStore.UseNonce), so a request captured on the
// way and replayed changes nothing and is refused with ErrReplayed.
//
// Errors match the module's kinds of package secretstore with errors.Is
// (ErrInvalid, ErrPermission, ErrNotFound, ErrConflict, ErrUnavailable);
// ErrUnauthenticated and ErrForbidden refine ErrPermission, ErrReplayed
// refines ErrConflict, and ErrRevoked says why a refusal is for good.
//
// Keys are standard library types (crypto.Signer with an Ed25519 key,
// crypto/hpke public keys), so the agreement package's key types adapt to
// them directly. No private key, attestation document or plug-in error text
// appears in this package's errors, logs or fmt output.
package identity
