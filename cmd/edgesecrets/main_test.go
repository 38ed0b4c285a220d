package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/agreement/delivery"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/pgtest"
)

// Generous bounds for a loaded 2-core machine.
const (
	stepTimeout = 120 * time.Second
	stopTimeout = 20 * time.Second
)

// storeName is the store secret examples/agbot/deployment.json binds.
const storeName = "myorg/web/api-key"

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edgesecrets-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildPrograms builds this command and the example agbot and agent once.
var buildPrograms = sync.OnceValues(func() ([]byte, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // SA1019: the test binary runs where it was built
	}
	cmd := exec.Command(goTool, "build", "-o", binDir+string(filepath.Separator), "./cmd/edgesecrets", "./examples/agbot", "./examples/agent")
	cmd.Dir = filepath.Join("..", "..") // the module root
	return cmd.CombinedOutput()
})

func program(t *testing.T, name string) string {
	t.Helper()
	out, err := buildPrograms()
	require.NoError(t, err, "building the programs:\n%s", out)
	return filepath.Join(binDir, name)
}

// proc is a running example program; its output is shown when the test
// fails.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr logtest.Buffer
	done           chan struct{}
	err            error
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(program(t, name), args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s exited: %v\n--- stdout:\n%s--- stderr:\n%s", name, p.err, p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// stop interrupts the program and kills it after stopTimeout.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func waitFor(t *testing.T, what string, cond func() bool, procs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for !cond() {
		for _, p := range procs {
			select {
			case <-p.done:
				t.Fatalf("waiting for %s: %s exited early: %v", what, p.name, p.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not done within %s", what, stepTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hub is the example agbot and one agent, with the secret value and the
// admin token no output may show.
type hub struct {
	dir, url, tokenFile, token, value string
	agbot, agent                      *proc
	// outputs collects every output of the command, for the canary.
	mu      sync.Mutex
	outputs []string
}

// startHub runs the example agbot (with extra flags) and an agent, and
// waits until the agent's agreement is in sync.
func startHub(t *testing.T, agbotArgs ...string) *hub {
	t.Helper()
	dir := t.TempDir()
	h := &hub{dir: dir, value: "canary-value-" + rand.Text()}
	preload := filepath.Join(dir, "preload.json")
	b, err := json.Marshal(map[string]map[string]string{storeName: {"value": h.value}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(preload, b, 0o600))
	agbotDir := filepath.Join(dir, "agbot")
	args := append([]string{"-listen", "127.0.0.1:0", "-addr-file", filepath.Join(dir, "agbot.url"), "-dir", agbotDir,
		"-deployment", filepath.Join("..", "..", "examples", "agbot", "deployment.json"), "-preload", preload,
		"-watch-interval", "1s", "-update-backoff", "1s", "-max-backoff", "2s", "-reply-timeout", "5s", "-grace", "0s"}, agbotArgs...)
	h.agbot = start(t, "agbot", args...)
	waitFor(t, "the agbot to listen", func() bool {
		u, err := os.ReadFile(filepath.Join(dir, "agbot.url"))
		h.url = strings.TrimSpace(string(u))
		return err == nil && h.url != ""
	}, h.agbot)
	h.tokenFile = filepath.Join(agbotDir, "admin-token")
	tok, err := os.ReadFile(h.tokenFile)
	require.NoError(t, err)
	h.token = strings.TrimSpace(string(tok))
	require.NotEmpty(t, h.token)
	h.agent = start(t, "agent", "-agbot", h.url, "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
		"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", filepath.Join(dir, "agent"),
		"-listen", "127.0.0.1:0", "-poll", "200ms")
	waitFor(t, "the agreement to be in sync", func() bool {
		code, out, _ := h.run(t, "-o", "json", "agreements", "-condition", "in_sync")
		var p delivery.Page
		return code == exitOK && json.Unmarshal([]byte(out), &p) == nil && len(p.Agreements) == 1
	}, h.agbot, h.agent)
	t.Cleanup(func() { h.checkCanary(t) })
	return h
}

// run runs the command in this process against the hub, with the agbot
// URL in the environment and the token from its file unless args say
// otherwise, and returns the exit code and outputs.
func (h *hub) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return h.runEnv(t, map[string]string{envAgbotURL: h.url}, append([]string{"-token-file", h.tokenFile}, args...)...)
}

func (h *hub) runEnv(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	code, out, errOut := runCLI(t, vars, args...)
	h.mu.Lock()
	h.outputs = append(h.outputs, out, errOut)
	h.mu.Unlock()
	return code, out, errOut
}

// checkCanary fails when any output showed the secret's value, the admin
// token or a checksum.
func (h *hub) checkCanary(t *testing.T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hexSum := regexp.MustCompile(`[0-9a-f]{64}`)
	for _, out := range h.outputs {
		assert.NotContains(t, out, h.value, "an output shows the secret's value")
		assert.NotContains(t, out, h.token, "an output shows the admin token")
		assert.False(t, hexSum.MatchString(out), "an output shows a checksum: %s", out)
	}
	assert.NotEmpty(t, h.outputs)
}

func runCLI(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	code := run(ctx, args, env{getenv: func(k string) string { return vars[k] }, stdout: &out, stderr: &errOut})
	return code, out.String(), errOut.String()
}

// agreementID returns the one agreement's id.
func (h *hub) agreementID(t *testing.T) string {
	t.Helper()
	code, out, errOut := h.run(t, "-o", "json", "agreements", "-condition", "in_sync")
	require.Equal(t, exitOK, code, errOut)
	var p delivery.Page
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Len(t, p.Agreements, 1)
	return p.Agreements[0].ID
}

// put writes the bound secret through the example agbot's demo admin API.
func (h *hub) put(t *testing.T, value string) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"value": value})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, h.url+"/admin/secrets/"+storeName, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
