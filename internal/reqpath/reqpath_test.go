package reqpath

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name, target, referer string
		wantErr               string
	}{
		{name: "canonical", target: "/org/o/secrets/a/b"},
		{name: "root", target: "/"},
		{name: "escaped space and '?'", target: "/secrets/a%20b%3Fc"},
		{name: "a canonical referer", target: "/org/o/secrets/b", referer: "http://example.com/org/o/secrets/b"},
		{name: "another host's referer", target: "/org/o/secrets/b", referer: "http://elsewhere/org/o/secrets/a/../b"},
		{name: "absolute form", target: "http://example.com/org/o/secrets/b"},
		{name: "a//b", target: "/org/o/secrets/a//b", wantErr: "empty segment"},
		{name: "trailing slash", target: "/org/o/secrets/b/", wantErr: "empty segment"},
		{name: "a/../b", target: "/org/o/secrets/a/../b", wantErr: `".." segment`},
		{name: "./b", target: "/org/o/secrets/./b", wantErr: `"." segment`},
		{name: "%2e%2e", target: "/org/o/secrets/a/%2e%2e/b", wantErr: `".." segment`},
		{name: "%2E", target: "/org/o/secrets/%2E/b", wantErr: `"." segment`},
		{name: "%2F", target: "/org/o/secrets/a%2Fb", wantErr: "escaped slash"},
		{name: "%5C", target: "/org/o/secrets/a%5cb", wantErr: "escaped slash or backslash"},
		{name: "absolute form, a/../b", target: "http://example.com/org/o/secrets/a/../b", wantErr: `".." segment`},
		{name: "followed a cleaning redirect", target: "/org/o/secrets/b", referer: "http://example.com/org/o/secrets/a/../b", wantErr: "redirect"},
		{name: "followed a redirect from a//b", target: "/org/o/secrets/a/b", referer: "/org/o/secrets/a//b", wantErr: "redirect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			if tt.referer != "" {
				r.Header.Set("Referer", tt.referer)
			}
			err := Check(r)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// What a front handler left in Request.URL is checked too: a router that
// decoded or rewrote the path does not hide a non-canonical one.
func TestCheckURLAsLeft(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	r.URL = &url.URL{Path: "/org/o/secrets/a/../b"}
	assert.ErrorContains(t, Check(r), `".." segment`)
	r.URL = nil
	assert.Error(t, Check(r))
}

func TestHasQuery(t *testing.T) {
	for target, want := range map[string]bool{"/s/q": false, "/s/q?x=1": true, "/s/q?": true, "/s/q%3Fx=1": false} {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		assert.Equal(t, want, HasQuery(r), target)
	}
}

// Any request target: Check never panics, and what it accepts has no
// empty, "." or ".." segment once decoded.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"/a/b", "/a//b", "/a/%2e%2e/b", "/a%2Fb", "*", "http://h/a", "/a?b", "/%zz"} {
		f.Add(s, "")
	}
	f.Add("/b", "/a/../b")
	f.Fuzz(func(t *testing.T, target, referer string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		r := &http.Request{Method: http.MethodGet, URL: u, RequestURI: target, Header: http.Header{}, Host: "h"}
		if referer != "" {
			r.Header.Set("Referer", referer)
		}
		if Check(r) != nil {
			return
		}
		if u.Path == "/" {
			return
		}
		for seg := range strings.SplitSeq(strings.TrimPrefix(u.Path, "/"), "/") {
			require.NotContains(t, []string{"", ".", ".."}, seg, "accepted %q", target)
		}
	})
}
