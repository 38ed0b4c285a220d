// Package promtest starts real Prometheus servers for tests, and finds
// promtool for the alert rules' tests: the programs of Debian's prometheus
// package, which scripts/devprometheus.sh unpacks when they are missing,
// found through the EDGESECRETS_PROMETHEUS_BIN environment variable.
//
// A server listens on 127.0.0.1 at a free port, keeps its data in a
// temporary directory, scrapes the loopback targets it is given every
// ScrapeInterval (a second by default) and evaluates the rule files it is
// given. It is killed by PID when its test ends, and its output is kept out
// of the test log unless the test fails. Its HTTP API is read with plain
// net/http: Query for instant queries, WaitFor to poll one until a
// condition holds, Rules for the loaded rules' health. A test scraping an
// agbot reads, for example:
//
//	s := promtest.Start(t, promtest.Options{Targets: map[string][]string{"agbot": {agbotAddr}}})
//	s.WaitFor(t, `up{job="agbot"}`, func(r []promtest.Sample) bool {
//		return len(r) == 1 && r[0].Value == 1
//	}, time.Minute)
//	got, err := s.Query(t.Context(), `sum(edgesecrets_delivery_agreements{condition="waiting"})`)
//
// Prometheus applies a new scrape configuration after up to five seconds:
// the first scrape of a target comes that long after Start.
//
// Without the programs, tests skip with a message saying how to get them;
// in CI (CI=true) they fail instead.
package promtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// EnvBinDir names the environment variable holding the directory of the
// prometheus and promtool programs. Unset, promtest looks for prometheus
// on PATH, and takes promtool from the same directory.
const EnvBinDir = "EDGESECRETS_PROMETHEUS_BIN"

// HowToGet tells a developer how to make the Prometheus tests run.
const HowToGet = "run `bash scripts/test.sh`, or `export " + EnvBinDir + "=$(scripts/devprometheus.sh)` then go test"

// ErrUnavailable is wrapped by StartServer's and Programs' errors when this
// machine has no Prometheus to run.
var ErrUnavailable = errors.New("no Prometheus available")

const (
	// DefaultScrapeInterval is Options.ScrapeInterval's zero value.
	DefaultScrapeInterval = time.Second
	// startTimeout bounds how long a server may take to be ready.
	// Generous: a loaded 2-core machine is slow.
	startTimeout = 2 * time.Minute
	// requestTimeout bounds one HTTP API request.
	requestTimeout = 30 * time.Second
	// outputMax is how much of a server's output is kept.
	outputMax = 1 << 20
)

// Options configure a server.
type Options struct {
	// Targets maps each scrape job's name to the host:port addresses it
	// scrapes, at MetricsPath over plain HTTP. The hosts must be loopback
	// addresses (127.0.0.0/8, ::1 or localhost).
	Targets map[string][]string
	// MetricsPath is the path scraped on every target; "" means /metrics.
	MetricsPath string
	// ScrapeInterval is how often each target is scraped (and the scrape
	// timeout); zero means DefaultScrapeInterval. Whole milliseconds.
	ScrapeInterval time.Duration
	// EvaluationInterval is how often the rules are evaluated; zero means
	// ScrapeInterval. Whole milliseconds.
	EvaluationInterval time.Duration
	// RuleFiles are rule files to load, by path (relative ones from the
	// test's working directory).
	RuleFiles []string
}

// Server is a running Prometheus server.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:<port>.
	URL string
	// Addr is the address it listens on, 127.0.0.1:<port>.
	Addr string

	proc   *testkit.Process
	out    *testkit.TailBuffer
	client *http.Client
	poll   time.Duration // WaitFor's polling period
}

// Sample is one element of a query's result: an instant vector's series
// with its value, or a scalar (with no labels).
type Sample struct {
	// Labels are the series' labels, __name__ included when the result
	// keeps it; empty for a scalar.
	Labels map[string]string
	// Value is the sample's value; NaN and ±Inf as Prometheus gives them.
	Value float64
}

// Rule is a rule of a loaded rule file, as the server reports it.
type Rule struct {
	// Group is the name of the rule's group.
	Group string
	// Name is the alert's name, or the recording rule's metric name.
	Name string
	// Type is "alerting" or "recording".
	Type string
	// Health is "ok", "err" or "unknown" (not evaluated yet).
	Health string
	// LastError is the last evaluation's error, "" if none.
	LastError string
	// State is an alerting rule's state: "inactive", "pending" or
	// "firing"; "" for a recording rule.
	State string
}

// APIError is an error answer of the server's HTTP API.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Type is Prometheus's errorType: "bad_data" for a malformed query,
	// "execution", "timeout", "canceled", "internal", "unavailable"...
	Type string
	// Message is Prometheus's error message.
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("prometheus API: HTTP %d, %s: %s", e.StatusCode, e.Type, e.Message)
}

// Programs returns the paths of the prometheus and promtool programs, or
// an error wrapping ErrUnavailable saying what is missing.
func Programs() (prometheus, promtool string, err error) {
	dir := os.Getenv(EnvBinDir)
	if dir == "" {
		path, err := exec.LookPath("prometheus")
		if err != nil {
			return "", "", fmt.Errorf("%w: %s is not set and no prometheus is on PATH", ErrUnavailable, EnvBinDir)
		}
		dir = filepath.Dir(path)
	}
	var paths [2]string
	for i, name := range []string{"prometheus", "promtool"} {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", "", fmt.Errorf("%w: no executable %s in %s", ErrUnavailable, name, dir)
		}
		paths[i] = p
	}
	return paths[0], paths[1], nil
}

// Promtool returns promtool's path. Without it, it skips the test, or
// fails it when CI is set.
func Promtool(t testing.TB) string {
	t.Helper()
	_, promtool, err := Programs()
	if err != nil {
		unavailable(t, err)
	}
	return promtool
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	testkit.Unavailable(t, fmt.Sprintf("promtest: %v; to run the Prometheus tests, %s", err, HowToGet))
}

// Start starts a server for opts, with its data in a temporary directory
// of t, and kills it when t ends. On test failure the server's output is
// logged. Bad options fail the test; a missing Prometheus skips it (fails
// it in CI).
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := StartServer(t.Context(), t.TempDir(), opts)
	if errors.Is(err, ErrUnavailable) {
		unavailable(t, err)
	}
	if err != nil {
		t.Fatalf("promtest: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("promtest: output of the Prometheus server at %s:\n%s", s.URL, s.Output())
		}
	})
	return s
}

// StartServer starts a server for opts, keeping its configuration and data
// in dir, and waits until it is ready. The caller must Stop it. It retries
// with another port if the chosen one was taken meanwhile. Its error wraps
// ErrUnavailable when there is no Prometheus to run.
func StartServer(ctx context.Context, dir string, opts Options) (*Server, error) {
	config, err := opts.config()
	if err != nil {
		return nil, err
	}
	bin, _, err := Programs()
	if err != nil {
		return nil, err
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, config, 0o600); err != nil {
		return nil, err
	}
	s, err := testkit.RetryPortTaken(func() (*Server, error) { return startOnce(ctx, bin, dir, configFile) })
	if err != nil {
		return nil, err
	}
	s.poll = max(min(opts.scrapeInterval()/4, 250*time.Millisecond), 10*time.Millisecond)
	return s, nil
}

func startOnce(ctx context.Context, bin, dir, configFile string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// A fresh data directory per attempt: a failed start may leave a lock.
	data, err := os.MkdirTemp(dir, "data-")
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	s := &Server{
		URL:    "http://" + addr,
		Addr:   addr,
		out:    &testkit.TailBuffer{Max: outputMax},
		client: &http.Client{Transport: tr, Timeout: requestTimeout},
	}
	cmd := exec.Command(bin,
		"--config.file="+configFile,
		"--storage.tsdb.path="+data,
		"--web.listen-address="+addr,
	)
	cmd.Dir = dir
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	if s.proc, err = testkit.StartProcess(cmd); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, testkit.NotReady("prometheus", err, s.Output())
	}
	return s, nil
}

// waitReady polls /-/ready until it answers 200.
func (s *Server) waitReady(ctx context.Context) error {
	return s.proc.WaitReady(ctx, startTimeout, 50*time.Millisecond, s.ready)
}

func (s *Server) ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close() // only the status is read
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/-/ready: HTTP %d", resp.StatusCode)
	}
	return nil
}

// Stop kills the server process by PID and waits for it to exit. It is
// safe to call more than once. Its data directory is the caller's to
// remove (Start's is removed with the test's temporary directory).
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Kill()
	}
}

// Exited reports whether the server process has ended.
func (s *Server) Exited() bool { return !s.proc.Running() }

// Output returns the server's output so far (its last MiB).
func (s *Server) Output() string { return s.out.String() }

// Query runs an instant query of promql at the current time through
// /api/v1/query and returns its result: the series of an instant vector,
// or one Sample without labels for a scalar. A range vector or string
// result is an error, and so is an error answer (an *APIError).
func (s *Server) Query(ctx context.Context, promql string) ([]Sample, error) {
	body, status, err := s.get(ctx, "/api/v1/query", url.Values{"query": {promql}})
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", promql, err)
	}
	samples, err := decodeQuery(body, status)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", promql, err)
	}
	return samples, nil
}

// Rules returns the rules the server has loaded, through /api/v1/rules,
// with the health of their last evaluation.
func (s *Server) Rules(ctx context.Context) ([]Rule, error) {
	body, status, err := s.get(ctx, "/api/v1/rules", nil)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	rules, err := decodeRules(body, status)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return rules, nil
}

// WaitFor runs the instant query promql until cond holds for its result,
// and returns that result. It polls several times per scrape interval,
// and fails t when timeout passes first (or at once for a query the server
// rejects as malformed), with the last result or error.
func (s *Server) WaitFor(t testing.TB, promql string, cond func([]Sample) bool, timeout time.Duration) []Sample {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	var (
		last    []Sample
		lastErr error
	)
	for {
		samples, err := s.Query(t.Context(), promql)
		if err == nil {
			if cond(samples) {
				return samples
			}
			last, lastErr = samples, nil
		} else {
			lastErr = err
			if apiErr, ok := errors.AsType[*APIError](err); ok && apiErr.Type == "bad_data" {
				t.Fatalf("promtest: %v", err)
			}
		}
		select {
		case <-deadline.C:
			if lastErr != nil {
				t.Fatalf("promtest: %q not as wanted within %v; last error: %v", promql, timeout, lastErr)
			}
			t.Fatalf("promtest: %q not as wanted within %v; last result:\n%s", promql, timeout, FormatSamples(last))
		case <-tick.C:
		}
	}
}

// FormatSamples renders samples one per line, labels sorted, for messages.
func FormatSamples(samples []Sample) string {
	if len(samples) == 0 {
		return "(empty)"
	}
	var b strings.Builder
	for _, s := range samples {
		b.WriteString("{")
		for i, k := range slices.Sorted(maps.Keys(s.Labels)) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s=%q", k, s.Labels[k])
		}
		fmt.Fprintf(&b, "} %v\n", s.Value)
	}
	return b.String()
}

// get sends a GET request for path with query and returns the answer's
// body (at most 16 MiB) and HTTP status.
func (s *Server) get(ctx context.Context, path string, query url.Values) ([]byte, int, error) {
	u := s.URL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = resp.Body.Close() }() // read in full below
	body, err := readLimited(resp.Body, 16<<20)
	if err != nil {
		return nil, 0, err
	}
	return body, resp.StatusCode, nil
}

// config renders opts as a Prometheus configuration file. JSON is YAML, so
// encoding/json writes it, quoting every name and address safely.
func (opts Options) config() ([]byte, error) {
	scrape := opts.scrapeInterval()
	eval := cmp.Or(opts.EvaluationInterval, scrape)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ScrapeInterval", scrape}, {"EvaluationInterval", eval}} {
		if d.v <= 0 || d.v%time.Millisecond != 0 {
			return nil, fmt.Errorf("promtest: Options.%s %v is not a positive whole number of milliseconds", d.name, d.v)
		}
	}
	path := opts.MetricsPath
	if path == "" {
		path = "/metrics"
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("promtest: Options.MetricsPath %q does not start with /", path)
	}
	type staticConfig struct {
		Targets []string `json:"targets"`
	}
	type scrapeConfig struct {
		JobName       string         `json:"job_name"`
		MetricsPath   string         `json:"metrics_path"`
		StaticConfigs []staticConfig `json:"static_configs"`
	}
	var jobs []scrapeConfig
	for _, job := range slices.Sorted(maps.Keys(opts.Targets)) {
		if job == "" {
			return nil, errors.New("promtest: Options.Targets has a job with an empty name")
		}
		targets := opts.Targets[job]
		if len(targets) == 0 {
			return nil, fmt.Errorf("promtest: Options.Targets[%q] lists no target", job)
		}
		for _, target := range targets {
			if err := checkTarget(target); err != nil {
				return nil, fmt.Errorf("promtest: Options.Targets[%q]: %w", job, err)
			}
		}
		jobs = append(jobs, scrapeConfig{JobName: job, MetricsPath: path, StaticConfigs: []staticConfig{{Targets: targets}}})
	}
	var rules []string
	for _, f := range opts.RuleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, fmt.Errorf("promtest: Options.RuleFiles: %q: %w", f, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("promtest: Options.RuleFiles: %q is not a readable file", f)
		}
		rules = append(rules, abs)
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }
	return json.MarshalIndent(map[string]any{
		"global": map[string]string{
			"scrape_interval":     ms(scrape),
			"scrape_timeout":      ms(scrape),
			"evaluation_interval": ms(eval),
		},
		"scrape_configs": jobs,
		"rule_files":     rules,
	}, "", "  ")
}

func (opts Options) scrapeInterval() time.Duration {
	return cmp.Or(opts.ScrapeInterval, DefaultScrapeInterval)
}

// checkTarget accepts host:port with a loopback host and a port number.
func checkTarget(target string) error {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return fmt.Errorf("target %q is not host:port: %w", target, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("target %q: port %q is not a port number", target, port)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("target %q is not a loopback address (tests scrape loopback only)", target)
	}
	return nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}
