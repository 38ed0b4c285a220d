package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/edgesecrets/edgesecrets/agreement/identity"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
)

// Client is the agent's side of the relay.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client of the relay served at baseURL (the agbot's
// URL). A nil hc means a client with a 30 s timeout.
func NewClient(baseURL string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, errors.New("relay: the base URL must be an absolute http or https URL without credentials")
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: u.String(), http: hc}, nil
}

// PublishCertificate publishes the agent's PEM certificate chain for its
// node, saying whether the agent holds nothing. When the agbot refuses it
// because the agent's identity is lost (no record for the instance,
// revoked, expired), the error matches identity.ErrIdentityLost and the
// reason (identity.ErrUnknownInstance, ErrRevoked or ErrExpired): give it
// to the agent's identity.Agent.Refused, which registers again.
func (c *Client) PublishCertificate(ctx context.Context, p Publication) error {
	if err := p.Node.Validate(); err != nil {
		return err
	}
	path := nodePath(p.Node, "certificate")
	if p.HoldsNothing {
		path += "?" + holdsQuery + "=" + holdsNothing
	}
	_, err := c.do(ctx, http.MethodPut, path, p.ChainPEM, http.StatusNoContent)
	return err
}

// Next returns the oldest message for n with an id above after, or false
// when there is none.
func (c *Client) Next(ctx context.Context, n Node, after uint64) (Message, bool, error) {
	m, ok, _, err := c.Poll(ctx, n, after)
	return m, ok, err
}

// Poll is Next that also reports whether the relay holds a certificate
// for n. A relay that restarted with its agbot holds none: the agent
// publishes its certificate again.
func (c *Client) Poll(ctx context.Context, n Node, after uint64) (m Message, ok, certified bool, err error) {
	if err := n.Validate(); err != nil {
		return Message{}, false, false, err
	}
	var header http.Header
	body, err := c.doHeader(ctx, http.MethodGet, nodePath(n, "next")+"?after="+strconv.FormatUint(after, 10), nil, &header, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return Message{}, false, false, err
	}
	certified = header.Get(certificateHeader) != "missing"
	if body == nil {
		return Message{}, false, certified, nil
	}
	m, ok, err = decodeNext(body, after)
	return m, ok, certified, err
}

// decodeNext decodes a next answer: a message with an id above after.
func decodeNext(body []byte, after uint64) (Message, bool, error) {
	m, err := DecodeMessage(body)
	if err != nil {
		return Message{}, false, err
	}
	if m.ID <= after {
		return Message{}, false, fmt.Errorf("relay: message id %d is not above %d", m.ID, after)
	}
	return m, true, nil
}

// Reply posts a sealed reply to message id. A reply to a message the agbot
// no longer waits for is dropped by the relay and is not an error.
func (c *Client) Reply(ctx context.Context, id uint64, envelope []byte) error {
	_, err := c.do(ctx, http.MethodPost, "/relay/messages/"+strconv.FormatUint(id, 10)+"/reply", envelope, http.StatusAccepted, http.StatusNotFound)
	return err
}

// DecodeMessage decodes a Message strictly, at most maxMessageBodySize
// bytes. Errors never quote the input.
func DecodeMessage(b []byte) (Message, error) {
	var m Message
	if err := jsonproblem.Decode(bytes.NewReader(b), maxMessageBodySize, &m); err != nil {
		return Message{}, fmt.Errorf("relay: message: %w", err)
	}
	if m.ID == 0 || len(m.Envelope) == 0 {
		return Message{}, errors.New("relay: message: id or envelope missing")
	}
	if len(m.Envelope) > MaxEnvelopeSize {
		return Message{}, errors.New("relay: message: envelope too large")
	}
	return m, nil
}

// lostError returns the identity error for the reason of a refused
// certificate (a 403 answer's body): one matching identity.ErrIdentityLost
// when the agbot says the agent's identity is lost, else nil. Only the
// reason token is taken from the body, never its text.
func lostError(body io.Reader) error {
	var e apiError
	if json.NewDecoder(io.LimitReader(body, 4<<10)).Decode(&e) != nil {
		return nil
	}
	switch e.Reason {
	case reasonUnknown:
		return identity.ErrUnknownInstance
	case reasonRevoked:
		return identity.ErrRevoked
	case reasonExpired:
		return identity.ErrExpired
	}
	return nil
}

func nodePath(n Node, what string) string {
	return "/relay/nodes/" + url.PathEscape(n.Org) + "/" + url.PathEscape(n.Node) + "/" + what
}

// do sends a request and returns the body of an answer with one of the
// wanted statuses (nil for 204 and 404). Other answers are errors naming
// the status only: the relay's error bodies are not trusted.
func (c *Client) do(ctx context.Context, method, path string, body []byte, want ...int) ([]byte, error) {
	return c.doHeader(ctx, method, path, body, nil, want...)
}

// doHeader is do that also stores the answer's header in header, if not
// nil.
func (c *Client) doHeader(ctx context.Context, method, path string, body []byte, header *http.Header, want ...int) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("relay: %s %s: %w", method, req.URL.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if header != nil {
		*header = resp.Header
	}
	if resp.StatusCode == http.StatusForbidden {
		if lost := lostError(resp.Body); lost != nil {
			return nil, fmt.Errorf("relay: %s %s: status %d: %w", method, req.URL.Path, resp.StatusCode, lost)
		}
	}
	for _, st := range want {
		if resp.StatusCode != st {
			continue
		}
		if st == http.StatusNoContent || st == http.StatusNotFound {
			return nil, nil
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxMessageBodySize+1))
		if err != nil {
			return nil, fmt.Errorf("relay: %s %s: reading the answer: %w", method, req.URL.Path, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("relay: %s %s: status %d", method, req.URL.Path, resp.StatusCode)
}
