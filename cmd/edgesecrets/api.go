package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/edgesecrets/edgesecrets/secretsapi"
)

// Limits of what the command reads.
const (
	maxTokenFile = 4 << 10
	// maxAnswer bounds an API answer: a page of 1000 agreements with
	// their reasons' messages fits.
	maxAnswer = 8 << 20
	// maxShownError bounds the agbot's error text the command repeats.
	maxShownError = 300
)

// api calls the agbot's operator routes with the admin token.
type api struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// newAPI checks the agbot URL and reads the admin token.
func newAPI(g globals, e env) (*api, error) {
	if g.agbot == "" {
		return nil, usageError("no agbot URL: give -agbot or set $%s", envAgbotURL)
	}
	u, err := url.Parse(g.agbot)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, usageError("-agbot: want an absolute http:// or https:// URL")
	case u.User != nil:
		// A password in the URL would end up in error messages.
		return nil, usageError("-agbot: the URL must not hold credentials; give the admin token with -token-file or $%s", envAdminToken)
	}
	token, err := readToken(g.tokenFile, e)
	if err != nil {
		return nil, err
	}
	return &api{base: u, token: token, hc: &http.Client{}}, nil
}

// readToken returns the admin token: the content of file, or else
// $EDGESECRETS_ADMIN_TOKEN. Errors name the file, never its content.
func readToken(file string, e env) (string, error) {
	if file == "" {
		tok := strings.TrimSpace(e.getenv(envAdminToken))
		if tok == "" {
			return "", usageError("no admin token: give -token-file (for the example agbot, <dir>/admin-token) or set $%s", envAdminToken)
		}
		return tok, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", usageError("-token-file: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	switch {
	case err != nil:
		return "", usageError("-token-file %s: %w", file, err)
	case len(b) > maxTokenFile:
		return "", usageError("-token-file %s: longer than 4 KiB", file)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", usageError("-token-file %s: want one token on one line", file)
	}
	return tok, nil
}

// call sends method path (with query) and decodes a 200 answer into out.
// notFound is the error of a 404 answer; nil makes a 404 mean the agbot
// does not serve the route.
func (a *api) call(ctx context.Context, method, path string, query url.Values, out any, notFound error) error {
	u := a.base.JoinPath(path)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return fail(exitUsage, "request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.hc.Do(req)
	if err != nil {
		return fail(exitUnreachable, "agbot at %s unreachable: %w", a.base.Redacted(), unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }() // read to the end or to the limit
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		return fail(exitUnreachable, "agbot at %s: reading the answer: %w", a.base.Redacted(), unwrapURLError(err))
	case len(body) > maxAnswer:
		return fail(exitUnreachable, "agbot at %s: answer larger than %d bytes", a.base.Redacted(), maxAnswer)
	}
	what := method + " " + path
	switch resp.StatusCode {
	case http.StatusOK:
		if err := json.Unmarshal(body, out); err != nil {
			return fail(exitUnreachable, "%s: the answer is not the operator API's (%v); check -agbot", what, jsonProblem(err))
		}
		return nil
	case http.StatusUnauthorized:
		return fail(exitUnreachable, "%s: the agbot refused the admin token (401: %s); check -token-file or $%s", what, errorText(body), envAdminToken)
	case http.StatusForbidden:
		return fail(exitUnreachable, "%s: the agbot refused the caller (403: %s)", what, errorText(body))
	case http.StatusNotFound:
		if notFound != nil {
			return notFound
		}
		return fail(exitUnreachable, "%s: the agbot does not serve the operator API (404); check -agbot", what)
	case http.StatusBadRequest:
		return usageError("%s: the agbot refused the request (400: %s)", what, errorText(body))
	}
	// What an error answer also reports (the release's count) is kept.
	_ = json.Unmarshal(body, out)
	return fail(exitUnreachable, "%s: the agbot answered %d (%s)", what, resp.StatusCode, errorText(body))
}

// unwrapURLError drops url.Error's method and URL: the command names the
// agbot itself.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// jsonProblem describes a decoding error without quoting the input.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q holds a JSON %s", te.Field, te.Value)
	}
	return "invalid JSON"
}

// errorText is the "error" of an operator route's error body, cut short,
// or a note that there was none. The operator API's errors name
// agreements and secrets, never values.
func errorText(body []byte) string {
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(body, &e) != nil || (e.Error == "" && e.Code == "") {
		return "no explanation"
	}
	s := e.Error
	if s == "" {
		s = e.Code
	}
	// A terminal shows no control character the agbot sent.
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxShownError {
		s = s[:maxShownError]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "..."
	}
	return s
}

// The operator routes, from package secretsapi.
var (
	healthPath     = secretsapi.AdminHealthPath
	agreementsPath = secretsapi.AgreementsPath
	releasePath    = secretsapi.ReleasePath
)
