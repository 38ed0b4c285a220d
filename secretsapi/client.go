package secretsapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/internal/jsonproblem"
	"github.com/edgesecrets/edgesecrets/internal/safename"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// Client defaults.
const (
	// defaultMaxAttempts is how often a 503 answer is tried in all.
	defaultMaxAttempts = 4
	// defaultRetryDelay is the pause between attempts after a 503.
	defaultRetryDelay = 500 * time.Millisecond
	// defaultClientTimeout bounds one request when no HTTPClient is given.
	defaultClientTimeout = 30 * time.Second
	// maxResponseSize bounds the API answers the client reads.
	maxResponseSize = 64 << 10
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// Org selects the route. With Org set, the client asks Open Horizon's
	// route, LIST /org/{Org}/secrets/<name>, which anax's agbot serves (and
	// hzn calls); Org must then be the organisation of the secrets (and, for
	// anax, of the credentials). Empty selects the design route,
	// GET /secrets/<name>, where the agbot takes the organisation from the
	// credentials.
	Org string
	// HTTPClient sends the requests. Default: a client with a 30s timeout
	// per request.
	HTTPClient *http.Client
	// Authorize adds the caller's credentials to each request. Open
	// Horizon's agbot takes HTTP Basic with "<org>/<user>" and the password
	// (r.SetBasicAuth(org+"/"+user, password)), or
	// "Authorization: Bearer <token>" with the headers X-Organization and
	// X-UserId. Credentials never go into the URL.
	Authorize func(r *http.Request)
	// MaxAttempts is how often a request answered with 503 is sent in all;
	// 1 disables retrying. Zero means 4.
	MaxAttempts int
	// RetryDelay is the pause between attempts. Zero means 500ms.
	RetryDelay time.Duration
	// Logger receives a debug line per retry. Default: discard.
	Logger *slog.Logger
}

// Client calls the agbot's existence API, as the hzn CLI does for
// deploycheck, adding a deployment policy and publishing a pattern. It
// implements binding.ExistenceChecker with the design route or Open Horizon's
// (ClientOptions.Org), and never reads a secret's value to learn whether
// it exists. Safe for concurrent use.
type Client struct {
	base *url.URL
	opts ClientOptions
	log  *slog.Logger
}

// NewClient returns a client of the agbot API at agbotURL (an absolute
// http or https URL, possibly with a path prefix, without credentials): for
// Open Horizon, the value of the environment variable HZN_AGBOT_URL, as hzn
// reads it.
func NewClient(agbotURL string, opts ClientOptions) (*Client, error) {
	u, err := checkServiceURL("agbot", agbotURL)
	if err != nil {
		return nil, err
	}
	if opts.Org != "" {
		if err := safename.Check(opts.Org); err != nil {
			return nil, fmt.Errorf("secretsapi: ClientOptions.Org: organisation %w", err)
		}
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: defaultClientTimeout}
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = defaultMaxAttempts
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = defaultRetryDelay
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
		return nil, fmt.Errorf("secretsapi: %s URL is not a URL", what)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("secretsapi: %s URL must start with http:// or https://", what)
	case u.Host == "":
		return nil, fmt.Errorf("secretsapi: %s URL has no host", what)
	case u.User != nil:
		return nil, fmt.Errorf("secretsapi: %s URL must not carry credentials; use ClientOptions.Authorize", what)
	}
	return u, nil
}

// SecretExists implements binding.ExistenceChecker: GET /secrets/<name>, or with
// ClientOptions.Org, LIST /org/{org}/secrets/<name>. A 503 answer is
// retried up to MaxAttempts in all, RetryDelay apart, unless the agbot says
// the store refused it. Errors match secretstore kinds: ErrUnavailable (503
// after the retries, 5xx, network, an answer without an existence result),
// ErrPermission (401, 403, store_forbidden), ErrInvalid (400).
//
// A deadline on ctx bounds the whole call, retries included: each request
// tells the agbot how long the caller waits (Prefer: wait=<seconds>, RFC
// 7240), which the handler honours by answering 503 in time
// rather than late; a 503 is tried again only while the deadline leaves
// room for the pause and another attempt; and a 503 answered before the
// deadline is what the call returns, not the deadline's error.
func (c *Client) SecretExists(ctx context.Context, name binding.VaultSecretName) (bool, error) {
	segs := strings.Split(name.String(), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	method, route := http.MethodGet, []string{strings.Trim(SecretsPath, "/")}
	if c.opts.Org != "" {
		method, route = MethodList, []string{strings.Trim(OrgPath, "/"), url.PathEscape(c.opts.Org), "secrets"}
	}
	u := c.base.JoinPath(append(route, segs...)...)
	fail := func(kind error, format string, args ...any) (bool, error) {
		return false, &secretstore.Error{Op: "stat", Name: name.String(), Kind: kind, Err: fmt.Errorf(format, args...)}
	}
	var unavailable error // the last 503's error
	for attempt := 1; ; attempt++ {
		began := time.Now()
		status, body, err := fetch(ctx, c.opts, method, u)
		if err != nil {
			switch {
			case ctx.Err() != nil && unavailable != nil:
				return false, unavailable
			case ctx.Err() != nil:
				return false, ctx.Err()
			}
			return fail(edgesecrets.ErrUnavailable, "agbot API: %w", err)
		}
		switch status {
		case http.StatusOK, http.StatusNotFound:
			var e struct {
				Exists *bool `json:"exists"`
			}
			if json.Unmarshal(body, &e) != nil || e.Exists == nil {
				return fail(edgesecrets.ErrUnavailable, "agbot API answered %d without an existence result; check the agbot URL%s", status, c.routeHint())
			}
			return *e.Exists, nil
		case http.StatusBadRequest:
			return fail(edgesecrets.ErrInvalid, "agbot API refused the name (%s)", answerSummary(body))
		case http.StatusUnauthorized, http.StatusForbidden:
			return fail(edgesecrets.ErrPermission, "agbot API refused the caller (%d: %s)", status, answerSummary(body))
		case http.StatusServiceUnavailable:
			summary := answerSummary(body)
			if summary == CodeStoreForbidden {
				return fail(edgesecrets.ErrPermission, "the secret store refused the agbot (%s)", summary)
			}
			_, unavailable = fail(edgesecrets.ErrUnavailable, "agbot API answered 503 (%s) %d times", summary, attempt)
			if attempt >= c.opts.MaxAttempts || !timeLeft(ctx, c.opts.RetryDelay+max(time.Since(began), time.Second)) {
				return false, unavailable
			}
			c.log.Debug("agbot API unavailable, retrying", "vaultSecret", name.String(), "attempt", attempt, "answer", summary)
			t := time.NewTimer(c.opts.RetryDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return false, ctx.Err()
			case <-t.C:
			}
		default:
			kind := edgesecrets.ErrInvalid
			if status >= 500 || status == http.StatusMethodNotAllowed {
				kind = edgesecrets.ErrUnavailable
			}
			return fail(kind, "agbot API answered %d (%s)%s", status, answerSummary(body), c.routeHint())
		}
	}
}

// timeLeft reports whether ctx's deadline, if any, is at least d away.
func timeLeft(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) >= d
}

// routeHint says, after an answer that was not the API's, which route was
// asked and what else to try.
func (c *Client) routeHint() string {
	if c.opts.Org == "" {
		return " (asked the design route GET /secrets/<name>; for Open Horizon's agbot set ClientOptions.Org)"
	}
	return " (asked Open Horizon's route LIST /org/{org}/secrets/<name>; anax's agbot serves names of letters, digits, '_', '-' and '/')"
}

// Health calls GET /health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	status, body, err := fetch(ctx, c.opts, http.MethodGet, c.base.JoinPath(strings.Trim(HealthPath, "/")))
	switch {
	case err != nil:
		return h, fmt.Errorf("secretsapi: agbot health: %w", err)
	case status != http.StatusOK:
		return h, fmt.Errorf("secretsapi: agbot health answered %d", status)
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return Health{}, fmt.Errorf("secretsapi: agbot health: %s", jsonproblem.Describe(err))
	}
	return h, nil
}

// fetch sends an authorised request without a body and returns the status
// and at most maxResponseSize bytes of the answer.
func fetch(ctx context.Context, opts ClientOptions, method string, u *url.URL) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if deadline, ok := ctx.Deadline(); ok {
		if wait := time.Until(deadline) / time.Second; wait >= 1 {
			req.Header.Set("Prefer", "wait="+strconv.Itoa(int(wait)))
		}
	}
	if opts.Authorize != nil {
		opts.Authorize(req)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: defaultClientTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize))
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}

// answerSummary returns what an error answer says, for an error message:
// the code of a design ErrorBody body, the sentence of Open Horizon's JSON
// string body (cut short), or "no explanation". The API's answers name
// secrets and callers, never values.
func answerSummary(body []byte) string {
	var e ErrorBody
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		return e.Code
	}
	var sentence string
	if json.Unmarshal(body, &sentence) == nil && sentence != "" {
		const max = 200
		if len(sentence) > max {
			sentence = strings.ToValidUTF8(sentence[:max], "") + "..."
		}
		return strconv.Quote(sentence)
	}
	return "no explanation"
}
