package identity

import "github.com/edgesecrets/edgesecrets/agreement"

// PublicKeys returns the verified keys as the agreement key set the agbot
// seals to (agreement.Seal of a proposal or update) and whose
// signatures it accepts on the agent's replies.
func (v *VerifiedIdentity) PublicKeys() (*agreement.PublicKeys, error) {
	return agreement.NewPublicKeys(v.SigningKey, v.EncryptionKey)
}

// AgentKeyOptions fills the key fields of AgentOptions from the agent's
// agreement key set: its Ed25519 signer signs the CSR and refresh proofs,
// and its HPKE public key goes into the certificate.
func AgentKeyOptions(keys *agreement.PrivateKeys, opts AgentOptions) AgentOptions {
	opts.SigningKey = keys.Signer()
	opts.EncryptionKey = keys.Public().EncryptionKey()
	return opts
}
