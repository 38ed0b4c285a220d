package relay

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
)

// Server defaults.
const (
	DefaultMaxNodes    = 1024
	DefaultMaxMessages = 64
)

// ErrMailboxFull is returned by Post when the node's mailbox holds
// MaxMessages messages.
var ErrMailboxFull = errors.New("relay: mailbox full")

// ServerOptions configure a Server.
type ServerOptions struct {
	// OnCertificate is called, on its own goroutine, each time an agent
	// publishes a certificate chain for a node.
	OnCertificate func(Node)
	// MaxNodes bounds the nodes with a certificate or a mailbox. Default
	// DefaultMaxNodes.
	MaxNodes int
	// MaxMessages bounds one mailbox. Default DefaultMaxMessages.
	MaxMessages int
	// Logger receives nodes, message ids and sizes. Default: discard.
	Logger *slog.Logger
}

// Server is the relay: the HTTP side the agents use, and Post, Certificate
// and Done for the agbot in the same process. Safe for concurrent use.
type Server struct {
	opts ServerOptions
	log  *slog.Logger
	mux  *http.ServeMux

	mu       sync.Mutex
	nextID   uint64
	nodes    map[Node]*nodeState
	waiters  map[uint64]chan []byte
	location map[uint64]Node
}

// nodeState is what the relay holds for one node.
type nodeState struct {
	cert    []byte
	mailbox []Message
}

// NewServer returns an empty relay.
func NewServer(opts ServerOptions) *Server {
	if opts.MaxNodes <= 0 {
		opts.MaxNodes = DefaultMaxNodes
	}
	if opts.MaxMessages <= 0 {
		opts.MaxMessages = DefaultMaxMessages
	}
	s := &Server{
		opts:     opts,
		log:      opts.Logger,
		mux:      http.NewServeMux(),
		nodes:    map[Node]*nodeState{},
		waiters:  map[uint64]chan []byte{},
		location: map[uint64]Node{},
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

// Certificate returns the certificate chain last published for n.
func (s *Server) Certificate(n Node) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, ok := s.nodes[n]
	if !ok || ns.cert == nil {
		return nil, false
	}
	return slices.Clone(ns.cert), true
}

// Post puts an envelope into n's mailbox and returns its id and the
// channel on which replies posted for it arrive. Anyone can post a reply:
// open each and ignore those that do not verify. Call Done when no more
// replies are wanted; it also takes the message out of the mailbox.
func (s *Server) Post(n Node, envelope []byte) (uint64, <-chan []byte, error) {
	if err := n.Validate(); err != nil {
		return 0, nil, err
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
	replies := make(chan []byte, 4)
	s.waiters[id] = replies
	s.location[id] = n
	s.log.Debug("message posted", slog.String("node", n.String()), slog.Uint64("id", id), slog.Int("bytes", len(envelope)))
	return id, replies, nil
}

// Done takes message id out of its mailbox and stops passing on replies.
func (s *Server) Done(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.location[id]
	if !ok {
		return
	}
	delete(s.location, id)
	delete(s.waiters, id)
	ns := s.nodes[n]
	ns.mailbox = slices.DeleteFunc(ns.mailbox, func(m Message) bool { return m.ID == id })
	if len(ns.mailbox) == 0 && ns.cert == nil {
		delete(s.nodes, n)
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
		return nil, errTooManyNodes
	}
	ns := &nodeState{}
	s.nodes[n] = ns
	return ns, nil
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
	s.mu.Lock()
	ns, err := s.state(n)
	if err == nil {
		ns.cert = body
	}
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "too many nodes")
		return
	}
	s.log.Debug("certificate published", slog.String("node", n.String()), slog.Int("bytes", len(body)))
	if s.opts.OnCertificate != nil {
		go s.opts.OnCertificate(n)
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
	if ns, ok := s.nodes[n]; ok {
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
		w.Write(body)
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
	replies, ok := s.waiters[id]
	if ok {
		select {
		case replies <- body:
		default: // the agbot has enough unopened replies to this message; drop
		}
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "no such message waiting for a reply")
		return
	}
	s.log.Debug("reply posted", slog.Uint64("id", id), slog.Int("bytes", len(body)))
	w.WriteHeader(http.StatusAccepted)
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
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(apiError{Error: msg})
}
