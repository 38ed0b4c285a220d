package promtest_test

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
	"github.com/edgesecrets/edgesecrets/internal/testkit/promtest"
)

// waitTimeout bounds every wait for a scrape or an evaluation: many
// intervals, on a loaded machine.
const waitTimeout = time.Minute

// exporter is a tiny /metrics endpoint with hand-written exposition text:
// a counter, a gauge and a histogram. The gauge can be changed.
type exporter struct {
	srv     *httptest.Server
	celsius atomic.Int64 // the gauge, in tenths
}

func startExporter(t *testing.T) *exporter {
	t.Helper()
	e := &exporter{}
	e.celsius.Store(215)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = fmt.Fprintf(w, `# HELP demo_requests_total Requests served.
# TYPE demo_requests_total counter
demo_requests_total{code="200"} 7
demo_requests_total{code="500"} 2
# HELP demo_temperature_celsius A temperature.
# TYPE demo_temperature_celsius gauge
demo_temperature_celsius %s
# HELP demo_latency_seconds Latency.
# TYPE demo_latency_seconds histogram
demo_latency_seconds_bucket{le="0.1"} 3
demo_latency_seconds_bucket{le="1"} 9
demo_latency_seconds_bucket{le="+Inf"} 10
demo_latency_seconds_sum 4.2
demo_latency_seconds_count 10
`, strconv.FormatFloat(float64(e.celsius.Load())/10, 'f', -1, 64))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *exporter) addr() string { return e.srv.Listener.Addr().String() }

// oneValue is a WaitFor condition: a single sample of value v.
func oneValue(v float64) func([]promtest.Sample) bool {
	return func(s []promtest.Sample) bool { return len(s) == 1 && s[0].Value == v }
}

func TestServerScrapesItsTargetsAndAnswersQueries(t *testing.T) {
	t.Parallel()
	exp := startExporter(t)
	s := promtest.Start(t, promtest.Options{Targets: map[string][]string{"demo": {exp.addr()}}})
	s.WaitFor(t, `up{job="demo"}`, oneValue(1), waitTimeout)

	for _, tc := range []struct {
		query  string
		labels map[string]string
		value  float64
	}{
		{`demo_requests_total{code="500"}`, map[string]string{"__name__": "demo_requests_total", "code": "500", "job": "demo", "instance": exp.addr()}, 2},
		{`sum(demo_requests_total)`, map[string]string{}, 9},
		{`demo_temperature_celsius`, map[string]string{"__name__": "demo_temperature_celsius", "job": "demo", "instance": exp.addr()}, 21.5},
		{`demo_latency_seconds_count`, map[string]string{"__name__": "demo_latency_seconds_count", "job": "demo", "instance": exp.addr()}, 10},
		// Rank 5 of 10 falls in (0.1, 1], holding observations 4 to 9.
		{`histogram_quantile(0.5, sum by (le) (demo_latency_seconds_bucket))`, map[string]string{}, 0.4},
		{`scalar(demo_temperature_celsius)`, map[string]string{}, 21.5},
	} {
		t.Run(tc.query, func(t *testing.T) {
			got, err := s.Query(t.Context(), tc.query)
			require.NoError(t, err)
			require.Len(t, got, 1, promtest.FormatSamples(got))
			assert.Equal(t, tc.labels, got[0].Labels)
			assert.InDelta(t, tc.value, got[0].Value, 1e-9)
		})
	}

	// Scrapes go on: a change of the gauge shows.
	exp.celsius.Store(300)
	s.WaitFor(t, `demo_temperature_celsius`, oneValue(30), waitTimeout)
}

func TestQueryResultsThatAreNotSamples(t *testing.T) {
	t.Parallel()
	exp := startExporter(t)
	s := promtest.Start(t, promtest.Options{Targets: map[string][]string{"demo": {exp.addr()}}})
	s.WaitFor(t, `up{job="demo"}`, oneValue(1), waitTimeout)

	got, err := s.Query(t.Context(), `demo_temperature_celsius{job="absent"}`)
	require.NoError(t, err)
	assert.Empty(t, got, "no series: an empty vector")

	got, err = s.Query(t.Context(), `demo_temperature_celsius / 0`)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.True(t, math.IsInf(got[0].Value, 1), "+Inf decoded")

	_, err = s.Query(t.Context(), `sum(`)
	apiErr, ok := errors.AsType[*promtest.APIError](err)
	require.True(t, ok, "a malformed query is an *APIError: %v", err)
	assert.Equal(t, "bad_data", apiErr.Type)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Contains(t, err.Error(), `"sum("`, "the error names the query")

	_, err = s.Query(t.Context(), `up[1m]`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "matrix result")
}

func TestRuleFilesAreEvaluated(t *testing.T) {
	t.Parallel()
	exp := startExporter(t)
	rules := filepath.Join(t.TempDir(), "rules.yml")
	require.NoError(t, os.WriteFile(rules, []byte(`groups:
  - name: demo
    rules:
      - record: demo:requests:sum
        expr: sum(demo_requests_total)
      - alert: DemoHot
        expr: demo_temperature_celsius > 20
`), 0o600))
	s := promtest.Start(t, promtest.Options{
		Targets:            map[string][]string{"demo": {exp.addr()}},
		RuleFiles:          []string{rules},
		EvaluationInterval: 500 * time.Millisecond,
	})

	s.WaitFor(t, `ALERTS{alertname="DemoHot", alertstate="firing"}`, oneValue(1), waitTimeout)
	s.WaitFor(t, `demo:requests:sum`, oneValue(9), waitTimeout)
	got, err := s.Rules(t.Context())
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, promtest.Rule{Group: "demo", Name: "demo:requests:sum", Type: "recording", Health: "ok"}, got[0])
	assert.Equal(t, promtest.Rule{Group: "demo", Name: "DemoHot", Type: "alerting", Health: "ok", State: "firing"}, got[1])

	exp.celsius.Store(150)
	s.WaitFor(t, `ALERTS{alertname="DemoHot"}`, func(s []promtest.Sample) bool { return len(s) == 0 }, waitTimeout)
}

func TestStopLeavesNoServer(t *testing.T) {
	t.Parallel()
	var s *promtest.Server
	t.Run("running", func(t *testing.T) {
		s = promtest.Start(t, promtest.Options{})
		require.False(t, s.Exited())
		conn, err := net.Dial("tcp", s.Addr)
		require.NoError(t, err, "the server listens")
		require.NoError(t, conn.Close())
	})
	if s == nil {
		t.Skip("no server was started (see the subtest)")
	}
	if !s.Exited() {
		t.Fatal("the server process still runs after its test ended")
	}
	conn, err := net.Dial("tcp", s.Addr)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("something still listens on %s after the server's test ended", s.Addr)
	}
	s.Stop() // again: does nothing
}

func TestOptionsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts promtest.Options
		want string
	}{
		{"job without a name", promtest.Options{Targets: map[string][]string{"": {"127.0.0.1:9100"}}}, "empty name"},
		{"job without targets", promtest.Options{Targets: map[string][]string{"agbot": nil}}, `Targets["agbot"] lists no target`},
		{"target without a port", promtest.Options{Targets: map[string][]string{"agbot": {"127.0.0.1"}}}, `"127.0.0.1" is not host:port`},
		{"target with port 0", promtest.Options{Targets: map[string][]string{"agbot": {"127.0.0.1:0"}}}, `port "0" is not a port number`},
		{"target with a named port", promtest.Options{Targets: map[string][]string{"agbot": {"127.0.0.1:http"}}}, `port "http" is not a port number`},
		{"target off loopback", promtest.Options{Targets: map[string][]string{"agbot": {"10.0.0.1:9100"}}}, `"10.0.0.1:9100" is not a loopback address`},
		{"target by a host name", promtest.Options{Targets: map[string][]string{"agbot": {"example.com:80"}}}, `"example.com:80" is not a loopback address`},
		{"negative scrape interval", promtest.Options{ScrapeInterval: -time.Second}, "ScrapeInterval -1s"},
		{"scrape interval under a millisecond", promtest.Options{ScrapeInterval: 1500 * time.Microsecond}, "ScrapeInterval 1.5ms"},
		{"negative evaluation interval", promtest.Options{EvaluationInterval: -time.Second}, "EvaluationInterval -1s"},
		{"relative metrics path", promtest.Options{MetricsPath: "metrics"}, `MetricsPath "metrics"`},
		{"missing rule file", promtest.Options{RuleFiles: []string{"no-such-rules.yml"}}, `"no-such-rules.yml" is not a readable file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := promtest.StartServer(t.Context(), t.TempDir(), tc.opts)
			require.Error(t, err)
			assert.NotErrorIs(t, err, promtest.ErrUnavailable)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestTargetsOnLoopbackAreAccepted(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"127.0.0.1:9100", "127.3.2.1:1", "[::1]:9100", "localhost:65535"} {
		t.Run(target, func(t *testing.T) {
			s := promtest.Start(t, promtest.Options{Targets: map[string][]string{"x": {target}}})
			got, err := s.Query(t.Context(), `count(up) or vector(0)`)
			require.NoError(t, err)
			require.Len(t, got, 1)
		})
	}
}

func TestWithoutPrometheus(t *testing.T) {
	t.Setenv(promtest.EnvBinDir, t.TempDir())
	_, _, err := promtest.Programs()
	require.ErrorIs(t, err, promtest.ErrUnavailable)
	assert.Contains(t, err.Error(), "no executable prometheus")

	_, err = promtest.StartServer(t.Context(), t.TempDir(), promtest.Options{})
	assert.ErrorIs(t, err, promtest.ErrUnavailable)
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// waitForFailure runs WaitFor on a recorder and returns its failure.
func waitForFailure(t *testing.T, s *promtest.Server, query string, timeout time.Duration) string {
	t.Helper()
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.WaitFor(rec, query, func([]promtest.Sample) bool { return false }, timeout)
	}()
	<-done
	return rec.msg
}

func TestWaitForFails(t *testing.T) {
	t.Parallel()
	exp := startExporter(t)
	s := promtest.Start(t, promtest.Options{Targets: map[string][]string{"demo": {exp.addr()}}})
	s.WaitFor(t, `up{job="demo"}`, oneValue(1), waitTimeout)

	msg := waitForFailure(t, s, `up{job="demo"}`, 2*time.Second)
	assert.Contains(t, msg, "not as wanted within 2s")
	assert.Contains(t, msg, `instance="`+exp.addr()+`"`, "the last result is shown")

	// A malformed query fails at once: the message is the server's
	// rejection, not the timeout's.
	msg = waitForFailure(t, s, `sum(`, 10*time.Minute)
	assert.Contains(t, msg, "bad_data")
	assert.NotContains(t, msg, "not as wanted")
}

func TestPromtool(t *testing.T) {
	path := promtest.Promtool(t)
	assert.Equal(t, "promtool", filepath.Base(path))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&0o111, "executable")
}

func TestABadRuleFileFailsTheStart(t *testing.T) {
	t.Parallel()
	if _, _, err := promtest.Programs(); err != nil {
		testkit.Unavailable(t, err.Error()+"; "+promtest.HowToGet)
	}
	rules := filepath.Join(t.TempDir(), "rules.yml")
	require.NoError(t, os.WriteFile(rules, []byte("groups:\n  - name: bad\n    rules:\n      - alert: Broken\n        expr: sum(\n"), 0o600))
	_, err := promtest.StartServer(t.Context(), t.TempDir(), promtest.Options{RuleFiles: []string{rules}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not become ready")
	assert.Contains(t, err.Error(), "rules.yml", "the server's output, naming the file, is in the error")
}
