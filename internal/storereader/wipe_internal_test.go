package storereader

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/testgate"
	"github.com/edgesecrets/edgesecrets/mock"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

const value = "s3cret-value"

func newBackend(t *testing.T) *mock.Store {
	t.Helper()
	backend := mock.NewStore(nil)
	_, err := backend.Inner.Put(t.Context(), &secretstore.Secret{Name: "db", Data: edgesecrets.Data{"v": []byte(value)}}, secretstore.PutOptions{})
	require.NoError(t, err)
	return backend
}

// zeroed reports whether every byte of b is zero.
func zeroed(b []byte) bool { return len(b) > 0 && bytes.Count(b, []byte{0}) == len(b) }

// The cached copy of a value is wiped when it leaves the cache: by
// Invalidate, by expiry, and when a fresh read replaces it (issue 24: the
// reader's cached copy was dropped without a wipe).
func TestEvictedCopiesAreWiped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		evict func(t *testing.T, r *Reader)
	}{
		{"invalidated", func(_ *testing.T, r *Reader) { r.Invalidate("db") }},
		{"expired", func(t *testing.T, r *Reader) {
			time.Sleep(20 * time.Millisecond)
			_, err := r.Get(t.Context(), "db")
			require.NoError(t, err)
		}},
		{"replaced", func(t *testing.T, r *Reader) {
			r.mu.Lock()
			r.put("db", &secretstore.Secret{Name: "db", Data: edgesecrets.Data{"v": []byte("other")}})
			r.mu.Unlock()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttl := time.Minute
			if tc.name == "expired" {
				ttl = 10 * time.Millisecond
			}
			r := New(newBackend(t).Store, Options{TTL: ttl})
			got, err := r.Get(t.Context(), "db")
			require.NoError(t, err)
			r.mu.Lock()
			cachedBytes := r.cache["db"].secret.Data["v"]
			r.mu.Unlock()
			require.Equal(t, value, string(cachedBytes))

			tc.evict(t, r)
			assert.True(t, zeroed(cachedBytes), "the evicted copy is wiped")
			assert.Equal(t, value, string(got.Data["v"]), "the caller's own copy is untouched")
		})
	}
}

// The value a shared read returned is wiped once every caller sharing it
// took its own copy; each caller's copy is its own.
func TestSharedReadIsWipedAfterTheLastCopy(t *testing.T) {
	backend := newBackend(t)
	var gate testgate.Gate
	gate.Hold()
	backend.SetFaults(mock.Faults{Hook: func(ctx context.Context, _ mock.Call) error { return gate.Wait(ctx) }})
	r := New(backend.Store, Options{}) // no cache: only the flight holds the read
	var wg sync.WaitGroup
	copies := make([]*secretstore.Secret, 3)
	for i := range copies {
		wg.Go(func() {
			s, err := r.Get(context.Background(), "db")
			assert.NoError(t, err)
			copies[i] = s
		})
	}
	var f *flight[*secretstore.Secret]
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		f = r.gets["db"]
		return f != nil && f.refs == len(copies)
	}, 5*time.Second, time.Millisecond, "three callers share one read")
	gate.Release()
	wg.Wait()
	require.NotNil(t, f.val)
	assert.True(t, zeroed(f.val.Data["v"]), "the shared read is wiped")
	for _, c := range copies {
		assert.Equal(t, value, string(c.Data["v"]), "each caller keeps its copy")
	}
	assert.Len(t, backend.Calls("get", "db"), 1, "one read")
}
