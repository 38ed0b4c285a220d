package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/edgesecrets/edgesecrets/relay"
)

// replayHost is the host of the replaying relay the agents poll with
// several agbots.
const replayHost = "replay"

// maxKept bounds the envelopes kept per node for replays.
const maxKept = 16

// replayer is a relay that serves, while its fault is on, envelopes the
// real relays delivered to a node before: an older message delivered again
// late, as a relay that misbehaves or a network that duplicates and
// reorders would. Envelopes are sealed by the agbots' keys, so the agent
// opens them; only its replay guard (the agreement's floor) stands between
// a replayed envelope and older content. Its ids increase on their own,
// so the agent takes every replayed message for a new one.
type replayer struct {
	net *network
	// hosts are the agbots whose relays the replaying relay stands
	// beside: it passes every request but the relay's to the first that
	// answers (an agent registers through whichever agbot it reaches).
	hosts []string

	mu     sync.Mutex
	on     bool
	lastID uint64
	kept   map[string][][]byte // by node path ("myorg/node-0"): envelopes seen, oldest first
}

func newReplayer(n *network, hosts []string) *replayer {
	return &replayer{net: n, hosts: hosts, kept: map[string][][]byte{}}
}

func (r *replayer) set(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = on
}

// nodeOf returns the "org/node" of a relay next path, or false.
func nodeOf(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/relay/nodes/")
	if !ok {
		return "", false
	}
	node, ok := strings.CutSuffix(rest, "/next")
	return node, ok
}

// keep records the envelope of a real relay's next answer.
func (r *replayer) keep(req *http.Request, resp *http.Response) {
	node, ok := nodeOf(req.URL.Path)
	if !ok || resp.StatusCode != http.StatusOK {
		return
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return
	}
	m, err := relay.DecodeMessage(body)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := append(r.kept[node], m.Envelope)
	if len(kept) > maxKept {
		kept = kept[1:]
	}
	r.kept[node] = kept
}

// ServeHTTP is the replaying relay: certificates are taken, replies
// dropped, and a next answers an envelope kept for the node while the
// fault is on (one in two polls), nothing otherwise. Requests outside the
// relay go to an agbot.
func (r *replayer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !strings.HasPrefix(req.URL.Path, "/relay/") {
		for _, host := range r.hosts {
			if h, frozen := r.net.handler(host); h != nil && !frozen {
				h.ServeHTTP(w, req)
				return
			}
		}
		http.Error(w, "no agbot answers", http.StatusServiceUnavailable)
		return
	}
	switch {
	case req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/certificate"):
		w.WriteHeader(http.StatusNoContent)
		return
	case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/reply"):
		w.WriteHeader(http.StatusAccepted)
		return
	}
	node, ok := nodeOf(req.URL.Path)
	if !ok || req.Method != http.MethodGet {
		http.NotFound(w, req)
		return
	}
	after, err := strconv.ParseUint(req.URL.Query().Get("after"), 10, 64)
	if err != nil {
		http.Error(w, "bad after", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	kept := r.kept[node]
	var envelope []byte
	if r.on && len(kept) > 0 && r.net.draw(2) == 0 {
		envelope = kept[r.net.draw(len(kept))]
	}
	var m relay.Message
	if envelope != nil {
		r.lastID = max(r.lastID, after) + 1
		m = relay.Message{ID: r.lastID, Envelope: envelope}
	}
	r.mu.Unlock()
	if envelope == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	r.net.counted("net.replayed")
	b, err := json.Marshal(m)
	if err != nil {
		http.Error(w, "encoding", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
