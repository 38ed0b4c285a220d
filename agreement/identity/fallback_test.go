package identity

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadURL returns the URL of a loopback port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	return u
}

// A client with fallbacks reaches the next hub when one cannot be reached,
// keeps to the one that answered, and never sends a request again after
// an answer, whatever it says.
func TestClientFallsBackOnlyWhenAHubCannotBeReached(t *testing.T) {
	hits := map[string]int{}
	serve := func(name string, h http.Handler) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[name]++
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	hub := newHub(t)
	live := serve("live", hub.Handler(nil))
	refusing := serve("refusing", http.NotFoundHandler())

	c, err := NewClient(ClientOptions{BaseURL: deadURL(t), Fallbacks: []string{live, refusing}})
	require.NoError(t, err)
	k := newAgentKeys(t)
	_, err = c.register(context.Background(), registerRequest(t, k, testID, "good", now()))
	require.NoError(t, err, "registered through the hub it could reach")
	assert.Equal(t, map[string]int{"live": 1}, hits)
	_, err = hub.store.Get(context.Background(), testID.Provider, testID.InstanceID)
	require.NoError(t, err)

	_, err = c.register(context.Background(), registerRequest(t, k, testID, "good", now()))
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"live": 2}, hits, "it keeps to the hub that answered")

	c2, err := NewClient(ClientOptions{BaseURL: refusing, Fallbacks: []string{live}})
	require.NoError(t, err)
	_, err = c2.register(context.Background(), registerRequest(t, k, testID, "good", now()))
	require.ErrorIs(t, err, edgesecrets.ErrNotFound, "an answer is final")
	assert.Equal(t, 1, hits["refusing"])
	assert.Equal(t, 2, hits["live"])

	all, err := NewClient(ClientOptions{BaseURL: deadURL(t), Fallbacks: []string{deadURL(t)}})
	require.NoError(t, err)
	_, err = all.register(context.Background(), registerRequest(t, k, testID, "good", now()))
	assert.ErrorIs(t, err, edgesecrets.ErrUnavailable)

	_, err = NewClient(ClientOptions{BaseURL: live, Fallbacks: []string{"not a URL"}})
	assert.ErrorContains(t, err, "fallback 1")
}
