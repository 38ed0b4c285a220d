package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/agentapi"
	"github.com/edgesecrets/edgesecrets/agreement"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
)

// hookCalls records the calls of a reload hook.
type hookCalls struct {
	mu    sync.Mutex
	calls [][]string
	err   error
}

func (h *hookCalls) hook(_ context.Context, id string, changed []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, append([]string{id}, changed...))
	return h.err
}

func (h *hookCalls) got() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]string(nil), h.calls...)
}

// reloadCounts reads the reloads counter by outcome.
func reloadCounts(t *testing.T, reader sdkmetric.Reader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "edgesecrets.agent.reloads" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value(attribute.Key("outcome"))
				counts[v.AsString()] += dp.Value
			}
		}
	}
	return counts
}

// templatedFixture is an agent whose instance "web" renders api_key with
// the template and reloads as rl says, its reloads started; reader
// collects its metrics.
func templatedFixture(t *testing.T, template string, rl *Reload) (*fixture, sdkmetric.Reader) {
	reader := sdkmetric.NewManualReader()
	f := newFixture(t, func(o *Options) {
		o.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		o.Services = map[string]ServiceOptions{"web": {
			Files:  map[string]agentapi.FileOptions{"api_key": {Template: template}},
			Reload: rl,
		}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	f.agent.reloads.start(ctx)
	t.Cleanup(func() { cancel(); f.agent.reloads.stop() })
	f.register()
	return f, reader
}

func TestTemplateOverARotatedSecretAndOneReload(t *testing.T) {
	var h hookCalls
	f, reader := templatedFixture(t, `API_KEY={{ envQuote .value }}`, &Reload{Hook: h.hook, Debounce: time.Second})
	r, ok := f.deliver(f.proposal("agreement-1", "VALUE-1"))
	require.True(t, ok)
	require.True(t, r.Accepted, r.Reason)
	content, err := f.file()
	require.NoError(t, err)
	assert.Equal(t, `API_KEY="VALUE-1"`, content)

	// Two rotations within the debounce: one reload.
	for _, v := range []string{"VALUE-2", "VALUE-3"} {
		r, ok = f.deliver(f.secretsUpdate("agreement-1", v))
		require.True(t, ok)
		require.True(t, r.Accepted, r.Reason)
	}
	content, err = f.file()
	require.NoError(t, err)
	assert.Equal(t, `API_KEY="VALUE-3"`, content)
	require.Eventually(t, func() bool { return len(h.got()) > 0 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, [][]string{{"web", "api_key"}}, h.got(), "exactly one reload, none for the proposal that created the instance")
	assert.Equal(t, map[string]int64{"ok": 1}, reloadCounts(t, reader))
}

func TestBrokenTemplateIsARejectionTheAgbotSees(t *testing.T) {
	var h hookCalls
	f, _ := templatedFixture(t, `{{ base64Decode .value }}`, &Reload{Hook: h.hook, Debounce: 10 * time.Millisecond})
	r, ok := f.deliver(f.proposal("agreement-1", "aGk="))
	require.True(t, ok)
	require.True(t, r.Accepted, r.Reason)

	r, ok = f.deliver(f.secretsUpdate("agreement-1", "CANARY-%%%"))
	require.True(t, ok)
	assert.False(t, r.Accepted)
	assert.True(t, strings.HasPrefix(r.Reason, agentapi.ReasonTemplateFailed+": "), r.Reason)
	content, err := f.file()
	require.NoError(t, err)
	assert.Equal(t, "hi", content, "the last good file is kept")
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, h.got(), "nothing changed: no reload")
	assert.Contains(t, f.logs.String(), `"level":"WARN","msg":"a template failed; nothing is written and the last good file is kept","instance":"web","secret":"api_key"`)
	assert.NotContains(t, f.logs.String()+r.Reason, "CANARY")
}

func TestFailingReloadKeepsTheNewFiles(t *testing.T) {
	tests := []struct {
		name    string
		reload  Reload
		outcome string
	}{
		{"command fails", Reload{Command: []string{"false"}}, "failed"},
		{"command hangs", Reload{Command: []string{"sleep", "30"}, Timeout: 200 * time.Millisecond}, "timeout"},
		{"no pid file", Reload{PIDFile: filepath.Join(os.TempDir(), "no-such-edgesecrets.pid")}, "failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.reload.Debounce = 10 * time.Millisecond
			f, reader := templatedFixture(t, `{{ .value }}`, &tt.reload)
			r, ok := f.deliver(f.proposal("agreement-1", "VALUE-1"))
			require.True(t, ok)
			require.True(t, r.Accepted, r.Reason)
			r, ok = f.deliver(f.secretsUpdate("agreement-1", "VALUE-2"))
			require.True(t, ok)
			require.True(t, r.Accepted, r.Reason)
			require.Eventually(t, func() bool { return reloadCounts(t, reader)[tt.outcome] == 1 }, 10*time.Second, 20*time.Millisecond)
			assert.Equal(t, map[string]int64{tt.outcome: 1}, reloadCounts(t, reader))
			content, err := f.file()
			require.NoError(t, err)
			assert.Equal(t, "VALUE-2", content, "the new file stays")
			assert.Contains(t, f.logs.String(), `"msg":"the reload after a rotation did not succeed; the new files stay","instance":"web"`)
			assert.Contains(t, f.logs.String(), `"outcome":"`+tt.outcome+`"`)
			assert.NotContains(t, f.logs.String(), "VALUE-")
		})
	}
}

func TestReloadActions(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	tests := []struct {
		name    string
		reload  func(t *testing.T) (Reload, func(t *testing.T))
		outcome string
	}{
		{"command", func(t *testing.T) (Reload, func(t *testing.T)) {
			return Reload{Command: []string{"touch", marker}}, func(t *testing.T) { assert.FileExists(t, marker) }
		}, "ok"},
		{"signal through the pid file", func(t *testing.T) (Reload, func(t *testing.T)) {
			cmd := exec.Command("sleep", "30")
			require.NoError(t, cmd.Start())
			pidFile := filepath.Join(t.TempDir(), "svc.pid")
			require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600))
			return Reload{PIDFile: pidFile, Signal: syscall.SIGTERM}, func(t *testing.T) {
				err := cmd.Wait()
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit)
				assert.Equal(t, syscall.SIGTERM, exit.Sys().(syscall.WaitStatus).Signal())
			}
		}, "ok"},
		{"pid file without a pid", func(t *testing.T) (Reload, func(t *testing.T)) {
			pidFile := filepath.Join(t.TempDir(), "svc.pid")
			require.NoError(t, os.WriteFile(pidFile, []byte("1\n"), 0o600))
			return Reload{PIDFile: pidFile}, func(*testing.T) {}
		}, "failed"},
		{"hook fails", func(*testing.T) (Reload, func(t *testing.T)) {
			return Reload{Hook: func(context.Context, string, []string) error { return errors.New("no") }}, func(*testing.T) {}
		}, "failed"},
		{"hook hangs", func(*testing.T) (Reload, func(t *testing.T)) {
			return Reload{Timeout: 50 * time.Millisecond, Hook: func(ctx context.Context, _ string, _ []string) error {
				<-ctx.Done()
				return ctx.Err()
			}}, func(*testing.T) {}
		}, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rl, verify := tt.reload(t)
			rl.Debounce = time.Millisecond
			var mu sync.Mutex
			counts := map[string]int{}
			r := newReloader(map[string]ServiceOptions{"web": {Reload: &rl}}, logtestLogger(), func(o string) {
				mu.Lock()
				defer mu.Unlock()
				counts[o]++
			})
			r.start(t.Context())
			r.changed("web", []string{"api_key"})
			require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return counts[tt.outcome] == 1 }, 10*time.Second, 10*time.Millisecond)
			r.stop()
			verify(t)
		})
	}
}

func logtestLogger() *slog.Logger {
	l, _ := logtest.NewLogger()
	return l
}

// Changes within the debounce make one reload with every name; a change
// while a reload runs makes one more after it; after stop, none.
func TestReloadDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h hookCalls
		release := make(chan struct{})
		hook := func(ctx context.Context, id string, changed []string) error {
			_ = h.hook(ctx, id, changed)
			if len(h.got()) == 1 {
				<-release
			}
			return nil
		}
		r := newReloader(map[string]ServiceOptions{"web": {Reload: &Reload{Hook: hook}}, "db": {}}, logtestLogger(), func(string) {})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r.start(ctx)
		r.changed("web", []string{"b"})
		time.Sleep(time.Second)
		r.changed("web", []string{"a", "b"})
		r.changed("db", []string{"x"}) // no reload configured
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		assert.Empty(t, h.got(), "the default debounce is 2 s from the first change")
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, [][]string{{"web", "a", "b"}}, h.got())

		r.changed("web", []string{"c"}) // while the first reload runs
		r.changed("web", []string{"d"})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Len(t, h.got(), 1, "no second reload while the first runs")
		close(release)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		assert.Equal(t, [][]string{{"web", "a", "b"}, {"web", "c", "d"}}, h.got())

		r.changed("web", []string{"e"})
		r.stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Len(t, h.got(), 2, "a reload still waiting when the agent stops is dropped")
	})
}

func TestServicesAreChecked(t *testing.T) {
	hook := func(context.Context, string, []string) error { return nil }
	tests := []struct {
		name     string
		services map[string]ServiceOptions
		want     string
	}{
		{"world-readable file", map[string]ServiceOptions{"web": {Files: map[string]agentapi.FileOptions{"api_key": {Mode: 0o444}}}}, "nothing for others"},
		{"undefined template function", map[string]ServiceOptions{"web": {Files: map[string]agentapi.FileOptions{"api_key": {Template: `{{ env "X" }}`}}}}, "not defined"},
		{"two actions", map[string]ServiceOptions{"web": {Reload: &Reload{Command: []string{"true"}, Hook: hook}}}, "exactly one"},
		{"no action", map[string]ServiceOptions{"web": {Reload: &Reload{}}}, "exactly one"},
		{"empty program", map[string]ServiceOptions{"web": {Reload: &Reload{Command: []string{""}}}}, "no program"},
		{"signal without pid file", map[string]ServiceOptions{"web": {Reload: &Reload{Hook: hook, Signal: syscall.SIGHUP}}}, "needs a PIDFile"},
		{"negative timeout", map[string]ServiceOptions{"web": {Reload: &Reload{Hook: hook, Timeout: -1}}}, "negative"},
		{"bad instance id", map[string]ServiceOptions{"a:b": {}}, "a:b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkServices(tt.services)
			require.ErrorIs(t, err, edgesecrets.ErrInvalid)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	assert.NoError(t, checkServices(map[string]ServiceOptions{"web": {Reload: &Reload{Hook: hook}}}))
}

// A custom Assign's instances get the configured file options unless
// they carry their own.
func TestAssignGetsFileOptions(t *testing.T) {
	opts := map[string]agentapi.FileOptions{"api_key": {Mode: 0o440}}
	own := map[string]agentapi.FileOptions{"api_key": {Mode: 0o400}}
	assign := withFileOptions(func(context.Context, agreement.Proposal) (agentapi.Instances, error) {
		return agentapi.Instances{service: {ID: "web"}, {URL: "other"}: {ID: "other", Files: own}}, nil
	}, map[string]ServiceOptions{"web": {Files: opts}, "other": {Files: opts}})
	got, err := assign(t.Context(), agreement.Proposal{})
	require.NoError(t, err)
	assert.Equal(t, opts, got[service].Files)
	assert.Equal(t, own, got[agreement.ServiceRef{URL: "other"}].Files)
}
