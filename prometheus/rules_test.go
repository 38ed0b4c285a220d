// Package prometheus_test checks the alert rules shipped beside it with
// promtool and a real Prometheus server.
package prometheus_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/edgesecrets/edgesecrets/internal/testkit/promtest"
)

const (
	rulesFile = "edgesecrets-alerts.yml"
	testsFile = "edgesecrets-alerts_test.yml"
)

// ruleFile is the part of a Prometheus rule file these tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// testFile is the part of a promtool test file these tests read.
type testFile struct {
	Tests []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(false)
	require.NoError(t, dec.Decode(v), path)
	return b
}

// alerts returns the shipped rule file and its alerts' names.
func alerts(t *testing.T) (ruleFile, []string) {
	t.Helper()
	var rf ruleFile
	readYAML(t, rulesFile, &rf)
	var names []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s: only alerting rules are shipped", g.Name)
			names = append(names, r.Alert)
		}
	}
	require.NotEmpty(t, names)
	return rf, names
}

// promtool runs promtool in dir and returns its output and error.
func promtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), promtest.Promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestRulesPassPromtoolCheck(t *testing.T) {
	out, err := promtool(t, ".", "check", "rules", rulesFile)
	require.NoError(t, err, out)
	_, names := alerts(t)
	assert.Contains(t, out, fmt.Sprintf("SUCCESS: %d rules found", len(names)))
}

func TestRulesPassTheirUnitTests(t *testing.T) {
	out, err := promtool(t, ".", "test", "rules", testsFile)
	require.NoError(t, err, out)
	assert.Contains(t, out, "SUCCESS")
}

// Every alert has a unit test where it fires and one where it stays
// silent, and says who should act and what to do.
func TestEveryAlertIsTestedFiringAndSilent(t *testing.T) {
	rf, names := alerts(t)
	var tf testFile
	readYAML(t, testsFile, &tf)
	fires, silent := map[string]int{}, map[string]int{}
	for _, group := range tf.Tests {
		for _, c := range group.AlertRuleTest {
			assert.Contains(t, names, c.Alertname, "test %q names an alert that is not shipped", group.Name)
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname]++
			} else {
				silent[c.Alertname]++
			}
		}
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			assert.Positive(t, fires[r.Alert], "%s has no unit test where it fires", r.Alert)
			assert.Positive(t, silent[r.Alert], "%s has no unit test where it stays silent", r.Alert)
			assert.Contains(t, []string{"critical", "warning", "info"}, r.Labels["severity"], "%s: severity", r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], "%s: summary", r.Alert)
			assert.NotEmpty(t, r.Annotations["description"], "%s: description", r.Alert)
			assert.True(t, strings.HasPrefix(r.Alert, "Edgesecrets"), "%s: alert names start with Edgesecrets", r.Alert)
		}
	}
}

// The unit tests catch a broken rule: with any one alert's expression
// made to never fire, or to always fire, promtool's tests fail.
func TestUnitTestsCatchABrokenAlert(t *testing.T) {
	_, names := alerts(t)
	original, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	tests, err := os.ReadFile(testsFile)
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(original, &doc))

	for _, name := range names {
		for _, broken := range []struct{ how, expr string }{
			{"never fires", "vector(1) == 0"},
			{"always fires", "vector(1)"},
		} {
			t.Run(name+" "+broken.how, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(dir, rulesFile), withExpr(t, &doc, name, broken.expr), 0o600))
				require.NoError(t, os.WriteFile(filepath.Join(dir, testsFile), tests, 0o600))
				out, err := promtool(t, dir, "test", "rules", testsFile)
				require.Error(t, err, "promtool's tests pass with %s broken:\n%s", name, out)
				assert.Contains(t, out, "alertname: "+name, "the failure names the broken alert")
			})
		}
	}
}

// withExpr returns the rule file doc with the named alert's expression
// replaced by expr.
func withExpr(t *testing.T, doc *yaml.Node, alert, expr string) []byte {
	t.Helper()
	var copied yaml.Node
	b, err := yaml.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &copied))
	found := false
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			isAlert := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "alert" && n.Content[i+1].Value == alert {
					isAlert = true
				}
			}
			for i := 0; isAlert && i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "expr" {
					n.Content[i+1].Value, n.Content[i+1].Style = expr, 0
					found = true
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&copied)
	require.True(t, found, "no alert %s with an expr", alert)
	out, err := yaml.Marshal(&copied)
	require.NoError(t, err)
	return out
}

// OPERATIONS.md documents every shipped alert and every metric the rules
// read.
func TestOperationsGuideCoversTheRules(t *testing.T) {
	rf, names := alerts(t)
	guide, err := os.ReadFile(filepath.Join("..", "OPERATIONS.md"))
	require.NoError(t, err)
	for _, name := range names {
		assert.Contains(t, string(guide), "### "+name, "OPERATIONS.md has no section for %s", name)
	}
	metric := regexp.MustCompile(`edgesecrets_[a-z_]+`)
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			for _, m := range metric.FindAllString(r.Expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				assert.Contains(t, string(guide), "`"+m+"`", "OPERATIONS.md does not document %s, which %s reads", m, r.Alert)
			}
		}
	}
}

// faultyFleet serves, as an agbot's /metrics would, one series of every
// fault the rules alert on; its counters and histogram advance on each
// scrape.
func faultyFleet(t *testing.T) string {
	t.Helper()
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := scrapes.Add(1)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = fmt.Fprintf(w, `# TYPE edgesecrets_delivery_membership_live gauge
edgesecrets_delivery_membership_live 0
# TYPE edgesecrets_delivery_problems gauge
edgesecrets_delivery_problems{component="store"} 1
edgesecrets_delivery_problems{component="store_credentials"} 1
edgesecrets_delivery_problems{component="state"} 1
# TYPE edgesecrets_delivery_agreements gauge
edgesecrets_delivery_agreements{condition="in_sync",reason=""} 10
edgesecrets_delivery_agreements{condition="diverged",reason=""} 2
edgesecrets_delivery_agreements{condition="cancellation_held",reason=""} 3
edgesecrets_delivery_agreements{condition="waiting",reason="FormatUnrenderable"} 1
edgesecrets_delivery_agreements{condition="waiting",reason="AgentUnreachable"} 4
# TYPE edgesecrets_delivery_interval_seconds gauge
edgesecrets_delivery_interval_seconds 1
# TYPE edgesecrets_delivery_messages_total counter
edgesecrets_delivery_messages_total{event="rejected"} %[1]d
# TYPE edgesecrets_delivery_convergence_duration_seconds histogram
edgesecrets_delivery_convergence_duration_seconds_bucket{le="1"} 0
edgesecrets_delivery_convergence_duration_seconds_bucket{le="10"} 0
edgesecrets_delivery_convergence_duration_seconds_bucket{le="+Inf"} %[1]d
edgesecrets_delivery_convergence_duration_seconds_sum %[2]d
edgesecrets_delivery_convergence_duration_seconds_count %[1]d
`, n, 5*n)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// A real Prometheus loads the shipped rules, evaluates every one without
// error, and each alert becomes pending on its fault's series.
func TestPrometheusEvaluatesTheRules(t *testing.T) {
	t.Parallel()
	_, names := alerts(t)
	s := promtest.Start(t, promtest.Options{
		Targets:   map[string][]string{"agbot": {faultyFleet(t)}},
		RuleFiles: []string{rulesFile},
	})
	want := slices.Sorted(slices.Values(names))
	var got []string
	s.WaitFor(t, `count by (alertname) (ALERTS{alertstate="pending"})`, func(samples []promtest.Sample) bool {
		got = got[:0]
		for _, sm := range samples {
			got = append(got, sm.Labels["alertname"])
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	}, 2*time.Minute)

	rules, err := s.Rules(t.Context())
	require.NoError(t, err)
	require.Len(t, rules, len(names))
	for _, r := range rules {
		assert.Equal(t, "ok", r.Health, "%s: %s", r.Name, r.LastError)
	}
}
