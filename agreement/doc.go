// Package agreement carries secrets from the agbot to an agent: the
// messages of the agreement protocol (proposal, update, reply), the keys and
// sealed envelopes that protect them, replay protection, and on the agbot
// side the update outbox and the secret-to-agreement tracker.
package agreement
