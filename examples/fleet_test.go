package examples_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// Fleet timing: what the convergence bounds are made of.
const (
	fleetInterval = time.Second
	fleetLease    = 3 * time.Second
	// fleetSlack is what a loaded 2-core machine running six programs
	// under the race detector adds to a bound: scheduling, not protocol.
	fleetSlack = 10 * time.Second
)

// fleet is two example agbots sharing a real PostgreSQL and four agents,
// each talking to both, with every value each node's secret file takes.
type fleet struct {
	t         *testing.T
	adm       storeAdmin
	agbotArgs func(member, addr string) []string
	agbots    map[string]*proc  // by member
	addrs     map[string]string // by member
	nodes     []*nodeWatch
}

// nodeWatch records each distinct value a node's secret file takes.
type nodeWatch struct {
	node   string
	agent  *proc
	file   string
	mu     sync.Mutex
	values []string
}

func (n *nodeWatch) record(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		b, err := os.ReadFile(n.file)
		if err != nil {
			continue
		}
		n.mu.Lock()
		if len(n.values) == 0 || n.values[len(n.values)-1] != string(b) {
			n.values = append(n.values, string(b))
		}
		n.mu.Unlock()
	}
}

func (n *nodeWatch) seen() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.values)
}

func (n *nodeWatch) holds(v string) bool {
	s := n.seen()
	return len(s) > 0 && s[len(s)-1] == v
}

func startFleet(t *testing.T) *fleet {
	pg := pgtest.Start(t, pgtest.Options{})
	dir := t.TempDir()
	agbotDir := filepath.Join(dir, "agbot")
	storeConfig, adm := secretsManager(t)
	f := &fleet{t: t, adm: adm, agbots: map[string]*proc{}, addrs: map[string]string{}}
	f.agbotArgs = func(member, addr string) []string {
		return []string{"-listen", addr, "-dir", agbotDir, "-store", storeConfig, "-state", pg.URL,
			"-member", member, "-lease-period", fleetLease.String(), "-deployment", filepath.Join("agbot", "deployment.json"),
			"-watch-interval", fleetInterval.String(), "-update-backoff", "200ms", "-max-backoff", "1s", "-reply-timeout", "2s",
			"-log-level", "debug"}
	}
	require.NoError(t, adm.put(t.Context(), storeName, "v0-"+rand.Text()))
	for _, m := range []string{"agbot-a", "agbot-b"} {
		f.addrs[m] = freeLoopbackAddr(t)
		f.startAgbot(m)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	for i := 1; i <= 4; i++ {
		node := fmt.Sprintf("node-%d", i)
		agentDir := filepath.Join(dir, node)
		p := start(t, "agent", nil, "-agbot", "http://"+f.addrs["agbot-a"]+",http://"+f.addrs["agbot-b"],
			"-agbot-keys", filepath.Join(agbotDir, "agbot.pub"), "-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"),
			"-dir", agentDir, "-node", node, "-listen", "127.0.0.1:0", "-poll", "200ms", "-log-level", "debug")
		p.name = "agent " + node
		n := &nodeWatch{node: node, agent: p, file: filepath.Join(agentDir, "secrets", "instances", instance, serviceSecret)}
		go n.record(stop)
		f.nodes = append(f.nodes, n)
	}
	return f
}

// startAgbot starts (or restarts) a member on its address.
func (f *fleet) startAgbot(member string) *proc {
	p := start(f.t, "agbot", nil, f.agbotArgs(member, f.addrs[member])...)
	p.name = member
	waitFor(f.t, member+" to serve", func() bool { return strings.Contains(p.stderr.String(), "agbot serving") }, p)
	f.agbots[member] = p
	return p
}

func (f *fleet) procs() []*proc {
	var out []*proc
	for _, p := range f.agbots {
		if !p.exited() {
			out = append(out, p)
		}
	}
	for _, n := range f.nodes {
		out = append(out, n.agent)
	}
	return out
}

// rotate writes a new value and returns it.
func (f *fleet) rotate(label string) string {
	v := label + "-" + rand.Text()
	require.NoError(f.t, f.adm.put(f.t.Context(), storeName, v))
	return v
}

// converge waits until every node holds v, failing after within, and
// returns how long it took.
func (f *fleet) converge(what, v string, within time.Duration) time.Duration {
	f.t.Helper()
	begin := time.Now()
	deadline := begin.Add(within)
	for {
		all := true
		for _, n := range f.nodes {
			all = all && n.holds(v)
		}
		if all {
			return time.Since(begin)
		}
		if time.Now().After(deadline) {
			var lag []string
			for _, n := range f.nodes {
				if !n.holds(v) {
					lag = append(lag, n.node)
				}
			}
			f.t.Fatalf("%s: %v do not hold the value %s after it was written", what, lag, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check asserts that no node ever took an older value after a newer one
// (order lists the values in the order they were written), that nothing
// was cancelled, and that no program printed a value.
func (f *fleet) check(order []string) {
	f.t.Helper()
	rank := map[string]int{}
	for i, v := range order {
		rank[v] = i
	}
	for _, n := range f.nodes {
		last := -1
		for _, v := range n.seen() {
			r, ok := rank[v]
			if !assert.True(f.t, ok, "%s held a value never written", n.node) {
				continue
			}
			assert.Greater(f.t, r, last, "%s took an older value after a newer one", n.node)
			last = r
		}
	}
	for _, p := range append(f.procs(), f.allAgbots()...) {
		out := p.stdout.String() + p.stderr.String()
		assert.NotContains(f.t, out, "agreement cancelled", "%s cancelled an agreement", p.name)
		for _, v := range order {
			assert.NotContains(f.t, out, v, "%s printed a secret value", p.name)
		}
	}
}

func (f *fleet) allAgbots() []*proc {
	var out []*proc
	for _, p := range f.agbots {
		out = append(out, p)
	}
	return out
}

// values reads the current value of the store secret, as the fleet started.
func (f *fleet) initial() string {
	s, err := f.adm.store.Get(f.t.Context(), storeName)
	require.NoError(f.t, err)
	return string(s.Data["value"])
}

// One of two agbots sharing PostgreSQL is restarted, a secret rotates, the
// other is killed, it rotates again: every node holds each rotation within
// one lease period plus two intervals (plus scheduling slack), never takes
// an older value after a newer one, and nothing is cancelled. Identity
// records live in the shared state, so the restarted agbot verifies every
// agent; an agent it does not know registers again on its own.
func TestFleetSurvivesAgbotRestartThenKill(t *testing.T) {
	f := startFleet(t)
	v0 := f.initial()
	f.converge("first deploy", v0, stepTimeout)
	bound := fleetLease + 2*fleetInterval + fleetSlack

	a := f.agbots["agbot-a"]
	require.NoError(t, a.stop())
	f.startAgbot("agbot-a")
	v1 := f.rotate("v1")
	took := f.converge("rotation after restarting agbot-a", v1, bound)
	t.Logf("rotation after a restart reached every node in %s", took.Round(100*time.Millisecond))

	b := f.agbots["agbot-b"]
	require.NoError(t, b.cmd.Process.Kill())
	<-b.done
	v2 := f.rotate("v2")
	took = f.converge("rotation after killing agbot-b", v2, bound)
	t.Logf("rotation after a kill reached every node in %s", took.Round(100*time.Millisecond))
	f.check([]string{v0, v1, v2})
}

// The agbot polling the secret is frozen (SIGSTOP) past its lease while
// the secret rotates three times, then thawed: every node converges to the
// newest value, never takes an older value after a newer one, and nothing
// is cancelled.
func TestFleetSurvivesAFrozenAgbot(t *testing.T) {
	f := startFleet(t)
	v0 := f.initial()
	f.converge("first deploy", v0, stepTimeout)

	var frozen *proc
	waitFor(t, "one agbot to poll the secret", func() bool {
		a, b := f.agbots["agbot-a"], f.agbots["agbot-b"]
		switch {
		case watchesSomething(a) && !watchesSomething(b):
			frozen = a
		case watchesSomething(b) && !watchesSomething(a):
			frozen = b
		}
		return frozen != nil
	}, f.procs()...)
	require.NoError(t, frozen.cmd.Process.Signal(syscall.SIGSTOP))
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = frozen.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	time.Sleep(fleetLease + fleetInterval)
	order := []string{v0}
	for i := 1; i <= 3; i++ {
		order = append(order, f.rotate(fmt.Sprintf("v%d", i)))
		time.Sleep(fleetInterval)
	}
	require.NoError(t, frozen.cmd.Process.Signal(syscall.SIGCONT))
	thawed = true
	newest := order[len(order)-1]
	took := f.converge("the newest value after a frozen agbot", newest, fleetLease+2*fleetInterval+fleetSlack)
	t.Logf("%s frozen past its lease; the newest of three rotations reached every node %s after the thaw", frozen.name, took.Round(100*time.Millisecond))
	time.Sleep(2 * fleetInterval) // the thawed agbot must not roll anyone back
	for _, n := range f.nodes {
		assert.True(t, n.holds(newest), "%s holds the newest value", n.node)
	}
	f.check(order)
}
