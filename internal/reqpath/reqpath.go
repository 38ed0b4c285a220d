// Package reqpath tells whether a request names its resource the one way
// the library's HTTP handlers accept: a canonical path, exactly as the
// client sent it.
//
// A handler must never act on a name other than the one its client sent.
// Go's http.ServeMux answers a non-canonical path (a//b, a/../b, ./b) with
// a redirect to the cleaned path before the handler mounted on it runs,
// and Go's http.Client (Open Horizon's hzn) follows a 307 with the same
// method and body: "DELETE .../zzz/../dot.name" deletes "dot.name". Other
// routers clean paths, or decode %2F, without a redirect. So the handlers
// check the path as sent (Request.RequestURI, and Request.URL as whatever
// is in front left it) and refuse what is not canonical, and they refuse
// a request whose Referer shows that its client followed a redirect from
// a non-canonical spelling of it (Go's client sets Referer when it
// follows a redirect: net/http client.go, refererForURL), which is what a
// cleaning mux in front of them leaves behind.
package reqpath

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Check returns nil when r names its resource canonically: its path as
// sent starts with a slash and has no empty segment (a double or trailing
// slash), no "." or ".." segment (%2e counts as a dot) and no escaped
// slash or backslash (%2F, %5C); and r does not follow a redirect from a
// path on the same host that breaks these rules. The error says which
// rule was broken.
func Check(r *http.Request) error {
	if r.URL == nil {
		return errors.New("the request has no URL")
	}
	if err := checkEscaped(r.URL.EscapedPath()); err != nil {
		return err
	}
	if r.RequestURI != "" {
		sent, err := requestPath(r.RequestURI)
		if err != nil {
			return err
		}
		if err := checkEscaped(sent); err != nil {
			return err
		}
	}
	return checkReferer(r)
}

// HasQuery reports whether r carries a query string, even an empty one
// ("name?"): a name holding '?' that its client did not escape.
func HasQuery(r *http.Request) bool {
	return r.URL != nil && (r.URL.RawQuery != "" || r.URL.ForceQuery) || strings.Contains(r.RequestURI, "?")
}

// requestPath returns the escaped path of a request target as sent: the
// origin form "/p?q" or the absolute form "http://h/p?q".
func requestPath(target string) (string, error) {
	if strings.HasPrefix(target, "/") {
		p, _, _ := strings.Cut(target, "?")
		return p, nil
	}
	u, err := url.ParseRequestURI(target)
	if err != nil || u.Opaque != "" {
		return "", errors.New("the request target is not a path")
	}
	return u.EscapedPath(), nil
}

// checkEscaped checks an escaped path.
func checkEscaped(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New("the request path does not start with a slash")
	}
	if p == "/" {
		return nil
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "" {
			return errors.New("the request path has an empty segment (a double or trailing slash)")
		}
		plain, err := url.PathUnescape(seg)
		if err != nil {
			return errors.New("the request path has a malformed escape (a percent sign not followed by two hexadecimal digits)")
		}
		switch {
		case plain == "." || plain == "..":
			return fmt.Errorf("the request path has a %q segment", plain)
		case strings.ContainsAny(plain, `/\`):
			return errors.New("the request path has an escaped slash or backslash in a segment (a slash in a secret name is sent as it is, unescaped)")
		}
	}
	return nil
}

// checkReferer refuses a request that followed a redirect from a
// non-canonical path of the same host.
func checkReferer(r *http.Request) error {
	ref := r.Header.Get("Referer")
	if ref == "" {
		return nil
	}
	u, err := url.Parse(ref)
	if err != nil || (u.Host != "" && !strings.EqualFold(u.Host, r.Host)) {
		return nil
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if checkEscaped(p) != nil {
		return errors.New("the request follows a redirect from a non-canonical path (a cleaning router in front of the handler)")
	}
	return nil
}
