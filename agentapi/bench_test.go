package agentapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agentapi"
)

// BenchmarkLoopback measures GET /secrets/{name} over loopback with
// concurrent clients, beside a hello-world handler on the same server, in
// the same run: "hello" and "secret" report each path's req/s alone;
// "interleaved" has every client alternate the two and reports
// secret/hello-%, the secret path's rate as a percentage of hello-world's.
//
//	go test -bench Loopback -benchmem -run '^$' ./agentapi
func BenchmarkLoopback(b *testing.B) {
	s, err := agentapi.Open(context.Background(), agentapi.Options{Root: b.TempDir() + "/secrets"})
	require.NoError(b, err)
	defer s.Close()
	p, inst := twoServiceProposal()
	_, err = s.ApplyProposal(context.Background(), p, inst)
	require.NoError(b, err)
	h, err := agentapi.NewHandler(s, agentapi.HandlerOptions{Tokens: testTokens, Prefix: "/api"})
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

	// Both paths interleaved by every client, so both see the same load
	// on a shared machine: the ratio of their mean latencies is the ratio of
	// the rates each would reach.
	b.Run("interleaved", func(b *testing.B) {
		b.SetParallelism(8)
		var helloNs, secretNs atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				t0 := time.Now()
				get(b, hello)
				t1 := time.Now()
				get(b, secret)
				helloNs.Add(int64(t1.Sub(t0)))
				secretNs.Add(int64(time.Since(t1)))
			}
		})
		b.ReportMetric(float64(helloNs.Load())/float64(b.N)/1e3, "hello-µs/req")
		b.ReportMetric(float64(secretNs.Load())/float64(b.N)/1e3, "secret-µs/req")
		b.ReportMetric(100*float64(helloNs.Load())/float64(secretNs.Load()), "secret/hello-%")
	})
}
