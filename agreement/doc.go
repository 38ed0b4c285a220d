// Package agreement carries secrets from the agbot to an agent: the
// messages of the agreement protocol (proposal, update, reply), the keys and
// sealed envelopes that protect them, and replay protection. On the agbot,
// package agreement/delivery uses them to keep every node's secrets current.
//
// # Keys
//
// Each side holds a PrivateKeys: an Ed25519 signing key and an HPKE (RFC
// 9180, crypto/hpke) encryption key of one Suite. The default suite is the
// post-quantum hybrid ML-KEM-768 + X25519 with HKDF-SHA256 and AES-256-GCM;
// DHKEM(X25519) is selectable. Public keys have a stable PEM text form
// (PublicKeys.MarshalText, UnmarshalText) and a KeyID per key; private
// keys are written only to 0600 files (PrivateKeys.WriteFile). NewPublicKeys
// builds the keys from the stdlib types an identity certificate carries.
//
// # Envelopes
//
// Seal encrypts a message to the recipient's encryption key and signs it
// with the sender's key. The Header (version, suite, key ids, message type,
// agreement id, sequence, time) travels in clear as the exact signed bytes;
// it is the AEAD's additional data and is signed (Ed25519ctx over a SHA-256
// of header, encapsulated key and ciphertext). The wire form is JSON:
//
//	{"version":1,"header":"<b64>","enc":"<b64>","ciphertext":"<b64>","signature":"<b64>"}
//
// Open checks, in order, size, form, suite allow-list, recipient, sender,
// signature, decryption and last the ReplayGuard (the sequence must be
// above the last accepted for the agreement and message type), so forged
// or damaged envelopes never advance the guard. Each failure matches one
// error kind with errors.Is — edgesecrets.ErrInvalid (unusable input), ErrNotAuthentic
// (not from the expected sender to this key, or altered) or ErrReplay —
// and its text says which check failed. No error, printout or log value of
// this package holds a secret value or private key material.
//
// Seal and Open carry the protocol's messages (Seal(..., proposal, ...),
// Open[Proposal](...), likewise Update and Reply), with the JSON encoding,
// validation and message type checks, or raw bytes under a message type
// of the caller's. Options (size limit, allowed suites) apply to both.
//
// # Delivery
//
// The agbot side is one component, package agreement/delivery: an agbot
// embeds one delivery.Engine, registers each agreement with its bindings
// resolved to store names (binding.Report.Bindings), and the engine seals
// the proposal and every update and cancellation that follows, with
// envelope sequences that keep increasing across restarts and takeovers,
// until the agent acknowledges. The agent's reply names the message it
// answers (Reply.InReplyTo), so a late reply to a superseded update is not
// taken for an answer to the newer one. The agent side needs only this
// package (and agentapi to apply what it opens).
package agreement
