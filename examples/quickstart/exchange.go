package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"

	"github.com/edgesecrets/edgesecrets/agbot"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/relay"
)

// exchange stands in for Open Horizon's exchange, between the agent and
// the agbot: the agent reaches the agbot's identity API and relay through
// it. It is untrusted: it only ever holds public certificates and sealed
// envelopes, which it can drop, delay, replay or alter, but not read or
// forge. It taps what it carries (Options.OnEnvelope) and keeps the last
// envelope of each type, which tamper and replay hand to the agent.
type exchange struct {
	agbot http.Handler
	tap   func(envelope []byte) // Options.OnEnvelope
	say   *narrator
	srv   *httptest.Server

	mu       sync.Mutex
	last     map[agreement.MessageType][]byte // last envelope carried, per type
	inject   [][]byte                         // envelopes to hand the agent before the relay's next
	shift    uint64                           // the ids the agent sees are the relay's plus shift: one per envelope injected
	injected map[uint64]bool                  // the ids of the envelopes injected, whose replies go nowhere
	cert     *x509.Certificate                // the agent's, as last published
	gate     chan struct{}                    // closed by release: certificates pass on to the agbot
	released sync.Once
}

func newExchange(agbotHandler http.Handler, tap func([]byte), say *narrator) *exchange {
	x := &exchange{agbot: agbotHandler, tap: tap, say: say, last: map[agreement.MessageType][]byte{}, injected: map[uint64]bool{},
		gate: make(chan struct{})}
	x.srv = httptest.NewServer(x)
	return x
}

// ServeHTTP passes a request to the agbot, taps the envelopes in the
// relay's answers and in the agent's replies, and hands the agent the
// envelopes injected meanwhile before the relay's next message. Message
// ids are translated so that an injected envelope takes none of the
// relay's ids.
func (x *exchange) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, agbot.RelayPath+"messages/"):
		if !x.passReply(w, r) {
			return
		}
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/next"):
		if x.handInjected(w, r) {
			return
		}
		x.mu.Lock()
		after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		q := r.URL.Query()
		q.Set("after", strconv.FormatUint(after-min(after, x.shift), 10))
		r.URL.RawQuery = q.Encode()
		x.mu.Unlock()
	case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/certificate"):
		if !x.holdCertificate(r) {
			http.Error(w, "the exchange is closing", http.StatusServiceUnavailable)
			return
		}
	}
	rec := httptest.NewRecorder()
	x.agbot.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusOK && strings.HasSuffix(r.URL.Path, "/next") {
		if m, err := relay.DecodeMessage(body); err == nil {
			x.carry(m.Envelope)
			x.mu.Lock()
			m.ID += x.shift
			x.mu.Unlock()
			body, _ = json.Marshal(m)
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body) // the agent polls again
}

// passReply taps an agent's reply and rewrites its message id to the
// relay's; a reply to an injected envelope goes nowhere (202, as the relay
// answers a reply it no longer waits for). It reports whether to pass the
// request on.
func (x *exchange) passReply(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, relay.MaxEnvelopeSize))
	if err != nil {
		http.Error(w, "reading the reply", http.StatusBadRequest)
		return false
	}
	x.carry(body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rest := strings.TrimPrefix(r.URL.Path, agbot.RelayPath+"messages/")
	idText, tail, _ := strings.Cut(rest, "/")
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil {
		return true // the relay answers it
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.injected[id] {
		w.WriteHeader(http.StatusAccepted)
		return false
	}
	r.URL.Path = agbot.RelayPath + "messages/" + strconv.FormatUint(id-min(id, x.shift), 10) + "/" + tail
	r.URL.RawPath = ""
	r.RequestURI = r.URL.RequestURI()
	return true
}

// holdCertificate notes the certificate an agent publishes and holds it
// until release, so that the narration tells the agent's registration
// before the agbot's deployment. It reports false when the request ended
// first.
func (x *exchange) holdCertificate(r *http.Request) bool {
	chain, err := io.ReadAll(io.LimitReader(r.Body, relay.MaxCertificateSize))
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(chain))
	if block, _ := pem.Decode(chain); block != nil {
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			x.mu.Lock()
			x.cert = cert
			x.mu.Unlock()
		}
	}
	select {
	case <-x.gate:
		return true
	case <-r.Context().Done():
		return false
	}
}

// release lets the certificates an agent publishes pass on to the agbot.
func (x *exchange) release() { x.released.Do(func() { close(x.gate) }) }

// handInjected answers a poll with the first injected envelope, as a
// message with the next id, when there is one.
func (x *exchange) handInjected(w http.ResponseWriter, r *http.Request) bool {
	x.mu.Lock()
	if len(x.inject) == 0 {
		x.mu.Unlock()
		return false
	}
	envelope := x.inject[0]
	x.inject = x.inject[1:]
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	m := relay.Message{ID: after + 1, Envelope: envelope}
	x.shift++
	x.injected[m.ID] = true
	x.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m) // the agent polls again
	return true
}

// hand queues an envelope for the agent's next poll.
func (x *exchange) hand(envelope []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.inject = append(x.inject, bytes.Clone(envelope))
}

func (x *exchange) carry(envelope []byte) {
	if x.tap != nil {
		x.tap(bytes.Clone(envelope))
	}
	h, err := agreement.PeekHeader(envelope, agreement.Options{})
	if err != nil {
		return
	}
	x.mu.Lock()
	x.last[h.Type] = bytes.Clone(envelope)
	x.mu.Unlock()
	switch h.Type {
	case agreement.TypeProposal:
		x.say.sayf("exchange", "carries the sealed proposal of %s to the agent: %d bytes", h.AgreementID, len(envelope))
	case agreement.TypeUpdate:
		x.say.sayf("exchange", "carries the sealed update (or cancellation) of %s to the agent: %d bytes", h.AgreementID, len(envelope))
	}
}

// certificate returns the agent's certificate as last published, or nil.
func (x *exchange) certificate() *x509.Certificate {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cert
}

func (x *exchange) lastEnvelope(typ agreement.MessageType) []byte {
	x.mu.Lock()
	defer x.mu.Unlock()
	return bytes.Clone(x.last[typ])
}

func (x *exchange) close() {
	x.release() // a certificate held must not hold up the server's close
	x.srv.Close()
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

// tamperAndReplay is the exchange misbehaving: it hands the agent the
// proposal it carried with one bit altered, which the agent must refuse,
// then the genuine proposal a second time, which the agent applies again,
// changing nothing: the agbot resends its last message when a reply is
// lost, so the message at the agreement's replay floor is answered again.
func (f *flow) tamperAndReplay(ctx context.Context) error {
	proposal := f.exchange.lastEnvelope(agreement.TypeProposal)
	if proposal == nil {
		return errors.New("the exchange carried no proposal")
	}
	tampered, err := flipCiphertextBit(proposal)
	if err != nil {
		return err
	}
	f.agent.forgetOutcomes()
	f.exchange.hand(tampered)
	if _, err := f.agent.nextOutcome(ctx); !errors.Is(err, agreement.ErrNotAuthentic) {
		return fmt.Errorf("a tampered proposal: want the agent to refuse it for its signature, got %v", err)
	} else {
		f.say.sayf("exchange", "flips one bit of the proposal's ciphertext; the agent refuses it: %v", err)
	}
	f.exchange.hand(proposal)
	got, err := f.agent.nextOutcome(ctx)
	if err != nil || got.Err != nil {
		return fmt.Errorf("the proposal again: want the agent to answer it again, got %v, %v", err, got.Err)
	}
	f.say.sayf("exchange", "delivers the same proposal again; the agent applies it again, which changes nothing, and answers (its replay floor is that proposal)")
	return nil
}

// replayOld is the exchange handing the agent the agreement's proposal
// after the update that followed it: the agent refuses it as a replay, so
// an old message cannot roll the node back.
func (f *flow) replayOld(ctx context.Context) error {
	f.agent.forgetOutcomes()
	f.exchange.hand(f.exchange.lastEnvelope(agreement.TypeProposal))
	_, err := f.agent.nextOutcome(ctx)
	if !errors.Is(err, agreement.ErrReplay) {
		return fmt.Errorf("a replayed proposal: want the agent to refuse it as a replay, got %v", err)
	}
	f.say.sayf("exchange", "replays the proposal after the update; the agent refuses it: %v", err)
	return nil
}
