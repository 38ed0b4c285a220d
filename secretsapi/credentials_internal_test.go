package secretsapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
)

// FuzzReadCredentials: whatever a request's Authorization and anax's
// headers hold, credentials are read as anax reads them and never print
// their secret.
func FuzzReadCredentials(f *testing.F) {
	for _, s := range []struct{ auth, org, user string }{
		{"Basic bXlvcmcvYWxpY2U6cHc=", "", ""}, {"Bearer tok", "myorg", "alice"}, {"Bearer ", "", ""}, {"Basic !!", "", ""}, {"bearer x", "o", "u"},
	} {
		f.Add(s.auth, s.org, s.user)
	}
	f.Fuzz(func(t *testing.T, auth, org, user string) {
		r := &http.Request{Header: http.Header{}}
		r.Header.Set("Authorization", auth)
		r.Header.Set(headerOrganization, org)
		r.Header.Set(headerUserID, user)
		c, ok := ReadCredentials(r)
		if !ok {
			return
		}
		if c.Bearer {
			assert.Equal(t, Credentials{Org: r.Header.Get(headerOrganization), User: r.Header.Get(headerUserID),
				Secret: edgesecrets.Sensitive(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")), Bearer: true}, c)
		} else {
			id, password, basic := r.BasicAuth()
			require.True(t, basic)
			assert.Equal(t, password, string(c.Secret))
			assert.Equal(t, id, strings.TrimPrefix(c.Org+"/"+c.User, "/"))
			assert.NotContains(t, c.User, "/"+c.Org, "the org is the part before the first slash")
		}
		// The printed forms do not depend on the secret, only on whether
		// there is one.
		other := c
		if c.Secret != "" {
			other.Secret = "other"
		}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			assert.Equal(t, fmt.Sprintf(verb, other), fmt.Sprintf(verb, c))
		}
		assert.Equal(t, logged(t, other), logged(t, c))
	})
}

// logged is what slog's JSON handler writes of c.
func logged(t *testing.T, c Credentials) string {
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})).Info("credentials", "c", c)
	require.NotEmpty(t, b.String())
	return b.String()
}
