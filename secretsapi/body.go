package secretsapi

import (
	"errors"
	"io"
	"net/http"
	"strings"
)

// minDiscardBytes is the least of an oversized body the handler reads
// before it answers, whatever Options.MaxBodyBytes: a file given by
// mistake (a certificate bundle, a kubeconfig, a small binary) is within
// it, so its sender reads the 400 naming the limit.
const minDiscardBytes = 8 << 20

// msgBodyUnread answers a body that could not be read: a client that went
// away, which reads nothing, or a broken chunked encoding.
const msgBodyUnread = "The request body could not be read."

// errBodyTooLarge is readBody's error for a body over Options.MaxBodyBytes.
var errBodyTooLarge = errors.New("request body too large")

// discardBound is how many bytes of a body, in all, the handler reads
// before answering that it is too large: 8 × Options.MaxBodyBytes, and at
// least minDiscardBytes. Discarding needs no memory beyond a copy buffer,
// only the client's time; beyond the bound the sender is not a client
// that made a mistake, and the connection is closed.
func (h *handler) discardBound() int64 {
	return max(8*h.opts.MaxBodyBytes, minDiscardBytes)
}

// readBody reads a request body of at most Options.MaxBodyBytes. A larger
// one is refused with errBodyTooLarge, once discardBody has read what is
// left of it.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := h.opts.MaxBodyBytes
	if r.ContentLength > limit {
		h.discardBody(w, r, 0)
		return nil, errBodyTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		h.discardBody(w, r, int64(len(b)))
		return nil, errBodyTooLarge
	}
	return b, nil
}

// discardBody reads and drops the rest of an oversized body, of which
// read bytes were read, up to discardBound, before the handler answers.
// A client that sends its whole body before it reads the answer (hzn does
// on a slow enough link) would otherwise not see it: net/http closes a
// connection with more than 256 KiB of body unread, and closing a socket
// with unread data resets it, losing the answer on the way. Beyond the
// bound, or when the body cannot be read, the answer says
// "Connection: close". A client waiting for "100 Continue" has sent
// nothing yet: nothing is read, and net/http closes the connection after
// the answer.
func (h *handler) discardBody(w http.ResponseWriter, r *http.Request, read int64) {
	bound := h.discardBound()
	if read == 0 && expectsContinue(r) {
		return
	}
	if r.ContentLength > bound {
		w.Header().Set("Connection", "close")
		return
	}
	n, err := io.CopyN(io.Discard, r.Body, bound-read+1)
	if !errors.Is(err, io.EOF) || read+n > bound {
		w.Header().Set("Connection", "close")
	}
}

// dropUnread reads and drops, up to Options.MaxBodyBytes, what an answer
// left unread of a body of a size the handler takes (a write refused
// before its body was read: 403, 405, a bad name), so that a client still
// sending it reads the answer, as discardBody does for a body too large.
// It runs after the answer, for authenticated callers only; not for a
// body discardBody gave up on, nor for a client waiting for "100
// Continue", which has sent nothing.
func (h *handler) dropUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > h.opts.MaxBodyBytes || w.Header().Get("Connection") == "close" || expectsContinue(r) {
		return
	}
	_, _ = io.CopyN(io.Discard, r.Body, h.opts.MaxBodyBytes) // an error means the client is gone or broke the framing: net/http closes the connection
}

// expectsContinue reports whether the client waits for "100 Continue"
// before it sends the body.
func expectsContinue(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Expect"), "100-continue")
}
