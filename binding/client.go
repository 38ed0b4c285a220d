package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Client defaults.
const (
	// DefaultMaxAttempts is how often a 503 answer is tried in all.
	DefaultMaxAttempts = 4
	// DefaultRetryDelay is the pause between attempts after a 503.
	DefaultRetryDelay = 500 * time.Millisecond
	// DefaultClientTimeout bounds one request when no HTTPClient is given.
	DefaultClientTimeout = 30 * time.Second
	// maxResponseSize bounds the API answers the client reads.
	maxResponseSize = 64 << 10
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// HTTPClient sends the requests. Default: a client with
	// DefaultClientTimeout.
	HTTPClient *http.Client
	// Authorize adds the caller's credentials to each request (for
	// instance r.SetBasicAuth). Credentials never go into the URL.
	Authorize func(r *http.Request)
	// MaxAttempts is how often a request answered with 503 is sent in all;
	// 1 disables retrying. Default DefaultMaxAttempts.
	MaxAttempts int
	// RetryDelay is the pause between attempts. Default DefaultRetryDelay.
	RetryDelay time.Duration
	// Logger receives a debug line per retry. Default: discard.
	Logger *slog.Logger
}

// Client calls the agbot existence API, as the hzn CLI does for deploycheck,
// adding a deployment policy and publishing a pattern. It implements
// ExistenceChecker; the organisation is the one the agbot derives from the
// caller's credentials. Safe for concurrent use.
type Client struct {
	base *url.URL
	opts ClientOptions
	log  *slog.Logger
}

// NewClient returns a client of the agbot API at agbotURL (an absolute
// http or https URL, possibly with a path prefix, without credentials).
func NewClient(agbotURL string, opts ClientOptions) (*Client, error) {
	u, err := checkServiceURL("agbot", agbotURL)
	if err != nil {
		return nil, err
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: DefaultClientTimeout}
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultRetryDelay
	}
	c := &Client{base: u, opts: opts, log: opts.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// checkServiceURL parses an absolute http(s) URL without user info.
func checkServiceURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("binding: %s URL is not a URL", what)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("binding: %s URL must start with http:// or https://", what)
	case u.Host == "":
		return nil, fmt.Errorf("binding: %s URL has no host", what)
	case u.User != nil:
		return nil, fmt.Errorf("binding: %s URL must not carry credentials; use ClientOptions.Authorize", what)
	}
	return u, nil
}

// SecretExists implements ExistenceChecker with GET /secrets/<name>. A 503
// answer is retried up to MaxAttempts in all, RetryDelay apart, unless the
// agbot says the store refused it. Errors match secretstore kinds:
// ErrUnavailable (503 after the retries, 5xx, network), ErrPermission (401,
// 403, store_forbidden), ErrInvalid (400).
func (c *Client) SecretExists(ctx context.Context, name VaultSecretName) (bool, error) {
	segs := strings.Split(name.String(), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	u := c.base.JoinPath(append([]string{strings.Trim(SecretsPath, "/")}, segs...)...)
	fail := func(kind error, format string, args ...any) (bool, error) {
		return false, secretstore.NewError(secretstore.OpStat, name.String(), kind, fmt.Errorf(format, args...))
	}
	for attempt := 1; ; attempt++ {
		status, body, err := fetch(ctx, c.opts, u)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return fail(secretstore.ErrUnavailable, "agbot API: %w", err)
		}
		switch status {
		case http.StatusOK, http.StatusNotFound:
			var e struct {
				Exists *bool `json:"exists"`
			}
			if json.Unmarshal(body, &e) != nil || e.Exists == nil {
				return fail(secretstore.ErrUnavailable, "agbot API answered %d without an existence result; check the agbot URL", status)
			}
			return *e.Exists, nil
		case http.StatusBadRequest:
			return fail(secretstore.ErrInvalid, "agbot API refused the name (%s)", apiCode(body))
		case http.StatusUnauthorized, http.StatusForbidden:
			return fail(secretstore.ErrPermission, "agbot API refused the caller's credentials (%d)", status)
		case http.StatusServiceUnavailable:
			code := apiCode(body)
			if code == APIErrStoreForbidden {
				return fail(secretstore.ErrPermission, "the secret store refused the agbot (%s)", code)
			}
			if attempt >= c.opts.MaxAttempts {
				return fail(secretstore.ErrUnavailable, "agbot API answered 503 (%s) %d times", code, attempt)
			}
			c.log.Debug("agbot API unavailable, retrying", "vaultSecret", name.String(), "attempt", attempt, "code", code)
			t := time.NewTimer(c.opts.RetryDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return false, ctx.Err()
			case <-t.C:
			}
		default:
			kind := secretstore.ErrInvalid
			if status >= 500 {
				kind = secretstore.ErrUnavailable
			}
			return fail(kind, "agbot API answered %d (%s)", status, apiCode(body))
		}
	}
}

// Health calls GET /health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	status, body, err := fetch(ctx, c.opts, c.base.JoinPath(strings.Trim(HealthPath, "/")))
	switch {
	case err != nil:
		return h, fmt.Errorf("binding: agbot health: %w", err)
	case status != http.StatusOK:
		return h, fmt.Errorf("binding: agbot health answered %d", status)
	}
	if err := unmarshal(body, "agbot health", &h); err != nil {
		return h, err
	}
	return h, nil
}

// fetch sends an authorised GET with opts and returns the status and at
// most maxResponseSize bytes of the body.
func fetch(ctx context.Context, opts ClientOptions, u *url.URL) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if opts.Authorize != nil {
		opts.Authorize(req)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: DefaultClientTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}

// apiCode returns the code of an APIError body, or "no error code".
func apiCode(body []byte) string {
	var e APIError
	if json.Unmarshal(body, &e) != nil || e.Code == "" {
		return "no error code"
	}
	return e.Code
}

// HubURLs is Open Horizon's management hub URL document, served by the
// exchange, from which the CLI learns the agbot's URL:
//
//	{"exchange": "...", "mms": "...", "management-console": "...", "agreement-bot": "..."}
type HubURLs struct {
	Exchange          string `json:"exchange"`
	MMS               string `json:"mms"`
	ManagementConsole string `json:"management-console"`
	AgreementBot      string `json:"agreement-bot"`
}

// DecodeHubURLs reads a hub URL document of at most MaxDocumentSize bytes;
// unknown fields are ignored.
func DecodeHubURLs(r io.Reader) (HubURLs, error) {
	var h HubURLs
	err := decodeLimited(r, MaxDocumentSize, "hub URL document", &h)
	return h, err
}

// AgbotURL returns the "agreement-bot" URL, checked to be an absolute http
// or https URL without credentials.
func (h HubURLs) AgbotURL() (*url.URL, error) {
	if h.AgreementBot == "" {
		return nil, errors.New(`binding: the hub URL document has no "agreement-bot" URL`)
	}
	return checkServiceURL("agreement-bot", h.AgreementBot)
}

// FetchHubURLs reads the hub URL document at docURL (the exchange resource
// listing the hub's URLs), sending opts.Authorize's credentials.
func FetchHubURLs(ctx context.Context, docURL string, opts ClientOptions) (HubURLs, error) {
	u, err := checkServiceURL("hub URL document", docURL)
	if err != nil {
		return HubURLs{}, err
	}
	status, body, err := fetch(ctx, opts, u)
	switch {
	case err != nil:
		return HubURLs{}, fmt.Errorf("binding: fetching the hub URL document: %w", err)
	case status != http.StatusOK:
		return HubURLs{}, fmt.Errorf("binding: fetching the hub URL document: status %d", status)
	}
	return DecodeHubURLs(bytes.NewReader(body))
}

// NewClientFromHub fetches the hub URL document at docURL and returns a
// Client of its agbot, both requests using opts.
func NewClientFromHub(ctx context.Context, docURL string, opts ClientOptions) (*Client, error) {
	h, err := FetchHubURLs(ctx, docURL, opts)
	if err != nil {
		return nil, err
	}
	u, err := h.AgbotURL()
	if err != nil {
		return nil, err
	}
	return NewClient(u.String(), opts)
}
