package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/errkind"
)

// Server defaults.
const (
	defaultMaxNodes    = 1024
	defaultMaxMessages = 64
)

// ErrMailboxFull is returned by Post when the node's mailbox holds
// MaxMessages messages: the agent is behind; try again later. It refines
// edgesecrets.ErrUnavailable.
var ErrMailboxFull = errkind.New("relay: mailbox full", edgesecrets.ErrUnavailable)

// ServerOptions configure a Server.
type ServerOptions struct {
	// Verifier checks each certificate chain an agent publishes: it is
	// accepted for a node only if it verifies (the hub's identity CA,
	// expiry, revocation) and names that node. Required: without it every
	// certificate is refused.
	Verifier *identity.Verifier
	// Keys are the agbot's agreement keys: a reply is passed on only if it
	// opens with them, was sealed by the agent certified for the message's
	// node, and answers that very message. Required: without them every
	// reply is refused.
	Keys *agreement.PrivateKeys
	// OnCertificate is called, on its own goroutine, each time an agent
	// publishes a certificate chain for a node that the relay accepts.
	OnCertificate func(Publication)
	// MaxNodes bounds the nodes with a certificate or a mailbox. Zero
	// means 1024.
	MaxNodes int
	// MaxMessages bounds one mailbox. Zero means 64.
	MaxMessages int
	// FirstID is the id below the relay's first message id. An agbot that
	// restarts gives a new relay a FirstID above every id the one before
	// handed out (the clock in microseconds does), so that an agent that
	// kept polling with its cursor still sees the new relay's messages.
	FirstID uint64
	// Logger receives nodes, message ids and sizes. Default: discard.
	Logger *slog.Logger
}

// Server is the relay: the HTTP side the agents use, and Post, Certificate
// and Done for the agbot in the same process. Safe for concurrent use.
type Server struct {
	opts ServerOptions
	log  *slog.Logger
	mux  *http.ServeMux

	mu      sync.Mutex
	nextID  uint64
	nodes   map[Node]*nodeState
	waiters map[uint64]*waiter
}

// nodeState is what the relay holds for one node.
type nodeState struct {
	cert     []byte
	certFrom time.Time // the certificate's NotBefore
	mailbox  []Message
}

// waiter is a posted message the agbot waits on for a reply.
type waiter struct {
	node    Node
	header  agreement.Header // of the posted envelope
	replies chan []byte
}

// NewServer returns an empty relay.
func NewServer(opts ServerOptions) *Server {
	if opts.MaxNodes <= 0 {
		opts.MaxNodes = defaultMaxNodes
	}
	if opts.MaxMessages <= 0 {
		opts.MaxMessages = defaultMaxMessages
	}
	s := &Server{
		opts:    opts,
		log:     opts.Logger,
		mux:     http.NewServeMux(),
		nodes:   map[Node]*nodeState{},
		waiters: map[uint64]*waiter{},
		nextID:  opts.FirstID,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mux.HandleFunc("PUT /relay/nodes/{org}/{node}/certificate", s.putCertificate)
	s.mux.HandleFunc("GET /relay/nodes/{org}/{node}/next", s.next)
	s.mux.HandleFunc("POST /relay/messages/{id}/reply", s.reply)
	return s
}

// ServeHTTP implements http.Handler for the paths in the package doc.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Certificate returns the certificate chain last published for n. It
// verified when it was published; verify it again before use.
func (s *Server) Certificate(n Node) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, ok := s.nodes[n]
	if !ok || ns.cert == nil {
		return nil, false
	}
	return slices.Clone(ns.cert), true
}

// DropCertificate forgets the certificate chain published for n if it is
// still chain, and reports whether it did. The agbot calls it when chain
// no longer verifies because the agent's identity is lost: the relay then
// tells the agent that it holds no certificate (certificateHeader), the
// agent publishes its certificate again, and the refusal's reason tells
// it to register again.
func (s *Server) DropCertificate(n Node, chain []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, ok := s.nodes[n]
	if !ok || ns.cert == nil || !bytes.Equal(ns.cert, chain) {
		return false
	}
	ns.cert, ns.certFrom = nil, time.Time{}
	if len(ns.mailbox) == 0 {
		delete(s.nodes, n)
	}
	return true
}

// Post puts an envelope (sealed by the agbot) into n's mailbox and returns
// its id and the channel on which replies to it arrive: only replies that
// open with ServerOptions.Keys, come from n's certified agent and answer
// this envelope. Call Done when no more replies are wanted; it also takes
// the message out of the mailbox.
func (s *Server) Post(n Node, envelope []byte) (uint64, <-chan []byte, error) {
	if err := n.Validate(); err != nil {
		return 0, nil, err
	}
	h, err := agreement.PeekHeader(envelope, agreement.Options{})
	if err != nil {
		return 0, nil, fmt.Errorf("relay: post: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, err := s.state(n)
	if err != nil {
		return 0, nil, err
	}
	if len(ns.mailbox) >= s.opts.MaxMessages {
		return 0, nil, ErrMailboxFull
	}
	s.nextID++
	id := s.nextID
	ns.mailbox = append(ns.mailbox, Message{ID: id, Envelope: slices.Clone(envelope)})
	w := &waiter{node: n, header: h, replies: make(chan []byte, 4)}
	s.waiters[id] = w
	s.log.Debug("message posted", slog.String("node", n.String()), slog.Uint64("id", id), slog.Int("bytes", len(envelope)))
	return id, w.replies, nil
}

// Done takes message id out of its mailbox and stops passing on replies.
func (s *Server) Done(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.waiters[id]
	if !ok {
		return
	}
	delete(s.waiters, id)
	ns := s.nodes[w.node]
	ns.mailbox = slices.DeleteFunc(ns.mailbox, func(m Message) bool { return m.ID == id })
	if len(ns.mailbox) == 0 && ns.cert == nil {
		delete(s.nodes, w.node)
	}
}

// errTooManyNodes is returned when a new node would exceed MaxNodes.
var errTooManyNodes = errors.New("relay: too many nodes")

// state returns n's state, adding it if there is room. s.mu is held.
func (s *Server) state(n Node) (*nodeState, error) {
	if ns, ok := s.nodes[n]; ok {
		return ns, nil
	}
	if len(s.nodes) >= s.opts.MaxNodes {
		return nil, fmt.Errorf("%w: the relay holds %d nodes", errTooManyNodes, s.opts.MaxNodes)
	}
	ns := &nodeState{}
	s.nodes[n] = ns
	return ns, nil
}

// verifyChain checks that chain is an agent certificate chain from the
// hub's identity CA, current and not revoked, for node n, and returns the
// agent's keys and the leaf's NotBefore.
func (s *Server) verifyChain(ctx context.Context, n Node, chain []byte) (*agreement.PublicKeys, time.Time, error) {
	if s.opts.Verifier == nil {
		return nil, time.Time{}, errors.New("this relay verifies no certificates (no Verifier)")
	}
	vid, err := s.opts.Verifier.Verify(ctx, chain)
	if err != nil {
		return nil, time.Time{}, err
	}
	if vid.Instance.Org != n.Org || vid.Instance.Node != n.Node {
		return nil, time.Time{}, fmt.Errorf("the certificate names node %s/%s, not %s", vid.Instance.Org, vid.Instance.Node, n)
	}
	keys, err := vid.PublicKeys()
	if err != nil {
		return nil, time.Time{}, err
	}
	return keys, vid.NotBefore, nil
}

func (s *Server) putCertificate(w http.ResponseWriter, r *http.Request) {
	n, ok := s.node(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxCertificateSize))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "certificate chain too large")
		return
	}
	if len(body) == 0 {
		writeError(w, http.StatusBadRequest, "empty certificate chain")
		return
	}
	var holdsNone bool
	switch q := r.URL.Query(); q.Get(holdsQuery) {
	case "":
	case holdsNothing:
		holdsNone = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s: %.32q is not %q", holdsQuery, q.Get(holdsQuery), holdsNothing))
		return
	}
	_, from, err := s.verifyChain(r.Context(), n, body)
	if err != nil {
		reason := lostReason(err)
		s.log.Warn("certificate refused", slog.String("node", n.String()), slog.String("reason", reason), slog.String("err", err.Error()))
		writeJSON(w, http.StatusForbidden, apiError{Error: "the certificate chain is not a current one from the hub's identity CA for this node", Reason: reason})
		return
	}
	s.mu.Lock()
	ns, err := s.state(n)
	var older bool
	if err == nil {
		// An older certificate (a replay of the agent's last one) must not
		// replace a newer one that still verifies.
		if older = ns.cert != nil && from.Before(ns.certFrom); older {
			if _, _, verr := s.verifyChain(r.Context(), n, ns.cert); verr != nil {
				older = false
			}
		}
		if !older {
			ns.cert, ns.certFrom = body, from
		}
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	case older:
		writeError(w, http.StatusConflict, "a newer certificate is published for this node")
		return
	}
	s.log.Debug("certificate published", slog.String("node", n.String()), slog.Int("bytes", len(body)), slog.Bool("holds_nothing", holdsNone))
	if s.opts.OnCertificate != nil {
		go s.opts.OnCertificate(Publication{Node: n, ChainPEM: body, HoldsNothing: holdsNone})
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) next(w http.ResponseWriter, r *http.Request) {
	n, ok := s.node(w, r)
	if !ok {
		return
	}
	var after uint64
	if a := r.URL.Query().Get("after"); a != "" {
		var err error
		if after, err = parseID(a); err != nil {
			writeError(w, http.StatusBadRequest, "after: "+err.Error())
			return
		}
	}
	s.mu.Lock()
	var found *Message
	ns, ok := s.nodes[n]
	if !ok || ns.cert == nil {
		// A relay that restarted has lost the agent's certificate: the
		// agent publishes it again.
		w.Header().Set(certificateHeader, "missing")
	}
	if ok {
		for i, m := range ns.mailbox {
			if m.ID > after {
				found = &ns.mailbox[i]
				break
			}
		}
	}
	var body []byte
	var err error
	if found != nil {
		body, err = json.Marshal(found)
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "encoding the message failed")
	case found == nil:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body) // a failed write means the client is gone
	}
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxEnvelopeSize))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "reply too large")
		return
	}
	s.mu.Lock()
	wt, ok := s.waiters[id]
	var chain []byte
	if ok {
		if ns := s.nodes[wt.node]; ns != nil {
			chain = ns.cert
		}
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "no such message waiting for a reply")
		return
	}
	// Nothing is deleted or passed on for a reply that does not check out:
	// the agent can still fetch the message and answer it.
	if status, err := s.checkReply(r.Context(), wt, chain, body); err != nil {
		s.log.Warn("reply refused", slog.Uint64("id", id), slog.String("node", wt.node.String()), slog.String("err", err.Error()))
		writeError(w, status, err.Error())
		return
	}
	s.mu.Lock()
	if _, ok := s.waiters[id]; ok {
		select {
		case wt.replies <- body:
		default: // the agbot has enough unread replies to this message; drop
		}
	}
	s.mu.Unlock()
	s.log.Debug("reply posted", slog.Uint64("id", id), slog.Int("bytes", len(body)))
	w.WriteHeader(http.StatusAccepted)
}

// checkReply opens a reply to the message wt waits on with the agbot's keys
// and the keys certified for its node, and checks it answers that message.
// It returns the status to refuse with.
func (s *Server) checkReply(ctx context.Context, wt *waiter, chain, body []byte) (int, error) {
	if s.opts.Keys == nil {
		return http.StatusForbidden, errors.New("this relay accepts no replies (no agbot keys)")
	}
	if chain == nil {
		return http.StatusForbidden, errors.New("the node has no certificate published")
	}
	agent, _, err := s.verifyChain(ctx, wt.node, chain)
	if err != nil {
		return http.StatusForbidden, fmt.Errorf("the node's certificate no longer verifies: %w", err)
	}
	h, reply, err := agreement.Open[agreement.Reply](ctx, s.opts.Keys, agent, body, agreement.NewMemoryReplayGuard(), agreement.Options{})
	if err != nil {
		return http.StatusForbidden, errors.New("the reply does not open: it is not a reply sealed by the node's certified agent")
	}
	want := agreement.MessageRef{Type: wt.header.Type, Sequence: wt.header.Sequence}
	if h.AgreementID != wt.header.AgreementID || reply.InReplyTo != want {
		return http.StatusConflict, errors.New("the reply answers another message")
	}
	return 0, nil
}

func (s *Server) node(w http.ResponseWriter, r *http.Request) (Node, bool) {
	n := Node{Org: r.PathValue("org"), Node: r.PathValue("node")}
	if err := n.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return Node{}, false
	}
	return n, true
}

// apiError is the body of every error answer.
type apiError struct {
	Error string `json:"error"`
	// Reason, on a refused certificate, says that the agent's identity
	// is lost and it must register again: "unknown", "revoked" or
	// "expired".
	Reason string `json:"reason,omitempty"`
}

// Reasons of a refused certificate whose identity is lost.
const (
	reasonUnknown = "unknown"
	reasonRevoked = "revoked"
	reasonExpired = "expired"
)

// lostReason returns the reason to send for a verification error that
// says the agent's identity is lost, or "".
func lostReason(err error) string {
	switch {
	case errors.Is(err, identity.ErrRevoked):
		return reasonRevoked
	case errors.Is(err, identity.ErrExpired):
		return reasonExpired
	case errors.Is(err, identity.ErrIdentityLost):
		return reasonUnknown
	}
	return ""
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, body apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // a failed write means the client is gone
}
