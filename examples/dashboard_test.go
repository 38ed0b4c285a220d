package examples_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/promtest"
)

// dashboardFile is the Grafana dashboard shipped beside the alert rules.
const dashboardFile = "../prometheus/edgesecrets-dashboard.json"

// dashboardWindow replaces Grafana's range variables in the test: longer
// than the test, so that every event it causes is inside the window.
const dashboardWindow = "5m"

// dashboardLabels are the labels a dashboard query may use: bounded sets
// of conditions, reasons, events, outcomes, operations and routes. No
// label may tell a secret, a node or an agreement apart (instance would
// tell the agents, so the nodes, apart).
var dashboardLabels = []string{
	"backend", "component", "condition", "event", "http_request_method", "http_response_status_code",
	"http_route", "job", "le", "operation", "otel_scope_name", "outcome", "reason", "type",
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	SchemaVersion int              `json:"schemaVersion"`
	Panels        []dashboardPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type dashboardPanel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

// query is one panel target's expression, ready for Prometheus.
type query struct{ panel, expr, legend string }

func readDashboard(t *testing.T) (dashboard, []dashboardPanel, []query) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	var panels []dashboardPanel
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			panels = append(panels, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	window := strings.NewReplacer("$__rate_interval", dashboardWindow, "${__rate_interval}", dashboardWindow,
		"$__interval", dashboardWindow, "${__interval}", dashboardWindow, "$__range", dashboardWindow, "${__range}", dashboardWindow)
	var queries []query
	for _, p := range panels {
		for _, tg := range p.Targets {
			queries = append(queries, query{panel: p.Title, expr: window.Replace(tg.Expr), legend: tg.LegendFormat})
		}
	}
	return d, panels, queries
}

var (
	metricName   = regexp.MustCompile(`\b(?:edgesecrets|http_server)_[a-z0-9_]+\b`)
	matcherList  = regexp.MustCompile(`\{([^{}]*)\}`)
	matcherLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	groupingList = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)`)
	legendLabel  = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
)

// queryLabels returns the labels expr matches on or groups by.
func queryLabels(expr string) []string {
	var labels []string
	for _, m := range matcherList.FindAllStringSubmatch(expr, -1) {
		for _, l := range matcherLabel.FindAllStringSubmatch(m[1], -1) {
			labels = append(labels, l[1])
		}
	}
	for _, m := range groupingList.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
	}
	slices.Sort(labels)
	return slices.Compact(labels)
}

// The dashboard imports as is: a Prometheus datasource variable every
// panel uses, a title and a unit on every panel (and a row in
// OPERATIONS.md), and queries that use only bounded labels (none naming a
// secret, node or agreement).
func TestDashboardIsWellFormed(t *testing.T) {
	d, panels, queries := readDashboard(t)
	assert.GreaterOrEqual(t, d.SchemaVersion, 36, "a schema Grafana 10 and later imports")
	require.Len(t, d.Templating.List, 1)
	v := d.Templating.List[0]
	assert.Equal(t, []string{"datasource", "datasource", "prometheus"}, []string{v.Name, v.Type, v.Query})
	require.NotEmpty(t, queries)
	guide, err := os.ReadFile(filepath.Join("..", "OPERATIONS.md"))
	require.NoError(t, err)
	for _, p := range panels {
		assert.Contains(t, string(guide), "| "+p.Title+" |", "OPERATIONS.md lists panel %q", p.Title)
		assert.NotEmpty(t, strings.TrimSpace(p.Title), "every panel has a title: %+v", p)
		if p.Type == "row" {
			assert.Empty(t, p.Targets, "row %q has no query", p.Title)
			continue
		}
		assert.NotEmpty(t, p.FieldConfig.Defaults.Unit, "panel %q has a unit", p.Title)
		assert.Equal(t, "${datasource}", p.Datasource.UID, "panel %q uses the datasource variable", p.Title)
		assert.NotEmpty(t, p.Targets, "panel %q has a query", p.Title)
	}
	for _, q := range queries {
		assert.NotEmpty(t, metricName.FindAllString(q.expr, -1), "%q: %s names an edgesecrets metric", q.panel, q.expr)
		assert.NotContains(t, q.expr, "$", "%q: %s uses only the window variables", q.panel, q.expr)
		for _, l := range queryLabels(q.expr) {
			assert.Contains(t, dashboardLabels, l, "%q: %s uses label %s", q.panel, q.expr, l)
		}
		for _, l := range legendLabel.FindAllStringSubmatch(q.legend, -1) {
			assert.Contains(t, dashboardLabels, l[1], "%q: legend %q shows label %s", q.panel, q.legend, l[1])
		}
	}
}

// queryLabels finds the labels of matchers and of grouping clauses, which
// the label checks above rely on.
func TestQueryLabels(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`sum(up)`, ""},
		{`sum by (condition, reason) (m{condition!="in_sync", job=~"a|b"})`, "condition job reason"},
		{`histogram_quantile(0.99, sum by(le) (rate(m_bucket{otel_scope_name="x/agbot"}[5m])))`, "le otel_scope_name"},
		{`a / on (node) group_left (secret) b`, "node secret"},
		{`sum without (instance) (m)`, "instance"},
	} {
		assert.Equal(t, tc.want, strings.Join(queryLabels(tc.expr), " "), tc.expr)
	}
}

// Every query of the dashboard returns a series from a real Prometheus
// scraping the example agbot (on a PostgreSQL state, for the membership
// panels) and two agents through deliveries, rotations, store errors,
// service requests and a waiting agreement; each label a query uses is on
// the series of its metrics. A renamed metric or label fails here.
func TestDashboardQueriesAnswered(t *testing.T) {
	_, _, queries := readDashboard(t)
	const interval = time.Second
	pg := pgtest.Start(t, pgtest.Options{})
	dir := t.TempDir()
	agbotDir := filepath.Join(dir, "agbot")
	sample, err := os.ReadFile(filepath.Join("agbot", "deployment.json"))
	require.NoError(t, err)
	withNodeLevel := strings.Replace(string(sample), `"serviceVersionRange": "[1.0.0,INFINITY)",`,
		`"serviceVersionRange": "[1.0.0,INFINITY)", "enableNodeLevelSecrets": true,`, 1)
	require.NotEqual(t, string(sample), withNodeLevel)
	deployment := filepath.Join(dir, "deployment.json")
	require.NoError(t, os.WriteFile(deployment, []byte(withNodeLevel), 0o600))

	// Prometheus first, so that it sees the first deliveries happen.
	agbotAddr := freeLoopbackAddr(t)
	nodes := []string{"node-1", "node-2"}
	agentAddrs := map[string]string{}
	for _, node := range nodes {
		agentAddrs[node] = freeLoopbackAddr(t)
	}
	prom := promtest.Start(t, promtest.Options{Targets: map[string][]string{
		"agbot": {agbotAddr},
		"agent": {agentAddrs["node-1"], agentAddrs["node-2"]},
	}})
	// wait polls q until its single sample reaches at least min.
	wait := func(q string, min float64) {
		t.Helper()
		prom.WaitFor(t, q, func(s []promtest.Sample) bool { return len(s) == 1 && s[0].Value >= min }, time.Minute)
	}

	agbot := start(t, "agbot", nil, "-listen", agbotAddr, "-dir", agbotDir, "-state", pg.URL, "-deployment", deployment,
		"-watch-interval", interval.String(), "-update-backoff", "200ms", "-max-backoff", "1s", "-reply-timeout", "2s")
	waitFor(t, "the agbot to serve", func() bool { return strings.Contains(agbot.stderr.String(), "agbot serving") }, agbot)
	agbotURL := "http://" + agbotAddr
	adminToken, err := demo.ReadToken(filepath.Join(agbotDir, "admin-token"))
	require.NoError(t, err)
	adm := &adminAPI{url: agbotURL, token: adminToken}
	value := "first-" + rand.Text()
	require.NoError(t, adm.put(t.Context(), storeName, value))

	procs := []*proc{agbot}
	envOf := func(node string) demo.Env {
		env, err := demo.ReadEnv(filepath.Join(dir, node, "env", instance+".json"))
		require.NoError(t, err)
		return env
	}
	holdsOn := func(node, value string) bool {
		env, err := demo.ReadEnv(filepath.Join(dir, node, "env", instance+".json"))
		if err != nil {
			return false
		}
		b, _ := os.ReadFile(filepath.Join(env.Mount, serviceSecret))
		return string(b) == value
	}
	holds := func(value string) func() bool {
		return func() bool {
			for _, node := range nodes {
				if !holdsOn(node, value) {
					return false
				}
			}
			return true
		}
	}
	// One agent after the other, each delivery scraped: a rate sees the
	// second (a series appearing at 1 is no increase).
	for i, node := range nodes {
		procs = append(procs, start(t, "agent", nil, "-agbot", agbotURL, "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
			"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", filepath.Join(dir, node), "-node", node,
			"-listen", agentAddrs[node], "-poll", "200ms"))
		waitFor(t, node+" to hold the first value", func() bool { return holdsOn(node, value) }, procs...)
		wait(`sum(edgesecrets_delivery_first_delivery_duration_seconds_count)`, float64(i+1))
	}
	// Two rotations, for the same reason.
	for i := 1; i <= 2; i++ {
		value = fmt.Sprintf("rotated-%d-%s", i, rand.Text())
		require.NoError(t, adm.put(t.Context(), storeName, value))
		waitFor(t, "every node to hold the rotated value", holds(value), procs...)
		wait(`sum(edgesecrets_delivery_convergence_duration_seconds_count)`, float64(i*len(nodes)))
	}
	// Store errors (a name the store refuses) and the services' API, twice
	// each, a scrape apart.
	for i := 1; i <= 2; i++ {
		err := adm.put(t.Context(), "myorg/bad%00name", "x")
		require.ErrorContains(t, err, "status 400")
		wait(`sum(edgesecrets_store_operations_total{outcome="invalid"})`, float64(i))
		for _, node := range nodes {
			status, _ := secretsAPI(t, envOf(node), http.MethodGet, "/secrets")
			require.Equal(t, http.StatusOK, status)
		}
		wait(`sum(http_server_request_duration_seconds_count{job="agent"})`, float64(i*len(nodes)))
	}
	// node-1's own secret, in a shape its "raw" format cannot render: an
	// agreement waiting with a reason.
	require.NoError(t, (&adminDataAPI{url: agbotURL, token: adminToken}).put(t, "myorg/node/node-1/web/api-key",
		map[string]string{"user": "alice", "password": "multi-" + rand.Text()}))
	wait(`sum(edgesecrets_delivery_agreements{condition="waiting",reason="FormatUnrenderable"})`, 1)

	for _, q := range queries {
		got, err := prom.Query(t.Context(), q.expr)
		if !assert.NoError(t, err, "%q: %s", q.panel, q.expr) {
			continue
		}
		assert.NotEmpty(t, got, "%q: %s returns a series", q.panel, q.expr)
		assert.True(t, slices.ContainsFunc(got, func(s promtest.Sample) bool { return !math.IsNaN(s.Value) }),
			"%q: %s returns a value, not only NaN: %v", q.panel, q.expr, got)
		names := metricName.FindAllString(q.expr, -1)
		for _, l := range queryLabels(q.expr) {
			has := fmt.Sprintf(`count({__name__=~%q, %s!=""})`, strings.Join(names, "|"), l)
			s, err := prom.Query(t.Context(), has)
			assert.NoError(t, err, has)
			assert.NotEmpty(t, s, "%q: label %s is on a series of %v", q.panel, l, names)
		}
	}
	for _, p := range procs {
		assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
	}
}
