package examples_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/binding"
	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/internal/testkit/logtest"
	"github.com/edgesecrets/edgesecrets/internal/testkit/vaulttest"
	"github.com/edgesecrets/edgesecrets/secretsapi"
	"github.com/edgesecrets/edgesecrets/secretstore"
	_ "github.com/edgesecrets/edgesecrets/secretstore/vault" // registers "vault" for the administrator's store
)

// Generous bounds for a loaded 2-core machine.
const (
	stepTimeout = 90 * time.Second
	stopTimeout = 20 * time.Second
)

// The names the sample deployment (examples/agbot/deployment.json) uses.
const (
	storeName     = "myorg/web/api-key" // the vault secret web/api-key of org myorg
	serviceSecret = "api_key"
	instance      = "web" // the service's container
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edgesecrets-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := vaulttest.Main(m) // runs the tests, then stops the shared Vault server
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildPrograms builds the three example programs once per test binary,
// with the race detector when the tests run with it.
var buildPrograms = sync.OnceValues(func() ([]byte, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // SA1019: the test binary runs where it was built
	}
	args := []string{"build", "-o", binDir + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool, append(args, "./examples/agbot", "./examples/agent", "./examples/service")...)
	cmd.Dir = ".." // the module root
	return cmd.CombinedOutput()
})

func program(t *testing.T, name string) string {
	t.Helper()
	out, err := buildPrograms()
	require.NoError(t, err, "building the example programs:\n%s", out)
	return filepath.Join(binDir, name)
}

// proc is a running example program whose output is kept, and shown only
// when the test fails.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr logtest.Buffer
	done           chan struct{}
	err            error
}

func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(program(t, name), args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.stop() // its error, if any, is in the output below
		if t.Failed() {
			t.Logf("%s exited: %v\n--- %s stdout:\n%s--- %s stderr:\n%s", name, p.err, name, p.stdout.String(), name, p.stderr.String())
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop interrupts the program, kills it if it has not exited within
// stopTimeout, and returns how it exited.
func (p *proc) stop() error {
	if !p.exited() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			return fmt.Errorf("%s did not stop within %s and was killed", p.name, stopTimeout)
		}
	}
	return p.err
}

// waitFor polls cond until it holds, failing when stepTimeout passes or a
// program exits early.
func waitFor(t *testing.T, what string, cond func() bool, procs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for !cond() {
		for _, p := range procs {
			if p.exited() {
				t.Fatalf("waiting for %s: %s exited early: %v", what, p.name, p.err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not done within %s", what, stepTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readURL(t *testing.T, path string) func() string {
	return func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
}

// admin writes and deletes secrets in the agbot's store, as a store
// administrator would.
type admin interface {
	put(ctx context.Context, name, value string) error
	del(ctx context.Context, name string) error
}

// backend is one store the three programs run against.
type backend struct {
	// storeConfig is the agbot's -store file; empty for the memory store.
	storeConfig string
	// env is extra environment for the agbot (credentials).
	env []string
	// admin returns the administrator for an agbot at url.
	admin func(t *testing.T, url, adminToken string) admin
	// secrets are credentials of the backend no output may show.
	secrets []string
}

// Each program explains itself with -h and refuses to start without its
// required flags, saying which.
func TestProgramsHelp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flags    []string // named in -h
		required string   // named when missing
	}{
		{"agbot", []string{"-deployment", "-store", "-listen", "-watch-interval"}, "-deployment is required"},
		{"agent", []string{"-agbot", "-agbot-keys", "-bootstrap-token-file", "-env-dir"}, "-agbot-keys and -bootstrap-token-file are required"},
		{"service", []string{"-env", "-poll"}, "-env is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(program(t, tc.name), "-h").CombinedOutput()
			require.NoError(t, err, "-h exits 0:\n%s", out)
			assert.Contains(t, string(out), "Usage: "+tc.name)
			for _, f := range tc.flags {
				assert.Contains(t, string(out), "  "+f+" ")
			}
			cmd := exec.Command(program(t, tc.name))
			cmd.Dir = t.TempDir()
			out, err = cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			assert.Equal(t, 1, exit.ExitCode())
			assert.Contains(t, string(out), tc.name+": "+tc.required)
		})
	}
}

func TestThreeProcessesMemory(t *testing.T) {
	runThreeProcesses(t, backend{admin: func(_ *testing.T, url, token string) admin { return &adminAPI{url: url, token: token} }})
}

// runThreeProcesses runs agbot, agent and service as separate programs and
// follows a secret through its life: written, delivered, rotated, deleted.
func runThreeProcesses(t *testing.T, b backend) {
	ctx := t.Context()
	dir := t.TempDir()
	agbotDir, agentDir := filepath.Join(dir, "agbot"), filepath.Join(dir, "agent")
	first, second, third, fourth := "first-"+rand.Text(), "second-"+rand.Text(), "third-"+rand.Text(), "fourth-"+rand.Text()

	agbotArgs := []string{"-listen", "127.0.0.1:0", "-addr-file", filepath.Join(dir, "agbot.url"), "-dir", agbotDir,
		"-deployment", filepath.Join("agbot", "deployment.json"), "-watch-interval", "1s", "-update-backoff", "1s",
		"-reply-timeout", "20s", "-max-backoff", "2s", "-grace", "0s", "-log-level", "debug"}
	if b.storeConfig != "" {
		agbotArgs = append(agbotArgs, "-store", b.storeConfig)
	}
	agbot := start(t, "agbot", b.env, agbotArgs...)
	agbotURL := readURL(t, filepath.Join(dir, "agbot.url"))
	waitFor(t, "the agbot to listen", func() bool { return agbotURL() != "" }, agbot)
	adminToken, err := demo.ReadToken(filepath.Join(agbotDir, "admin-token"))
	require.NoError(t, err)

	agentArgs := []string{"-agbot", agbotURL(), "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
		"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir,
		"-listen", "127.0.0.1:0", "-poll", "200ms", "-log-level", "debug"}
	agent := start(t, "agent", nil, agentArgs...)
	envFile := filepath.Join(agentDir, "env", instance+".json")
	service := start(t, "service", nil, "-env", envFile, "-poll", "200ms", "-log-level", "debug")
	procs := []*proc{agbot, agent, service}
	serviceSaw := func(line string) func() bool {
		return func() bool { return slices.Contains(strings.Split(service.stdout.String(), "\n"), line) }
	}

	// The agent registers; the deployment waits for its secret.
	waitFor(t, "the deployment to wait for its secret", func() bool {
		return strings.Contains(agbot.stderr.String(), "deployment waits for secrets")
	}, procs...)
	adm := b.admin(t, agbotURL(), adminToken)

	// Written: the agbot seals a proposal, the agent writes the mount.
	require.NoError(t, adm.put(ctx, storeName, first))
	waitFor(t, "the service to read the secret from its mount", serviceSaw("mount "+serviceSecret+" "+shortHash(first)), procs...)
	env, err := demo.ReadEnv(envFile)
	require.NoError(t, err)
	instanceTokens := []string{env.Token}
	status, body := secretsAPI(t, env, http.MethodGet, "/secrets")
	assert.Equal(t, http.StatusNotFound, status, "nothing is updated after the first delivery: %s", body)
	status, body = secretsAPI(t, env, http.MethodGet, "/secrets/"+serviceSecret)
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.JSONEq(t, `{"`+serviceSecret+`":{"details":"`+base64.StdEncoding.EncodeToString([]byte(first))+`"}}`, string(body))

	// Rotated: the agbot's delivery engine delivers an update; the service
	// sees it in GET /secrets, fetches it and acknowledges it.
	require.NoError(t, adm.put(ctx, storeName, second))
	waitFor(t, "the service to fetch the update", serviceSaw("update "+serviceSecret+" "+shortHash(second)), procs...)
	waitFor(t, "the service to acknowledge the update", serviceSaw("ack "+serviceSecret), procs...)
	assert.True(t, serviceSaw("mount "+serviceSecret+" "+shortHash(second))(), "the mount holds the new value")
	status, _ = secretsAPI(t, env, http.MethodGet, "/secrets")
	assert.Equal(t, http.StatusNotFound, status, "nothing left to acknowledge")

	// The agent restarts: it keeps the instance's files, registers again,
	// and hands the instance a new token, which the service picks up.
	// The next rotation still arrives.
	require.NoError(t, agent.stop(), "the agent exits cleanly")
	firstAgent := agent
	agent = start(t, "agent", nil, agentArgs...)
	procs = []*proc{agbot, agent, service}
	waitFor(t, "the restarted agent to publish its certificate", func() bool {
		return strings.Contains(agent.stderr.String(), "certificate published")
	}, procs...)
	content, err := os.ReadFile(filepath.Join(agentDir, "secrets", "instances", instance, serviceSecret))
	require.NoError(t, err)
	assert.Equal(t, second, string(content), "the mount survived the restart")
	require.NoError(t, adm.put(ctx, storeName, third))
	waitFor(t, "the service to fetch the update after the restart", serviceSaw("update "+serviceSecret+" "+shortHash(third)), procs...)
	waitFor(t, "the service to acknowledge it", func() bool { return strings.Count(service.stdout.String(), "ack "+serviceSecret+"\n") == 2 }, procs...)
	env, err = demo.ReadEnv(envFile)
	require.NoError(t, err)
	instanceTokens = append(instanceTokens, env.Token)

	// The existence API and /health answer over the same store.
	client, err := secretsapi.NewClient(agbotURL(), secretsapi.ClientOptions{Authorize: func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken) }})
	require.NoError(t, err)
	name, err := binding.ParseVaultSecretName("web/api-key")
	require.NoError(t, err)
	exists, err := client.SecretExists(ctx, name)
	require.NoError(t, err)
	assert.True(t, exists)
	health, err := client.Health(ctx)
	require.NoError(t, err)
	require.NotNil(t, health.LiveHealth)
	assert.NotZero(t, health.LiveHealth.LastVaultInteraction)

	// Deleted: the engine cancels the agreement; the agent wipes the
	// instance and withdraws its environment.
	require.NoError(t, adm.del(ctx, storeName))
	instanceDir := filepath.Join(agentDir, "secrets", "instances", instance)
	waitFor(t, "the agent to wipe the instance", func() bool {
		_, err1 := os.Stat(instanceDir)
		_, err2 := os.Stat(envFile)
		return errors.Is(err1, fs.ErrNotExist) && errors.Is(err2, fs.ErrNotExist)
	}, procs...)
	waitFor(t, "the service to see its secret gone", serviceSaw("removed "+serviceSecret), procs...)
	status, _ = secretsAPI(t, env, http.MethodGet, "/secrets/"+serviceSecret)
	assert.Equal(t, http.StatusUnauthorized, status, "the withdrawn instance's token no longer works")

	// Written again: the node's deployment, waiting since the deletion, is
	// retried with a new agreement.
	accepted := func() int { return strings.Count(agbot.stderr.String(), `msg="the agent accepted"`) }
	acceptedBefore := accepted()
	require.NoError(t, adm.put(ctx, storeName, fourth))
	waitFor(t, "the service to get the secret back", serviceSaw("mount "+serviceSecret+" "+shortHash(fourth)), procs...)
	// The agbot heard the agent accept the new proposal: an agent stopped
	// before its reply arrived leaves the agreement unacknowledged, and
	// its successor is proposed to as a first agent, not as one with new
	// keys.
	waitFor(t, "the agbot to hear the agent accept", func() bool { return accepted() > acceptedBefore }, procs...)

	// A new agent on the node (its state wiped, new keys): the agbot
	// replaces the agreement and seals to the new keys.
	require.NoError(t, agent.stop(), "the agent exits cleanly")
	secondAgent := agent
	require.NoError(t, os.RemoveAll(agentDir))
	agent = start(t, "agent", nil, agentArgs...)
	procs = []*proc{agbot, agent, service}
	waitFor(t, "the new agent to get the secret", func() bool {
		b, err := os.ReadFile(filepath.Join(agentDir, "secrets", "instances", instance, serviceSecret))
		return err == nil && string(b) == fourth
	}, procs...)
	assert.Contains(t, agbot.stderr.String(), "the node's agent has new keys; the engine proposes its agreement again")
	waitFor(t, "the new agent to write the environment", func() bool {
		env, err = demo.ReadEnv(envFile)
		return err == nil
	}, procs...)
	instanceTokens = append(instanceTokens, env.Token)
	status, body = secretsAPI(t, env, http.MethodGet, "/secrets/"+serviceSecret)
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.JSONEq(t, `{"`+serviceSecret+`":{"details":"`+base64.StdEncoding.EncodeToString([]byte(fourth))+`"}}`, string(body))

	for _, p := range []*proc{service, agent, agbot} {
		assert.NoError(t, p.stop(), "%s exits cleanly", p.name)
	}
	// No file of the agbot's, its delivery state file included, holds a
	// value, after a whole flow at debug level.
	assertNoValueInDir(t, agbotDir, first, second, third, fourth)
	// Nothing the programs printed or logged holds a value or a token, in
	// any encoding.
	bootstrapToken, err := demo.ReadToken(filepath.Join(agbotDir, "bootstrap-token"))
	require.NoError(t, err)
	hidden := append([]string{first, second, third, fourth, adminToken, bootstrapToken}, b.secrets...)
	hidden = append(hidden, instanceTokens...)
	for _, p := range append(procs, firstAgent, secondAgent) {
		out := p.stdout.String() + p.stderr.String()
		for _, v := range hidden {
			for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v))} {
				assert.NotContains(t, out, form, "%s printed a secret value or token", p.name)
			}
		}
	}
}

// secretsAPI calls the agent's /secrets API as the service instance.
func secretsAPI(t *testing.T, env demo.Env, method, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, env.API+path, nil)
	require.NoError(t, err)
	req.SetBasicAuth(env.Instance, env.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, buf.Bytes()
}

// shortHash is what the service prints for a secret file's content.
func shortHash(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:6])
}

// adminAPI writes through the agbot's demo admin API (the memory store
// lives in the agbot's process).
type adminAPI struct {
	url, token string
}

func (a *adminAPI) put(ctx context.Context, name, value string) error {
	body, err := json.Marshal(map[string]string{"value": value})
	if err != nil {
		return err
	}
	return a.do(ctx, http.MethodPut, name, body, http.StatusOK)
}

func (a *adminAPI) del(ctx context.Context, name string) error {
	return a.do(ctx, http.MethodDelete, name, nil, http.StatusNoContent)
}

func (a *adminAPI) do(ctx context.Context, method, name string, body []byte, want int) error {
	req, err := http.NewRequestWithContext(ctx, method, a.url+"/admin/secrets/"+name, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d", method, name, resp.StatusCode)
	}
	return nil
}

// The same flow against a real Vault dev server (KV v2): the agbot reads
// Vault with a token from its environment, and the administrator writes
// to Vault directly, as the vault CLI would. Outside CI it skips without
// the server binary (see internal/testkit/vaulttest); in CI it fails.
func TestThreeProcessesVault(t *testing.T) {
	srv := vaulttest.Shared(t)
	mount := srv.EnableKV(t, 2)
	// The README's store.json, on this server's own KV v2 mount.
	section := map[string]any{"address": srv.Addr, "mount": mount, "auth": map[string]any{"method": "token", "tokenEnv": "VAULT_TOKEN"}}
	cfg, err := json.Marshal(map[string]any{"type": "vault", "defaultScope": "openhorizon", "vault": section})
	require.NoError(t, err)
	cfgPath := filepath.Join(t.TempDir(), "store.json")
	require.NoError(t, os.WriteFile(cfgPath, cfg, 0o600))

	// The administrator's own client of the same Vault.
	section["auth"] = map[string]any{"method": "token", "token": srv.RootToken}
	adminCfg, err := json.Marshal(map[string]any{"type": "vault", "defaultScope": "openhorizon", "vault": section})
	require.NoError(t, err)
	parsed, err := secretstore.ParseConfig(bytes.NewReader(adminCfg))
	require.NoError(t, err)
	store, err := secretstore.Open(t.Context(), parsed, secretstore.OpenOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })

	runThreeProcesses(t, backend{
		storeConfig: cfgPath,
		env:         []string{"VAULT_TOKEN=" + srv.RootToken},
		admin:       func(*testing.T, string, string) admin { return storeAdmin{store} },
		secrets:     []string{srv.RootToken},
	})
}

// storeAdmin writes with a secretstore backend of its own.
type storeAdmin struct{ store *secretstore.Store }

func (a storeAdmin) put(ctx context.Context, name, value string) error {
	_, err := a.store.Put(ctx, &secretstore.Secret{Name: name, Data: edgesecrets.Data{"value": []byte(value)}}, secretstore.PutOptions{})
	return err
}

func (a storeAdmin) del(ctx context.Context, name string) error { return a.store.Delete(ctx, name) }
