package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/edgesecrets/edgesecrets/agreement"
)

// exchange stands in for Open Horizon's exchange: it carries the agbot's
// sealed messages to the agent and the agent's sealed replies back. It is
// untrusted: it only ever holds envelopes, which it can drop, delay,
// replay or alter, but not read or forge.
type exchange struct {
	agent agentEndpoint
	tap   func(envelope []byte) // Options.OnEnvelope

	mu   sync.Mutex
	last map[agreement.MessageType][]byte // last envelope carried, per type
}

// Receive implements agentEndpoint: it carries envelope to the agent and
// the reply back.
func (x *exchange) Receive(ctx context.Context, envelope []byte) ([]byte, error) {
	x.carry(envelope)
	reply, err := x.agent.Receive(ctx, envelope)
	if err != nil {
		return nil, err
	}
	x.carry(reply)
	return reply, nil
}

func (x *exchange) carry(envelope []byte) {
	if x.tap != nil {
		x.tap(bytes.Clone(envelope))
	}
	if h, err := agreement.PeekHeader(envelope, agreement.Options{}); err == nil {
		x.mu.Lock()
		x.last[h.Type] = bytes.Clone(envelope)
		x.mu.Unlock()
	}
}

func (x *exchange) lastEnvelope(typ agreement.MessageType) []byte {
	x.mu.Lock()
	defer x.mu.Unlock()
	return bytes.Clone(x.last[typ])
}

// tamperAndReplay is the exchange misbehaving: it alters one bit of the
// proposal it carried, then delivers the genuine proposal a second time.
// The agent must refuse both.
func (f *flow) tamperAndReplay(ctx context.Context) error {
	proposal := f.exchange.lastEnvelope(agreement.TypeProposal)
	tampered, err := flipCiphertextBit(proposal)
	if err != nil {
		return err
	}
	_, err = f.exchange.Receive(ctx, tampered)
	if !errors.Is(err, agreement.ErrNotAuthentic) {
		return fmt.Errorf("a tampered proposal: want the agent to refuse it for its signature, got %v", err)
	}
	f.say.sayf("exchange", "flips one bit of the proposal's ciphertext: %v", err)

	_, err = f.exchange.Receive(ctx, proposal)
	if !errors.Is(err, agreement.ErrReplay) {
		return fmt.Errorf("a replayed proposal: want the agent to refuse it as a replay, got %v", err)
	}
	f.say.sayf("exchange", "delivers the same proposal again: %v", err)
	return nil
}

// flipCiphertextBit returns a copy of an envelope (its JSON wire form) with
// one bit of the ciphertext changed. Its binary fields are unpadded
// base64url.
func flipCiphertextBit(envelope []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(envelope, &fields); err != nil {
		return nil, err
	}
	var b64 string
	if err := json.Unmarshal(fields["ciphertext"], &b64); err != nil {
		return nil, err
	}
	ct, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(ct) == 0 {
		return nil, fmt.Errorf("envelope has no ciphertext")
	}
	ct[len(ct)/2] ^= 1
	fields["ciphertext"], _ = json.Marshal(base64.RawURLEncoding.EncodeToString(ct))
	return json.Marshal(fields)
}
