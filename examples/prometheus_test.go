package examples_test

import (
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/internal/testkit/promtest"
)

// A real Prometheus scraping the example agbot and two agents sees what an
// operator needs: after a rotation the convergence histogram's count rises
// by the number of nodes; after a node-level secret that cannot be
// rendered in its format is written for one node, the series of agreements
// waiting for that reason is 1 within two intervals (and a scrape), and
// the agbot logged one WARN line naming the agreement and the reason.
func TestPrometheusSeesConvergenceAndReasons(t *testing.T) {
	const interval = 3 * time.Second
	dir := t.TempDir()
	agbotDir := filepath.Join(dir, "agbot")
	sample, err := os.ReadFile(filepath.Join("agbot", "deployment.json"))
	require.NoError(t, err)
	// Node-level secrets first, then the organisation's (anax's
	// enableNodeLevelSecrets).
	withNodeLevel := strings.Replace(string(sample), `"serviceVersionRange": "[1.0.0,INFINITY)",`,
		`"serviceVersionRange": "[1.0.0,INFINITY)", "enableNodeLevelSecrets": true,`, 1)
	require.NotEqual(t, string(sample), withNodeLevel)
	deployment := filepath.Join(dir, "deployment.json")
	require.NoError(t, os.WriteFile(deployment, []byte(withNodeLevel), 0o600))

	agbot := start(t, "agbot", nil, "-listen", "127.0.0.1:0", "-addr-file", filepath.Join(dir, "agbot.url"), "-dir", agbotDir,
		"-deployment", deployment, "-watch-interval", interval.String(), "-update-backoff", "1s", "-max-backoff", "2s")
	agbotURL := readURL(t, filepath.Join(dir, "agbot.url"))
	waitFor(t, "the agbot to listen", func() bool { return agbotURL() != "" }, agbot)
	adminToken, err := demo.ReadToken(filepath.Join(agbotDir, "admin-token"))
	require.NoError(t, err)
	adm := &adminAPI{url: agbotURL(), token: adminToken}
	first := "first-" + rand.Text()
	require.NoError(t, adm.put(t.Context(), storeName, first))

	procs := []*proc{agbot}
	nodes := []string{"node-1", "node-2"}
	agentURLs := map[string]func() string{}
	for _, node := range nodes {
		agentDir := filepath.Join(dir, node)
		procs = append(procs, start(t, "agent", nil, "-agbot", agbotURL(), "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
			"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir, "-node", node,
			"-listen", "127.0.0.1:0", "-addr-file", filepath.Join(dir, node+".url"), "-poll", "200ms"))
		agentURLs[node] = readURL(t, filepath.Join(dir, node+".url"))
	}
	holds := func(node, value string) func() bool {
		return func() bool {
			env, err := demo.ReadEnv(filepath.Join(dir, node, "env", instance+".json"))
			if err != nil {
				return false
			}
			b, _ := os.ReadFile(filepath.Join(env.Mount, serviceSecret))
			return string(b) == value
		}
	}
	for _, node := range nodes {
		waitFor(t, node+" to hold the first value", holds(node, first), procs...)
	}

	hostPort := func(u string) string {
		parsed, err := url.Parse(u)
		require.NoError(t, err)
		return parsed.Host
	}
	prom := promtest.Start(t, promtest.Options{Targets: map[string][]string{
		"agbot": {hostPort(agbotURL())},
		"agent": {hostPort(agentURLs["node-1"]()), hostPort(agentURLs["node-2"]())},
	}})
	prom.WaitFor(t, `sum(up)`, func(s []promtest.Sample) bool { return len(s) == 1 && s[0].Value == 3 }, 2*time.Minute)
	const converged = `sum(edgesecrets_delivery_convergence_duration_seconds_count)`
	count := func() float64 {
		s, err := prom.Query(t.Context(), converged)
		require.NoError(t, err)
		if len(s) == 0 {
			return 0
		}
		return s[0].Value
	}
	before := count()
	messagesApplied := `sum(edgesecrets_agent_messages_total{outcome="applied"})`
	prom.WaitFor(t, messagesApplied, func(s []promtest.Sample) bool { return len(s) == 1 && s[0].Value >= 2 }, time.Minute)

	second := "second-" + rand.Text()
	require.NoError(t, adm.put(t.Context(), storeName, second))
	for _, node := range nodes {
		waitFor(t, node+" to hold the rotated value", holds(node, second), procs...)
	}
	prom.WaitFor(t, converged, func(s []promtest.Sample) bool {
		return len(s) == 1 && s[0].Value == before+float64(len(nodes))
	}, 30*time.Second)
	prom.WaitFor(t, `sum(edgesecrets_delivery_agreements{condition="in_sync"})`, func(s []promtest.Sample) bool {
		return len(s) == 1 && s[0].Value == float64(len(nodes))
	}, 30*time.Second)

	// node-1's own secret, in a shape its "raw" format cannot render.
	nodeLevel := "myorg/node/node-1/web/api-key"
	wrote := time.Now()
	require.NoError(t, (&adminDataAPI{url: agbotURL(), token: adminToken}).put(t, nodeLevel,
		map[string]string{"user": "alice", "password": "multi-" + rand.Text()}))
	waiting := `edgesecrets_delivery_agreements{condition="waiting",reason="FormatUnrenderable"}`
	prom.WaitFor(t, waiting, func(s []promtest.Sample) bool { return len(s) == 1 && s[0].Value == 1 },
		2*interval+2*promtest.DefaultScrapeInterval+2*time.Second)
	t.Logf("the waiting series was 1 %s after the write (interval %s)", time.Since(wrote).Round(100*time.Millisecond), interval)

	var page delivery.Page
	adminGet(t, agbotURL(), adminToken, "/admin/agreements?reason=FormatUnrenderable", &page)
	require.Len(t, page.Agreements, 1, "%+v", page)
	id := page.Agreements[0].ID
	assert.Equal(t, "myorg/node-1", page.Agreements[0].Node)
	require.NotNil(t, page.Agreements[0].Reason)
	assert.Contains(t, page.Agreements[0].Reason.Message, nodeLevel)
	time.Sleep(2 * interval) // it stays held back: still one line
	var warns []string
	for _, line := range strings.Split(agbot.stderr.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "reason=FormatUnrenderable") {
			warns = append(warns, line)
		}
	}
	require.Len(t, warns, 1, "one WARN line:\n%s", strings.Join(warns, "\n"))
	assert.Contains(t, warns[0], fmt.Sprintf("agreement=%s", id))
	assert.True(t, holds("node-2", second)(), "node-2 is not held back")

	// Every metric the programs export is in the operator's guide.
	guide, err := os.ReadFile(filepath.Join("..", "OPERATIONS.md"))
	require.NoError(t, err)
	names, err := prom.Query(t.Context(), `group by (__name__) ({__name__=~"edgesecrets_.*|http_server_.*"})`)
	require.NoError(t, err)
	assert.Greater(t, len(names), 10, "the instruments are exported")
	for _, n := range names {
		base := n.Labels["__name__"]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		assert.Contains(t, string(guide), "`"+base+"`", "OPERATIONS.md documents %s", n.Labels["__name__"])
	}

	for _, p := range procs {
		assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
	}
}
