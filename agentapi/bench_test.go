//go:build unix

package agentapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// BenchmarkLoopback measures GET /secrets/{name} over loopback with
// concurrent clients, beside a hello-world handler on the same server, in
// the same run: "hello" and "secret" report each path's req/s alone;
// "alternating" runs both in alternating bursts from 16 clients, so that
// both meet the same load on a shared machine, and reports secret/hello-%,
// the secret path's rate as a percentage of hello-world's, and
// cpu-secret/hello-%, the same from the process's CPU time per request,
// which other processes' load on a shared machine does not skew.
//
//	go test -bench Loopback -benchmem -run '^$' ./agentapi
func BenchmarkLoopback(b *testing.B) {
	s, err := agentapi.Open(context.Background(), agentapi.Options{Root: b.TempDir() + "/secrets"})
	require.NoError(b, err)
	defer s.Close()
	p, inst := twoServiceProposal()
	_, err = s.ApplyProposal(context.Background(), p, inst)
	require.NoError(b, err)
	h, err := agentapi.NewHandler(s, agentapi.HandlerOptions{Authenticate: testTokens.Authenticate, Prefix: "/api"})
	require.NoError(b, err)
	mux := http.NewServeMux()
	mux.Handle("/api/", h)
	mux.HandleFunc("/hello", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello, world") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()

	get := func(b *testing.B, path string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.SetBasicAuth("a", "token-a")
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Errorf("GET %s: status %d", path, resp.StatusCode)
		}
	}
	const hello, secret = "/hello", "/api/secrets/password"

	// Each path alone: requests per second.
	for _, c := range []struct{ name, path string }{{"hello", hello}, {"secret", secret}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(8)
			b.ReportAllocs()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					get(b, c.path)
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}

	// Both paths in alternating bursts of the same size, so both see the
	// same load on a shared machine: the ratio of the two request rates.
	b.Run("alternating", func(b *testing.B) {
		const clients = 16
		// burst returns the wall time and the process CPU time (server and
		// clients; other processes' load does not count) of n requests.
		burst := func(path string, n int) (time.Duration, time.Duration) {
			var next atomic.Int64
			cpu0 := testkit.ProcessCPU(b)
			start := time.Now()
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for next.Add(1) <= int64(n) {
						get(b, path)
					}
				})
			}
			wg.Wait()
			return time.Since(start), testkit.ProcessCPU(b) - cpu0
		}
		size := max(b.N/10, 50)
		elapsed, cpu := map[string]time.Duration{}, map[string]time.Duration{}
		for done, round := 0, 0; done < b.N; done, round = done+size, round+1 {
			order := []string{hello, secret}
			if round%2 == 1 {
				order = []string{secret, hello}
			}
			for _, path := range order {
				wall, used := burst(path, size)
				elapsed[path] += wall
				cpu[path] += used
			}
		}
		requests := float64(size * ((b.N + size - 1) / size))
		b.ReportMetric(requests/elapsed[hello].Seconds(), "hello-req/s")
		b.ReportMetric(requests/elapsed[secret].Seconds(), "secret-req/s")
		b.ReportMetric(100*elapsed[hello].Seconds()/elapsed[secret].Seconds(), "secret/hello-%")
		b.ReportMetric(100*cpu[hello].Seconds()/cpu[secret].Seconds(), "cpu-secret/hello-%")
	})
}
