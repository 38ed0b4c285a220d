package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgesecrets/edgesecrets"
)

// hub is what an Agent talks to: the hub's identity API. *Client implements
// it over HTTP; *Issuer implements it in process.
type hub interface {
	register(ctx context.Context, req *registerBody) (*responseBody, error)
	refresh(ctx context.Context, id Identity, req *refreshBody) (*responseBody, error)
}

var (
	_ hub = (*Client)(nil)
	_ hub = (*Issuer)(nil)
)

// ClientOptions configures NewClient.
type ClientOptions struct {
	// BaseURL is where Issuer.Handler is mounted, e.g.
	// "https://hub.example.com/identity". Required; use https outside
	// tests.
	BaseURL string
	// HTTPClient defaults to a client with a 30 s timeout.
	HTTPClient *http.Client
	// PrepareRequest, when set, is called on every request before it is
	// sent, e.g. to add an administrator's credentials for Revoke.
	PrepareRequest func(*http.Request) error
	// Fallbacks are the base URLs of further hubs sharing the identity
	// records (agbots sharing a PostgreSQL state), tried in turn when a
	// request cannot reach the one before (a connection error, never after
	// an answer); the client keeps to the last one that answered. An agent
	// thus registers once, whichever hub it reaches.
	Fallbacks []string
}

// Client calls the hub's identity API (Issuer.Handler): an Agent's way to the
// hub (AgentOptions.Hub), and an administrator's to revoke.
type Client struct {
	bases   []*url.URL   // BaseURL, then Fallbacks
	current atomic.Int32 // the base that answered last
	http    *http.Client
	prepare func(*http.Request) error
}

// NewClient returns a Client.
func NewClient(opts ClientOptions) (*Client, error) {
	c := &Client{http: opts.HTTPClient, prepare: opts.PrepareRequest}
	for i, raw := range append([]string{opts.BaseURL}, opts.Fallbacks...) {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			if i == 0 {
				return nil, fmt.Errorf("identity: client: base URL must be an absolute http(s) URL")
			}
			return nil, fmt.Errorf("identity: client: fallback %d must be an absolute http(s) URL", i)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		u.RawPath = ""
		c.bases = append(c.bases, u)
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	return c, nil
}

// register posts a registration (POST /instance).
func (c *Client) register(ctx context.Context, req *registerBody) (*responseBody, error) {
	if req == nil {
		return nil, newError(opRegister, Identity{}, edgesecrets.ErrInvalid, "no request", nil)
	}
	body, err := req.Body()
	if err != nil {
		return nil, newError(opRegister, Identity{}, edgesecrets.ErrInvalid, "encoding the request", err)
	}
	return c.identityCall(ctx, opRegister, Identity{}, instancePath, body, http.StatusCreated)
}

// refresh posts a refresh (POST /instance/{provider}/{org}/{node}/{instanceId}).
func (c *Client) refresh(ctx context.Context, id Identity, req *refreshBody) (*responseBody, error) {
	if err := id.Validate(); err != nil {
		return nil, withOp(err, opRefresh)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, newError(opRefresh, id, edgesecrets.ErrInvalid, "encoding the request", err)
	}
	return c.identityCall(ctx, opRefresh, id, id.path(), body, http.StatusOK)
}

// Revoke revokes an instance (DELETE /instance/{provider}/{org}/{node}/{instanceId}).
func (c *Client) Revoke(ctx context.Context, id Identity) error {
	if err := id.Validate(); err != nil {
		return withOp(err, opRevoke)
	}
	resp, err := c.do(ctx, opRevoke, id, http.MethodDelete, id.path(), nil)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return responseError(opRevoke, id, resp)
	}
	return nil
}

func (c *Client) identityCall(ctx context.Context, op string, id Identity, path string, payload []byte, want int) (*responseBody, error) {
	resp, err := c.do(ctx, op, id, http.MethodPost, path, payload)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	if resp.StatusCode != want {
		return nil, responseError(op, id, resp)
	}
	out, err := decodeResponseBody(resp.Body)
	if err != nil {
		return nil, withInstance(withOp(err, op), id)
	}
	return out, nil
}

func (c *Client) do(ctx context.Context, op string, id Identity, method, path string, payload []byte) (*http.Response, error) {
	first := int(c.current.Load())
	var err error
	for i := range c.bases {
		b := (first + i) % len(c.bases)
		var resp *http.Response
		resp, err = c.doAt(ctx, op, id, c.bases[b], method, path, payload)
		if err == nil {
			c.current.Store(int32(b))
			return resp, nil
		}
		if ctx.Err() != nil || !errors.Is(err, edgesecrets.ErrUnavailable) {
			return nil, err
		}
	}
	return nil, err
}

// doAt sends one request to the hub at base.
func (c *Client) doAt(ctx context.Context, op string, id Identity, base *url.URL, method, path string, payload []byte) (*http.Response, error) {
	u := *base
	u.Path += path
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, newError(op, id, edgesecrets.ErrInvalid, "building the request", err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.prepare != nil {
		if err := c.prepare(req); err != nil {
			return nil, newError(op, id, edgesecrets.ErrInvalid, "preparing the request", err)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, newError(op, id, nil, "calling the hub", ctx.Err())
		}
		return nil, newError(op, id, edgesecrets.ErrUnavailable, "calling the hub", err)
	}
	return resp, nil
}

// maxErrorBody bounds the error body read from the hub.
const maxErrorBody = 4 << 10

// responseError turns an unexpected status into an error of the matching
// kind, quoting the hub's message (which the hub keeps free of secrets).
func responseError(op string, id Identity, resp *http.Response) error {
	kind := edgesecrets.ErrUnavailable
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusMethodNotAllowed:
		kind = edgesecrets.ErrInvalid
	case http.StatusUnauthorized:
		kind = ErrUnauthenticated
	case http.StatusForbidden:
		kind = ErrForbidden
	case http.StatusNotFound:
		kind = edgesecrets.ErrNotFound
	case http.StatusConflict:
		kind = edgesecrets.ErrConflict
	}
	var body errorBody
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := "no message"
	if json.Unmarshal(raw, &body) != nil {
		body = errorBody{} // a reason is taken from a well-formed answer only
	}
	if body.Error != "" {
		msg = fmt.Sprintf("%q", clipN(body.Error, 512))
	}
	var reason error
	switch body.Reason {
	case reasonRevoked:
		reason = ErrRevoked
	case reasonExpired:
		reason = ErrExpired
	case reasonUnknown:
		if kind == edgesecrets.ErrNotFound { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
			reason = ErrUnknownInstance
		}
	case reasonReplayed:
		if kind == edgesecrets.ErrConflict { //nolint:errorlint // kinds are compared as values: the kind itself, not an error chain
			// Its own kind, so that the error matches exactly one.
			kind = ErrReplayed
		}
	}
	return newError(op, id, kind, fmt.Sprintf("hub answered %d: %s", resp.StatusCode, msg), reason)
}

func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxBodyBytes))
	_ = body.Close()
}
