package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgesecrets/edgesecrets/examples/internal/demo"
	"github.com/edgesecrets/edgesecrets/internal/testkit"
)

// helloDir holds open-horizon/examples' helloSecretWorld: its service
// script, verbatim, and its service definition and deployment policy as
// the example agbot's deployment (see SOURCE.md there).
const helloDir = "testdata/hellosecretworld"

// The helloSecretWorld service's own script (open-horizon/examples
// edge/services/helloSecretWorld/service.sh) runs with bash, curl and jq
// against the example agent in the Open Horizon profile, as its container
// would: its secret file at open-horizon-secrets/hw_who, its ESS
// credentials in $HZN_ESS_AUTH, the agent's certificate in $HZN_ESS_CERT
// and the agent's unix socket in $HZN_ESS_API_ADDRESS. The administrator
// writes the secret through the agbot's secrets-manager API as hzn
// secretsmanager secret add does. The script reads the mounted file
// ("Hello World!"), sees the rotation in GET /api/v1/secrets, reads the new
// value and acknowledges it ("Hello Everyone!"); then, with its
// update_secret_API variant (line 91's alternative), it reads .value from
// GET /api/v1/secrets/hw_who ("Hello Universe!").
func TestHelloSecretWorld(t *testing.T) {
	shell := requireTools(t, "bash", "curl", "jq", "sleep")
	ctx := t.Context()
	dir := t.TempDir()
	agbotDir, agentDir := filepath.Join(dir, "agbot"), filepath.Join(dir, "agent")

	agbot := start(t, "agbot", nil, "-listen", "127.0.0.1:0", "-addr-file", filepath.Join(dir, "agbot.url"), "-dir", agbotDir,
		"-deployment", filepath.Join(helloDir, "deployment.json"), "-watch-interval", "1s", "-update-backoff", "1s", "-log-level", "debug")
	agbotURL := readURL(t, filepath.Join(dir, "agbot.url"))
	waitFor(t, "the agbot to listen", func() bool { return agbotURL() != "" }, agbot)
	adminToken, err := demo.ReadToken(filepath.Join(agbotDir, "admin-token"))
	require.NoError(t, err)
	// hzn secretsmanager secret add -u myorg/admin:<token> --secretKey name --secretDetail World hw-secret-name
	addSecret := func(value string) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"key": "name", "value": value})
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, agbotURL()+"/org/myorg/secrets/hw-secret-name", bytes.NewReader(body))
		require.NoError(t, err)
		req.SetBasicAuth("myorg/admin", adminToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
	}
	addSecret("World")

	agent := start(t, "agent", nil, "-agbot", agbotURL(), "-agbot-keys", filepath.Join(agbotDir, "agbot.pub"),
		"-bootstrap-token-file", filepath.Join(agbotDir, "bootstrap-token"), "-dir", agentDir,
		"-listen", "127.0.0.1:0", "-poll", "200ms", "-profile", "openhorizon", "-log-level", "debug")
	procs := []*proc{agbot, agent}
	envFile := filepath.Join(agentDir, "env", "ibm.hello-secret.json")
	waitFor(t, "the agent to provide the service instance", func() bool { _, err := os.Stat(envFile); return err == nil }, procs...)
	env, err := demo.ReadEnv(envFile)
	require.NoError(t, err)

	// The container: its working directory with the mount, its ESS
	// credentials file, and a sleep that does not hold the test up.
	container := t.TempDir()
	require.NoError(t, os.Symlink(env.Mount, filepath.Join(container, "open-horizon-secrets")))
	auth, _ := json.Marshal(map[string]string{"id": env.Instance, "token": env.Token})
	require.NoError(t, os.WriteFile(filepath.Join(container, "auth.json"), auth, 0o600))
	bin := filepath.Join(container, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "sleep"), []byte("#!"+shell["bash"]+"\nexec "+shell["sleep"]+" 0.2\n"), 0o755))
	containerEnv := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HZN_ESS_AUTH=" + filepath.Join(container, "auth.json"),
		"HZN_ESS_CERT=" + filepath.Join(agentDir, "ess", demo.ESSCertFile),
		"HZN_ESS_API_ADDRESS=" + filepath.Join(agentDir, "ess", demo.ESSSocketFile),
		"HZN_DEVICE_ID=node-1",
	}

	script, err := os.ReadFile(filepath.Join(helloDir, "service.sh"))
	require.NoError(t, err)
	fileVariant := filepath.Join(container, "service.sh")
	require.NoError(t, os.WriteFile(fileVariant, script, 0o755))

	// The script as shipped: it reads the file, then follows the updates.
	service := runScript(t, shell["bash"], fileVariant, container, containerEnv)
	waitFor(t, "the script to greet from the mounted file", service.saw("node-1 says: Hello World!"), append(procs, service.proc)...)
	addSecret("Everyone")
	waitFor(t, "the script to see the update and greet again", service.saw("node-1 says: Hello Everyone!"), append(procs, service.proc)...)
	waitFor(t, "the acknowledgement", func() bool { return essList(t, agentDir, env) == http.StatusNotFound }, procs...)
	assert.False(t, service.exited(), "the script runs on: every HTTP code was what it expects")
	require.NoError(t, service.stop())

	// Its update_secret_API variant: the new value comes from .value of
	// GET /api/v1/secrets/hw_who.
	apiScript := bytes.Replace(script, []byte("update_secret_file # can also use update_secret_API"), []byte("update_secret_API # the variant"), 1)
	require.NotEqual(t, script, apiScript, "line 91 is where the script says it is")
	apiVariant := filepath.Join(container, "service-api.sh")
	require.NoError(t, os.WriteFile(apiVariant, apiScript, 0o755))
	service = runScript(t, shell["bash"], apiVariant, container, containerEnv)
	waitFor(t, "the variant to greet from the mounted file", service.saw("node-1 says: Hello Everyone!"), append(procs, service.proc)...)
	addSecret("Universe")
	waitFor(t, "the variant to read .value from the API", service.saw("node-1 says: Hello Universe!"), append(procs, service.proc)...)
	waitFor(t, "the acknowledgement", func() bool { return essList(t, agentDir, env) == http.StatusNotFound }, procs...)
	assert.False(t, service.exited())
	require.NoError(t, service.stop())

	for _, out := range []string{agbot.stderr.String(), agent.stderr.String()} {
		for _, never := range []string{"Everyone", "Universe", env.Token, adminToken} {
			assert.NotContains(t, out, never)
		}
	}
}

// requireTools finds the programs, failing under CI and skipping elsewhere
// when one is missing.
func requireTools(t *testing.T, names ...string) map[string]string {
	t.Helper()
	found := map[string]string{}
	for _, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			const how = "install them with apt-get install -y curl jq (scripts/test.sh does when it may)"
			testkit.Unavailable(t, fmt.Sprintf("%s is missing; %s", name, how))
		}
		found[name] = p
	}
	return found
}

// essList calls GET /api/v1/secrets over the agent's socket as the
// instance and returns the status.
func essList(t *testing.T, agentDir string, env demo.Env) int {
	t.Helper()
	client, err := demo.ESSClient(filepath.Join(agentDir, "ess", demo.ESSCertFile), filepath.Join(agentDir, "ess", demo.ESSSocketFile))
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://localhost/api/v1/secrets", nil)
	require.NoError(t, err)
	req.SetBasicAuth(env.Instance, env.Token)
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// script is a running shell script, as a proc.
type script struct{ *proc }

func runScript(t *testing.T, bash, path, dir string, env []string) script {
	t.Helper()
	p := &proc{name: filepath.Base(path), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	p.cmd = exec.CommandContext(ctx, bash, path)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
		if t.Failed() {
			t.Logf("%s exited: %v\n--- stdout:\n%s--- stderr:\n%s", p.name, p.err, p.stdout.String(), p.stderr.String())
		}
	})
	return script{p}
}

func (s script) saw(line string) func() bool {
	return func() bool { return strings.Contains(s.stdout.String(), line+"\n") }
}

// stop ends the script, which loops forever, and reports whether it had
// failed before.
func (s script) stop() error {
	if s.exited() {
		return fmt.Errorf("%s exited by itself: %v", s.name, s.err)
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	return nil
}
