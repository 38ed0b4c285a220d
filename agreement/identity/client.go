package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Hub is what an Agent talks to: the hub's identity API. *Client implements
// it over HTTP; *Issuer implements it in process.
type Hub interface {
	Register(ctx context.Context, req *RegisterRequest) (*IdentityResponse, error)
	Refresh(ctx context.Context, id Identity, req *RefreshRequest) (*IdentityResponse, error)
}

var (
	_ Hub = (*Client)(nil)
	_ Hub = (*Issuer)(nil)
)

// ClientOptions configures NewClient.
type ClientOptions struct {
	// BaseURL is where the Handler is mounted, e.g.
	// "https://hub.example.com/identity". Required; use https outside
	// tests.
	BaseURL string
	// HTTPClient defaults to a client with a 30 s timeout.
	HTTPClient *http.Client
	// PrepareRequest, when set, is called on every request before it is
	// sent, e.g. to add an administrator's credentials for Revoke.
	PrepareRequest func(*http.Request) error
}

// Client calls the hub's identity API (Handler).
type Client struct {
	base    *url.URL
	http    *http.Client
	prepare func(*http.Request) error
}

// NewClient returns a Client.
func NewClient(opts ClientOptions) (*Client, error) {
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("identity: client: base URL must be an absolute http(s) URL")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	c := &Client{base: u, http: opts.HTTPClient, prepare: opts.PrepareRequest}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	return c, nil
}

// Register posts a registration (POST /instance).
func (c *Client) Register(ctx context.Context, req *RegisterRequest) (*IdentityResponse, error) {
	if req == nil {
		return nil, newError(OpRegister, Identity{}, ErrInvalid, "no request", nil)
	}
	body, err := req.Body()
	if err != nil {
		return nil, newError(OpRegister, Identity{}, ErrInvalid, "encoding the request", err)
	}
	return c.identityCall(ctx, OpRegister, Identity{}, instancePath, body, http.StatusCreated)
}

// Refresh posts a refresh (POST /instance/{provider}/{org}/{node}/{instanceId}).
func (c *Client) Refresh(ctx context.Context, id Identity, req *RefreshRequest) (*IdentityResponse, error) {
	if err := id.Validate(); err != nil {
		return nil, withOp(err, OpRefresh)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, newError(OpRefresh, id, ErrInvalid, "encoding the request", err)
	}
	return c.identityCall(ctx, OpRefresh, id, id.Path(), body, http.StatusOK)
}

// Revoke revokes an instance (DELETE /instance/{provider}/{org}/{node}/{instanceId}).
func (c *Client) Revoke(ctx context.Context, id Identity) error {
	if err := id.Validate(); err != nil {
		return withOp(err, OpRevoke)
	}
	resp, err := c.do(ctx, OpRevoke, id, http.MethodDelete, id.Path(), nil)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return responseError(OpRevoke, id, resp)
	}
	return nil
}

func (c *Client) identityCall(ctx context.Context, op string, id Identity, path string, payload []byte, want int) (*IdentityResponse, error) {
	resp, err := c.do(ctx, op, id, http.MethodPost, path, payload)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	if resp.StatusCode != want {
		return nil, responseError(op, id, resp)
	}
	out, err := DecodeIdentityResponse(resp.Body)
	if err != nil {
		return nil, withInstance(withOp(err, op), id)
	}
	return out, nil
}

func (c *Client) do(ctx context.Context, op string, id Identity, method, path string, payload []byte) (*http.Response, error) {
	u := *c.base
	u.Path += path
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, newError(op, id, ErrInvalid, "building the request", err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.prepare != nil {
		if err := c.prepare(req); err != nil {
			return nil, newError(op, id, ErrInvalid, "preparing the request", err)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, newError(op, id, nil, "calling the hub", ctx.Err())
		}
		return nil, newError(op, id, ErrUnavailable, "calling the hub", err)
	}
	return resp, nil
}

// maxErrorBody bounds the error body read from the hub.
const maxErrorBody = 4 << 10

// responseError turns an unexpected status into an error of the matching
// kind, quoting the hub's message (which the hub keeps free of secrets).
func responseError(op string, id Identity, resp *http.Response) error {
	kind := ErrUnavailable
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusMethodNotAllowed:
		kind = ErrInvalid
	case http.StatusUnauthorized:
		kind = ErrUnauthenticated
	case http.StatusForbidden:
		kind = ErrForbidden
	case http.StatusNotFound:
		kind = ErrNotFound
	case http.StatusConflict:
		kind = ErrConflict
	}
	var body errorBody
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := "no message"
	if json.Unmarshal(raw, &body) == nil && body.Error != "" {
		msg = fmt.Sprintf("%q", clipN(body.Error, 512))
	}
	var reason error
	switch body.Reason {
	case reasonRevoked:
		reason = ErrRevoked
	case reasonExpired:
		reason = ErrExpired
	case reasonReplayed:
		if kind == ErrConflict {
			// Its own kind, so that the error matches exactly one.
			kind = ErrReplayed
		}
	}
	return newError(op, id, kind, fmt.Sprintf("hub answered %d: %s", resp.StatusCode, msg), reason)
}

func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, MaxBodyBytes))
	_ = body.Close()
}
