package vault

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretstore/driver"
	"github.com/edgesecrets/edgesecrets/secretstore/storetest"
)

// writeCounter counts the requests that change state.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		w.writes.Add(1)
	}
	return w.next.RoundTrip(req)
}

// harness gives each conformance case drivers under a parentPath of its
// own on a shared KV mount of the shared dev server, and counts the write
// requests they send.
type harness struct {
	srv    *vaulttest.Server
	mount  string
	kv     string
	writes *writeCounter
}

var parents atomic.Int64

func (h *harness) MakeDriver(ctx context.Context) (driver.Store, error) {
	cfg := Config{
		Address: h.srv.Addr, Mount: h.mount, KVVersion: h.kv,
		ParentPath: fmt.Sprintf("conformance-%d", parents.Add(1)),
		Auth:       Auth{Method: methodToken, Token: edgesecrets.Sensitive(h.srv.RootToken)},
	}
	return newDriver(ctx, cfg, Options{WrapTransport: func(next http.RoundTripper) http.RoundTripper {
		h.writes.next = next
		return h.writes
	}})
}

func (h *harness) BackendWrites() int64 { return h.writes.writes.Load() }

func (h *harness) Close() {}

func runConformance(t *testing.T, kv int, opts storetest.Options) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, kv)
	storetest.Run(t, func(_ context.Context, t *testing.T) (storetest.Harness, error) {
		// kvVersion "auto" on v2 also exercises detection; v1 is explicit.
		version := kvAuto
		if kv == 1 {
			version = kv1
		}
		return &harness{srv: srv, mount: mount, kv: version, writes: &writeCounter{}}, nil
	}, opts)
}

func TestConformanceKV2(t *testing.T) {
	runConformance(t, 2, storetest.Options{})
}

func TestConformanceKV1(t *testing.T) {
	// KV v1 keeps no versions and no metadata: labels are rejected with
	// ErrInvalid (see the package documentation).
	runConformance(t, 1, storetest.Options{NoVersions: true, NoLabels: true})
}
